"""Start-up on an empty data dir (issue 27, round four): spawn `groupd serve` → "groupd ready" and
"offsets log loaded" in its log, the CPU the process used to get there, and its RSS at idle.

    .venv/bin/python bench/startup_bench.py                 # 11 starts, medians
    .venv/bin/python bench/startup_bench.py --repeat 21 --idle 1.0 --json

Wall time is what the goal names, but on a shared machine it mostly measures the neighbours: the
CPU seconds the server spent until ready (utime + stime of every thread, from /proc) is the figure
that compares two builds. RSS is read after `--idle` seconds of nothing. Each start gets a fresh
data dir under --tmp and a free loopback port; the server is stopped with SIGTERM and reaped.
groupd's packages are compiled to bytecode first, as the install recipe (.ci/install-python) does:
with PYTHONDONTWRITEBYTECODE set, a stale .pyc would otherwise be recompiled at every start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.support.process import free_port  # noqa: E402

READY = ("groupd ready", "offsets log loaded")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    # fields 14 and 15 (utime, stime) of the process, threads included; the name may hold spaces
    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def one_start(tmp: str, idle: float, timeout: float) -> dict:
    data_dir = tempfile.mkdtemp(prefix="startup-", dir=tmp)
    log_path = os.path.join(data_dir, "groupd.log")
    port = free_port()
    args = [sys.executable, "-m", "groupd.coordinator", "serve",
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--set", f"data.dir={data_dir}",
            "--set", "metrics.listener="]
    try:
        with open(log_path, "wb") as log:
            t0 = time.monotonic()
            proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            try:
                deadline = t0 + timeout
                while True:
                    text = open(log_path, errors="replace").read()
                    if all(line in text for line in READY):
                        ready = time.monotonic() - t0
                        cpu = cpu_seconds(proc.pid)
                        break
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"groupd did not get ready:\n{text}")
                    time.sleep(0.002)
                time.sleep(idle)
                rss = rss_mib(proc.pid)
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return {"ready_s": ready, "cpu_s": cpu, "rss_mib": rss}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--idle", type=float, default=1.0, help="seconds at idle before reading RSS")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "protocol", "storage", "coordinator"], cwd=ROOT,
                   check=True)
    runs = [one_start(args.tmp, args.idle, args.timeout) for _ in range(args.repeat)]
    summary = {}
    for key in ("ready_s", "cpu_s", "rss_mib"):
        values = [r[key] for r in runs]
        summary[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    if args.json:
        print(json.dumps({"runs": runs, "summary": summary, "load": os.getloadavg()}))
        return 0
    print(f"{args.repeat} starts, empty data dir, load average {os.getloadavg()[0]:.1f}")
    for key, label in (("ready_s", "spawn → ready (s)"), ("cpu_s", "server CPU to ready (s)"),
                       ("rss_mib", "RSS at idle (MiB)")):
        s = summary[key]
        print(f"  {label:26} median {s['median']:.3f}  range {s['min']:.3f}–{s['max']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
