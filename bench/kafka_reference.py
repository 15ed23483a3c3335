"""Apache Kafka itself for side-by-side benchmarks: start the reference broker (tests/support/kafka.py) on a
free 127.0.0.1 port with groupd's group settings, print how long it took to be ready and its RSS at idle,
then stop — or, with --hold, keep it running (bootstrap on stdout) until Ctrl-C, for bench/loadgen.py or
any other load generator to aim at.

    make bench-kafka                               # JVM defaults (as Kafka ships: default heap, G1, C2)
    make bench-kafka ARGS="--test-jvm"             # the tests' JVM: -Xmx512m, serial GC, C1 only
    .venv/bin/python bench/kafka_reference.py --hold --port 29092
    KAFKA_REF_VERSION=4.4.0 make bench-kafka       # another release (.ci/install-kafka first)

Needs the jars of .ci/install-kafka (`make kafka`). Side-by-side tables (heartbeats/s, commits/s, group
formation against groupd and the echo server) are issue 26's next step; this is their Kafka leg.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.support.kafka import TEST_JVM, VERSION, KafkaBroker  # noqa: E402


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=None, help="the broker's port (default: a free one)")
    parser.add_argument("--version", default=VERSION, help=f"Apache Kafka release (default {VERSION})")
    parser.add_argument("--test-jvm", action="store_true", help=f"the tests' JVM options {TEST_JVM}")
    parser.add_argument("--hold", action="store_true", help="keep the broker running until Ctrl-C")
    args = parser.parse_args()

    data = tempfile.mkdtemp(prefix="kafka-reference-")
    broker = KafkaBroker(data, port=args.port, version=args.version, jvm=None if args.test_jvm else [])
    started = time.monotonic()
    broker.start()
    ready = time.monotonic() - started
    jvm = " ".join(TEST_JVM) if args.test_jvm else "JVM defaults"
    print(f"Apache Kafka {args.version} ({jvm}): ready in {ready:.1f} s (format + start + every offsets "
          f"partition loaded), RSS at idle {rss_mb(broker.proc.pid):.0f} MB", flush=True)
    try:
        if args.hold:
            print(f"bootstrap={broker.bootstrap} (Ctrl-C stops it)", flush=True)
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    sys.exit(main())
