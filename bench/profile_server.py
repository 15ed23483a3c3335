"""Profile the groupd server a bench command starts, while that command's load runs (issue 27, round
four): py-spy (Python frames, self and total) and optionally perf (the process by shared object).

    .venv/bin/python bench/profile_server.py --out /tmp/hb --when loadgen-go -- \\
        .venv/bin/python bench/run_groups.py --targets groupd --driver go --pin 0:1 --sizes '' \\
        --form-sizes '' --repeat 1 --seconds 8
    .venv/bin/python bench/profile_server.py --out /tmp/commit --delay 2 --perf -- \\
        .venv/bin/python bench/storage_bench.py --only commit --flush 0 --partitions 1 --connections 100 --seconds 8

The first (--nth) `groupd.coordinator serve` process among the command's descendants is profiled,
for --seconds, starting --delay seconds after it appears or, with --when TEXT, once a descendant
whose command line holds TEXT runs (the compiled driver `loadgen-go` starts with the measured window,
after the members have formed their groups). py-spy samples with --nonblocking, so the server is
never stopped; its samples of an idle thread are dropped. Writes OUT/pyspy.txt (collapsed stacks),
OUT/top.txt, the command's own output in OUT/bench.txt and, with --perf, OUT/perf.data and
OUT/perf-dso.txt. Needs py-spy (pip install py-spy) and, for --perf, /usr/bin/perf; both attach with
ptrace/perf_event, so run as a user allowed to.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = open(f"/proc/{name}/stat").read()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> list[tuple[int, str]]:
    kids, out, todo = _children(), [], [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append((child, _cmdline(child)))
            todo.append(child)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the profiles")
    ap.add_argument("--seconds", type=float, default=4.0, help="how long to sample")
    ap.add_argument("--delay", type=float, default=1.0, help="seconds after the server appears")
    ap.add_argument("--when", help="start once a descendant's command line holds this text")
    ap.add_argument("--nth", type=int, default=1, help="profile the nth server the command starts (1: the first)")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--perf", action="store_true", help="also perf record -g the server")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    os.makedirs(args.out, exist_ok=True)
    bench_log = open(os.path.join(args.out, "bench.txt"), "w")
    bench = subprocess.Popen(command, stdout=bench_log, stderr=subprocess.STDOUT)
    server, seen_at, servers = None, None, []
    while bench.poll() is None:
        procs = descendants(bench.pid)
        if server is None:
            servers += [pid for pid, cmd in procs if "groupd.coordinator serve" in cmd and pid not in servers]
            server = servers[args.nth - 1] if len(servers) >= args.nth else None
            seen_at = time.monotonic()
        elif args.when is None and time.monotonic() - seen_at >= args.delay:
            break
        elif args.when is not None and any(args.when in cmd for _, cmd in procs):
            time.sleep(0.5)  # past the driver's connect
            break
        time.sleep(0.05)
    else:
        print("profile_server: the bench command ended before the profile started", file=sys.stderr)
        return 1
    raw = os.path.join(args.out, "pyspy.txt")
    spy = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "-p", str(server),
                            "-d", str(int(args.seconds)), "-r", str(args.rate), "--nonblocking", "--function",
                            "--format", "raw", "-o", raw], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    perf = None
    if args.perf:
        perf = subprocess.Popen(["/usr/bin/perf", "record", "-q", "-g", "-p", str(server), "-o",
                                 os.path.join(args.out, "perf.data"), "--", "sleep", str(args.seconds)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spy.wait()
    if perf is not None:
        perf.wait()
        with open(os.path.join(args.out, "perf-dso.txt"), "w") as f:
            subprocess.run(["/usr/bin/perf", "report", "-i", os.path.join(args.out, "perf.data"), "--no-children",
                            "--sort", "dso", "-g", "none", "--stdio", "-q"], stdout=f, stderr=subprocess.DEVNULL)
    bench.wait()
    bench_log.close()
    print(open(bench_log.name).read())
    if not os.path.exists(raw):
        print("profile_server: py-spy wrote nothing (permissions? the server gone?)", file=sys.stderr)
        return 1
    top = subprocess.run([sys.executable, os.path.join(HERE, "collapsed_top.py"), raw, "-n", str(args.top)],
                         capture_output=True, text=True).stdout
    with open(os.path.join(args.out, "top.txt"), "w") as f:
        f.write(top)
    print(top)
    if perf is not None:
        print(open(os.path.join(args.out, "perf-dso.txt")).read()[:1500])
    return bench.returncode


if __name__ == "__main__":
    raise SystemExit(main())
