"""The long fuzz run (`make fuzz`): mutated golden requests against a real groupd process, in bursts;
after each burst, check that the process is alive and a fresh client is answered. Prints frames
sent, crashes, hangs, RSS before/after. Crashes restart the server and are counted; the run fails
(exit 1) if there was any crash, hang or traceback.

    python bench/fuzz.py --frames 1000000 [--seed N] [--burst 20000] [--per-connection 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.support.fuzz_frames import Mutator, corpus, fresh_client_seconds, rss_mb, send_burst  # noqa: E402
from tests.support.process import GroupdProcess  # noqa: E402

HANG_S = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--burst", type=int, default=20_000, help="frames between liveness checks")
    ap.add_argument("--per-connection", type=int, default=8, help="frames pipelined on one connection")
    ap.add_argument("--workers", type=int, default=24, help="concurrent connections")
    args = ap.parse_args()

    server = GroupdProcess(tempfile.mkdtemp(prefix="groupd-fuzz-"), "topics=golden-a:2,golden-existing:1",
                           "group.initial.rebalance.delay.ms=0").start()
    mutator = Mutator(args.seed, corpus())
    sent = crashes = hangs = 0
    rss_before = rss_peak = rss_mb(server.proc.pid)
    started = time.monotonic()
    try:
        while sent < args.frames:
            stats = send_burst(server.port, mutator, min(args.burst, args.frames - sent),
                               per_connection=args.per_connection, workers=args.workers)
            sent += stats.frames
            if not server.alive():
                crashes += 1
                print(f"CRASH after {sent} frames (exit {server.proc.returncode}):\n{server.log()[-2000:]}")
                server.start()
                continue
            try:
                waited = fresh_client_seconds(server.bootstrap, timeout=HANG_S * 6)
            except OSError as e:
                waited = float("inf")
                print(f"no answer to a fresh client after {sent} frames: {e}")
            if waited > HANG_S:
                hangs += 1
                print(f"HANG: a fresh client waited {waited:.1f} s after {sent} frames")
            rss_peak = max(rss_peak, rss_mb(server.proc.pid))
            rate = sent / (time.monotonic() - started)
            print(f"frames={sent} connections+={stats.connections} rss={rss_mb(server.proc.pid):.0f}MB "
                  f"fresh_client_ms={waited * 1000:.1f} rate={rate:.0f}/s", flush=True)
        rss_after = rss_mb(server.proc.pid)
    finally:
        server.stop()
    tracebacks = server.log().count("Traceback")
    print(f"\nfuzz seed={args.seed} frames={sent} seconds={time.monotonic() - started:.0f} crashes={crashes} "
          f"hangs={hangs} tracebacks={tracebacks} rss_before={rss_before:.0f}MB rss_after={rss_after:.0f}MB "
          f"rss_peak={rss_peak:.0f}MB log={server.log_path}")
    return 1 if crashes or hangs or tracebacks else 0


if __name__ == "__main__":
    sys.exit(main())
