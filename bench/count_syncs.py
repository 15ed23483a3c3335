"""Count the syncs (fsync, fdatasync, syncfs calls) of each groupd server a bench command starts,
during its load: `perf stat` of the syscall tracepoints, attached at each of --at seconds after the
server appears, for --seconds each (issue 27 round five, durable commits). Cheap, unlike strace: the bench's
own figures move little with it attached.

    .venv/bin/python bench/count_syncs.py --at 2,9.5 --seconds 4 -- .venv/bin/python bench/storage_bench.py \\
        --only commit --flush 0 --partitions 1,5 --connections 100 --echo --pin 0:1 --seconds 6

(storage_bench.py runs both points on one server, one after the other: 1 s of warm-up and 6 s each,
so windows at 2 s and 9.5 s fall inside the 1- and the 5-partition point.)

Prints the bench's output, then per window: syncs per second of each kind. Needs /usr/bin/perf and
the tracepoints readable (perf_event_paranoid, or root).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_server import descendants  # noqa: E402

EVENTS = ["syscalls:sys_enter_fsync", "syscalls:sys_enter_fdatasync", "syscalls:sys_enter_syncfs"]


def count(pid: int, seconds: float) -> dict[str, int]:
    out = subprocess.run(["/usr/bin/perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p", str(pid), "--",
                          "sleep", str(seconds)], capture_output=True, text=True).stderr
    counts = {}
    for line in out.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] in EVENTS and fields[0].isdigit():
            counts[fields[2].rpartition("_")[2]] = int(fields[0])
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0, help="how long to count, per server")
    ap.add_argument("--at", default="2", help="when to count: seconds after a server appears, comma-separated")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[int] = []
    results: list[tuple[int, dict[str, int]]] = []
    while bench.poll() is None:
        new = [pid for pid, cmd in descendants(bench.pid) if "groupd.coordinator serve" in cmd and pid not in seen]
        for pid in new:
            seen.append(pid)
            appeared = time.monotonic()
            for at in (float(a) for a in args.at.split(",")):
                time.sleep(max(0.0, appeared + at - time.monotonic()))
                results.append((pid, count(pid, args.seconds)))
        time.sleep(0.05)
    print(bench.stdout.read())
    for n, (pid, counts) in enumerate(results, 1):
        rates = ", ".join(f"{kind} {c / args.seconds:,.0f}/s" for kind, c in counts.items())
        print(f"window {n} (server pid {pid}): {rates}; all syncs {sum(counts.values()) / args.seconds:,.0f}/s")
    return bench.returncode


if __name__ == "__main__":
    raise SystemExit(main())
