"""One command for the report: ApiVersions v3 load against the echo server and against groupd.

    python bench/run_apiversions.py [--seconds 5] [--warmup 1] [--connections 1,100,1000]

Starts bench/echo_server.py and `python -m groupd.coordinator serve` (from the repo root) on free ports,
runs bench/loadgen.py against each at every connection count, and prints one table. The load
generator, the server under test and the kernel share the same cores, so read the numbers as a
pair (echo = the ceiling of this framing on this machine) rather than as absolutes.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PYTHON = VENV_PY if os.path.exists(VENV_PY) else sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """Poll until 127.0.0.1:port accepts a connection; bounded by timeout, fails if proc died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with code {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} not accepting connections after {timeout:.0f} s")


def start_echo(port, log, _tmp):
    return subprocess.Popen([PYTHON, os.path.join(BENCH, "echo_server.py"), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)


def start_groupd(port, log, tmp):
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    cmd = [PYTHON, "-m", "groupd.coordinator", "serve", "--set", f"listeners={listener}",
           "--set", f"advertised.listeners={listener}", "--set", f"data.dir={tmp}"]
    return subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def groupd_missing() -> str | None:
    if not os.path.exists(os.path.join(REPO, "coordinator", "__main__.py")):
        return "coordinator/__main__.py does not exist yet"
    return None


def loadgen(port, pid, conns, args) -> dict:
    cmd = [PYTHON, os.path.join(BENCH, "loadgen.py"), "--port", str(port), "--json",
           "--connections", str(conns), "--depth", str(args.depth), "--procs", str(args.procs),
           "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--server-pid", str(pid)]
    out = subprocess.run(cmd, capture_output=True, text=True,
                         timeout=args.warmup + args.seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(f"loadgen failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_target(name, start, args, rows) -> None:
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        port, log_path = free_port(), os.path.join(tmp, "server.log")
        with open(log_path, "w") as log:
            proc = start(port, log, os.path.join(tmp, "data"))
        try:
            wait_port(port, proc)
            for conns in args.connections:
                # Scheduling of server and client on the 2 cores varies run to run (same core
                # or not changes c=1 by ~5x), so repeat and keep the median run by req/s.
                runs = []
                for _ in range(args.repeat):
                    runs.append(loadgen(port, proc.pid, conns, args))
                    print(f"  {name:7} c={conns:<5} {runs[-1]['rps']:>8} req/s  "
                          f"p50 {runs[-1]['p50_us']} us", file=sys.stderr, flush=True)
                runs.sort(key=lambda r: r["rps"])
                r = dict(runs[len(runs) // 2], rps_range=f"{runs[0]['rps']:,}-{runs[-1]['rps']:,}")
                rows.append((name, r))
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            with open(log_path) as f:
                tail = f.read()[-2000:]
            print(f"{name}: {e}\n--- server log (tail) ---\n{tail}", file=sys.stderr)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def fmt(v) -> str:
    return "-" if v is None else f"{v:,.0f}" if isinstance(v, (int, float)) else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="measured window per run")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--connections", default="1,100,1000",
                    type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--repeat", type=int, default=3, help="runs per point; the median is shown")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--targets", default="echo,groupd")
    args = ap.parse_args()

    # 1000 connections need more than the usual 1024 fds; the servers inherit this limit.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rows, starters = [], {"echo": start_echo, "groupd": start_groupd}
    for name in args.targets.split(","):
        why = groupd_missing() if name == "groupd" else None
        if why:
            print(f"groupd leg SKIPPED: {why}; measuring the echo server only", file=sys.stderr)
            continue
        run_target(name, starters[name], args, rows)

    loop = rows[0][1]["loop"] if rows else "?"
    print(f"\nApiVersions v3, depth {args.depth}, {args.seconds:g} s window after "
          f"{args.warmup:g} s warmup, median of {args.repeat} runs, loadgen procs {args.procs}, "
          f"client loop {loop}")
    print(f"{datetime.date.today()}  {platform.machine()}  {os.cpu_count()} cores (shared by "
          f"server, load generator and kernel)  Python {platform.python_version()} ({PYTHON})\n")
    head = ("target", "conns", "req/s", "req/s range", "p50 µs", "p99 µs", "p99.9 µs", "errors",
            "client cpu%", "server cpu%")
    keys = ("connections", "rps", "rps_range", "p50_us", "p99_us", "p999_us", "errors",
            "client_cpu_pct", "server_cpu_pct")
    table = [head] + [(n, *(r[k] for k in keys))
                      for n, r in sorted(rows, key=lambda x: x[1]["connections"])]
    cells = [[c if i == 0 else fmt(c) for i, c in enumerate(row)] for row in table]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    for row in cells:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))


if __name__ == "__main__":
    main()
