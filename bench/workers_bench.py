"""Heartbeats/s and durable commits/s of `groupd serve --workers N`, for each N asked (default 1 and 2),
with the machine's load average, so the figures can be read against what else ran.

    python bench/workers_bench.py [--workers 1,2] [--seconds 5] [--members 1000] [--groups 100] [--connections 100]

Per N: a fresh supervisor with N workers on free 127.0.0.1 ports (workers=1 is the plain single
process); heartbeats from bench/members.py (each member joins at, and heartbeats to, the worker that
coordinates its group), then OffsetCommits from bench/storage_bench.py's committers (one group per
connection, each at its owner, `log.flush.interval.ms=0`: every acknowledged commit is fsynced).
Server CPU is the sum over the worker processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.dirname(BENCH))
from storage_bench import _commit_load, cpu_seconds, table  # noqa: E402

from tests.support.process import GroupdProcess, free_ports  # noqa: E402


def serving_pids(server: GroupdProcess, workers: int) -> list[int]:
    """The processes that serve: the server itself, or the supervisor's worker children."""
    if workers == 1:
        return [server.proc.pid]
    with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as f:
        return [int(pid) for pid in f.read().split()]


def heartbeats(port: int, workers: int, pids: list[int], args) -> dict:
    out = subprocess.run([sys.executable, os.path.join(BENCH, "members.py"), "heartbeat", "--port", str(port),
                          "--workers", str(workers), "--members", str(args.members), "--groups", str(args.groups),
                          "--seconds", str(args.seconds), "--warmup", str(args.warmup),
                          "--server-pid", ",".join(map(str, pids))],
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def commits(port: int, workers: int, pids: list[int], args) -> dict:
    cpu0, t0 = sum(cpu_seconds(p) for p in pids), time.monotonic()
    out = asyncio.run(_commit_load(port, args.connections, 1, args.warmup, args.seconds, workers))
    cpu = (sum(cpu_seconds(p) for p in pids) - cpu0) / (time.monotonic() - t0)
    return {"commits_per_s": round(out["acked"] / args.seconds), "bad": out["bad"], "server_cpu_pct": round(100 * cpu)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--members", type=int, default=1000, help="heartbeat: members (one connection each)")
    ap.add_argument("--groups", type=int, default=100, help="heartbeat: groups they are spread over")
    ap.add_argument("--connections", type=int, default=100, help="commits: connections, one group each")
    args = ap.parse_args()
    rows = []
    for n in args.workers:
        with tempfile.TemporaryDirectory(prefix="groupd-workers-bench-") as tmp:
            server = GroupdProcess(tmp, f"workers={n}", "topics=t:8", "log.flush.interval.ms=0",
                                   "group.initial.rebalance.delay.ms=1000", port=free_ports(n),
                                   ready="workers ready" if n > 1 else "offsets log loaded").start(timeout=120)
            try:
                pids = serving_pids(server, n)
                load0 = os.getloadavg()[0]
                hb = heartbeats(server.port, n, pids, args)
                cm = commits(server.port, n, pids, args)
                load1 = os.getloadavg()[0]
            finally:
                server.stop()
        rows.append([n, hb["hb_per_s"], hb["p99_us"], hb["errors"], hb["server_cpu_pct"], hb["client_cpu_pct"],
                     cm["commits_per_s"], cm["bad"], cm["server_cpu_pct"], f"{load0:.2f} / {load1:.2f}"])
        print(f"workers={n}: {hb['hb_per_s']:,} heartbeats/s, {cm['commits_per_s']:,} durable commits/s", flush=True)
    print(f"\n{os.cpu_count()} cores; load average (1 min) before / after each run")
    print(table(["workers", "heartbeats/s", "hb p99 us", "hb errors", "server cpu % (hb)", "client cpu % (hb)",
                 "durable commits/s", "bad replies", "server cpu % (commits)", "load avg"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
