"""Apache Kafka itself for side-by-side benchmarks: start the reference broker (tests/support/kafka.py) on a
free 127.0.0.1 port with groupd's group settings, print how long it took to be ready and its RSS at idle,
then stop — or, with --hold, keep it running (bootstrap on stdout) until Ctrl-C, for bench/loadgen.py or
any other load generator to aim at.

    make bench-kafka                               # JVM defaults (as Kafka ships: default heap, G1, C2)
    make bench-kafka ARGS="--test-jvm"             # the tests' JVM: -Xmx512m, serial GC, C1 only
    .venv/bin/python bench/kafka_reference.py --hold --port 29092
    KAFKA_REF_VERSION=4.4.0 make bench-kafka       # another release (.ci/install-kafka first)

Needs the jars of .ci/install-kafka (`make kafka`). `bench_broker()` is the Kafka leg of issue 26's
side-by-side table (bench/side_by_side.py): one broker for the whole run, with the settings groupd runs
with in the load benches (BENCH_SETTINGS) and the JVM's defaults.
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

from groupd.protocol.apis import ApiKey  # noqa: E402
from tests.support.kafka import TEST_JVM, VERSION, KafkaBroker  # noqa: E402
from tests.support.process import WireClient  # noqa: E402

# groupd's settings in the load benches, where Kafka has the same key: 50 offsets partitions (groupd's
# default, so 100 committing groups spread alike), no initial rebalance delay (run_groups.py forms groups
# with 0), short sessions allowed, and the consumer-group heartbeat interval of run_consumer_groups.py.
# Kafka's own default minimum interval is 5 s; both servers get 250 ms, which paces only the join.
CONSUMER_INTERVAL_MS = 250
BENCH_SETTINGS = {
    "offsets.topic.num.partitions": "50",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": str(CONSUMER_INTERVAL_MS),
    "group.consumer.min.heartbeat.interval.ms": str(CONSUMER_INTERVAL_MS),
}


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of `pid` in MB (`field` VmHWM: its peak so far)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench_broker(data_dir: str, settings: dict[str, str] | None = None) -> tuple[KafkaBroker, float]:
    """A started broker with BENCH_SETTINGS (+ `settings`) and the JVM's defaults, and the seconds from
    format to ready (every offsets partition loaded, tests/support/kafka.py)."""
    broker = KafkaBroker(data_dir, settings={**BENCH_SETTINGS, **(settings or {})}, jvm=[])
    started = time.monotonic()
    broker.start()
    return broker, time.monotonic() - started


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Topic `name` with `partitions` partitions, each with a leader, before returning (bounded: 60 s)."""
    import datetime

    with WireClient(bootstrap, timeout=60) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": datetime.timedelta(seconds=60), "validate_only": False})
        assert r.topics[0].error_code == 0, r.topics[0]
        deadline = time.monotonic() + 60
        while True:  # CreateTopics answers before every partition has its leader
            meta = c.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": None, "name": name}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
            parts = meta.topics[0].partitions
            if meta.topics[0].error_code == 0 and len(parts) == partitions and all(
                    p.error_code == 0 and p.leader_id >= 0 for p in parts):
                return
            assert time.monotonic() < deadline, f"{name}: not every partition has a leader"
            time.sleep(0.05)


def set_offsets_flush(bootstrap: str, messages: int | None) -> None:
    """`flush.messages` of __consumer_offsets (None: back to the broker's default, no fsync of its own):
    with 1 every append to it is fsynced before it is acknowledged, as groupd's log.flush.interval.ms=0."""
    op = {"name": "flush.messages", "config_operation": 0 if messages else 1,
          "value": str(messages) if messages else None}
    with WireClient(bootstrap, timeout=60) as c:
        r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 2, "resource_name": "__consumer_offsets", "configs": [op]}], "validate_only": False})
        assert r.responses[0].error_code == 0, r.responses[0]


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
