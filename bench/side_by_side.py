"""Issue 26's one table: groupd, Apache Kafka and the echo server side by side, in one run.

    .venv/bin/python bench/side_by_side.py                 # about 8 minutes: 3 repeats, medians (make bench-side)
    .venv/bin/python bench/side_by_side.py --repeat 1 --seconds 2 --targets groupd,echo   # no Kafka, quicker
    .venv/bin/python bench/side_by_side.py --json /tmp/side.json                          # + every run's figures

Rows are measures, columns the three servers and groupd ÷ echo, Kafka ÷ echo; each cell the median of
--repeat runs (the targets of one measure run in turn, so a change of the machine's load hits them alike;
a second table gives each cell's min-max). The pieces are the load benches' own:

- heartbeats: bench/run_groups.py's runs (members.py heartbeat; the closed loop in the compiled driver,
  bench/loadgen-go): --members members in --groups classic groups, Heartbeat v3, depth 1. The echo server
  gets the same frames unchecked: the machine's limit for this framing.
- consumer protocol: bench/consumers.py (its steady window is a Python closed loop): --members members in
  one group, topic t of --partitions partitions, heartbeat interval --interval-ms on both servers (Kafka's
  minimum, 5 s by default, is lowered to it); also the join of all members -> converged.
- durable commits: bench/storage_bench.commit_point with the compiled driver, --commit-connections
  connections, one group each, 1 and 5 partitions per OffsetCommit v8. groupd log.flush.interval.ms=0 (an
  fsync per batch before the acknowledgements); Kafka flush.messages=1 on __consumer_offsets (an fsync per
  append before the acknowledgement), since by default Kafka acknowledges before any fsync; a third row
  compares that default with groupd's interval mode (log.flush.interval.ms=1000), 1 partition per commit.
- group formation: members.py form (every member joins at once; no initial rebalance delay on either).
- produce / fetch: bench/records_bench.py's raw producer (this process: --producers connections, Produce v8
  of 16 KB batches of --value-bytes values, acks=1: neither server waits for an fsync) then one Fetch v12
  connection reading it all back; groupd's disk records plane.
- start-up to ready: spawn -> listening with every offsets partition loaded (groupd: its log lines;
  Kafka: storage format + start + a FindCoordinator/OffsetFetch answered for every offsets partition;
  echo: its "ready" line). RSS at idle: read at that moment. RSS under load: the peak of the server's
  RSS sampled every 0.1 s during the heartbeat runs (Kafka's JVM keeps what it took in earlier runs).
- server CPU per request: the server's CPU time (utime+stime from /proc/<pid>/stat; the JVM's pid for
  Kafka) over the window / requests answered in it.

groupd and the echo server get a fresh process per run; Kafka (JVM defaults, bench/kafka_reference.py's
BENCH_SETTINGS) is started once and serves every measure (its start-up is sampled by --repeat - 1 more
starts at the end). `--pin 0:1` (the default) puts the server under test on CPU 0 and every client on CPU 1
(bench/pinning.py); other processes on the machine still take turns on both.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, ROOT)

import pinning  # noqa: E402
import run_groups  # noqa: E402
from run_apiversions import PYTHON  # noqa: E402

TARGETS = ("groupd", "kafka", "echo")


class Runs:
    """Every measurement: measure -> target -> values, in the order of ROWS."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[float]]] = {}
        self.failures: list[str] = []

    def add(self, measure: str, target: str, value) -> None:
        if value is not None:
            self.values.setdefault(measure, {}).setdefault(target, []).append(float(value))

    def failed(self, what: str, r: dict) -> bool:
        if "failed" in r:
            self.failures.append(f"{what}: {r['failed']}")
            print(f"  FAILED {what}: {r['failed']}", file=sys.stderr, flush=True)
            return True
        return False


def per_request_us(r: dict) -> float | None:
    """Server CPU µs per request over the window: its CPU % / requests per second."""
    if r.get("server_cpu_pct") is None or not r.get("hb_per_s"):
        return None
    return r["server_cpu_pct"] * 1e4 / r["hb_per_s"]


# -- the measures ------------------------------------------------------------------------------------

def startup(runs: Runs, targets, tmp: str) -> None:
    """groupd and echo: one fresh start each (Kafka's starts are sampled apart, see main)."""
    from kafka_reference import rss_mb

    from tests.support.process import GroupdProcess

    if "groupd" in targets:
        data = tempfile.mkdtemp(prefix="side-start-", dir=tmp)
        server = GroupdProcess(data)
        t0 = time.monotonic()
        server.start()
        runs.add("startup_s", "groupd", time.monotonic() - t0)
        runs.add("rss_idle_mb", "groupd", rss_mb(server.proc.pid))
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    if "echo" in targets:
        port = run_groups.free_port()
        t0 = time.monotonic()
        proc = subprocess.Popen([PYTHON, os.path.join(BENCH, "echo_server.py"), "--port", str(port)],
                                stdout=subprocess.PIPE, text=True)
        try:
            if proc.stdout.readline().strip() == "ready":  # printed once it listens
                runs.add("startup_s", "echo", time.monotonic() - t0)
                runs.add("rss_idle_mb", "echo", rss_mb(proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)


def heartbeats(runs: Runs, targets, args) -> None:
    extra = ["--members", str(args.members), "--groups", str(args.groups), "--depth", "1", "--seconds",
             str(args.seconds), "--warmup", str(args.warmup), "--setup-timeout", "150", "--driver", "go"]
    for target in targets:
        r = run_groups.one_run(target, "heartbeat", extra + (["--raw"] if target == "echo" else []), 300)
        print(f"  {target:6} classic heartbeats {r.get('hb_per_s', r.get('failed'))}/s", file=sys.stderr, flush=True)
        if runs.failed(f"{target} classic heartbeats", r):
            continue
        if r.get("errors"):
            runs.failures.append(f"{target} classic heartbeats: {r['errors']} bad replies")
        runs.add("hb_s", target, r["hb_per_s"])
        runs.add("hb_p99_us", target, r["p99_us"])
        runs.add("hb_cpu_us", target, per_request_us(r))
        runs.add("rss_load_mb", target, r.get("server_rss_peak_mb"))
        if target == "echo":  # the consumer rows' limit too: the same framing, request for request
            runs.add("chb_s", target, r["hb_per_s"])
            runs.add("chb_p99_us", target, r["p99_us"])
            runs.add("chb_cpu_us", target, per_request_us(r))


def consumer_heartbeats(runs: Runs, targets, args) -> None:
    extra = ["--members", str(args.members), "--partitions", str(args.partitions), "--leave-pct", "10",
             "--depth", "1", "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--setup-timeout", "150"]
    settings = [f"topics=t:{args.partitions}", f"group.consumer.heartbeat.interval.ms={args.interval_ms}",
                f"group.consumer.min.heartbeat.interval.ms={args.interval_ms}"]
    for target in (t for t in targets if t != "echo"):
        r = run_groups.one_run(target, None, extra, 600, script="consumers.py", settings=settings)
        print(f"  {target:6} consumer heartbeats {r.get('hb_per_s', r.get('failed'))}/s, join {r.get('join_ms')} ms",
              file=sys.stderr, flush=True)
        if runs.failed(f"{target} consumer heartbeats", r):
            continue
        if r.get("errors"):
            runs.failures.append(f"{target} consumer heartbeats: {r['errors']} bad replies")
        runs.add("chb_s", target, r["hb_per_s"])
        runs.add("chb_p99_us", target, r["p99_us"])
        runs.add("chb_cpu_us", target, per_request_us(r))
        runs.add("cjoin_ms", target, r["join_ms"])


def formation(runs: Runs, targets, sizes) -> None:
    for size in sizes:
        for target in (t for t in targets if t != "echo"):
            r = run_groups.form_run(target, size)
            print(f"  {target:6} form {size}: {r.get('form_ms', r.get('failed'))} ms", file=sys.stderr, flush=True)
            if not runs.failed(f"{target} formation of {size}", r):
                runs.add(f"form_{size}_ms", target, r["form_ms"])


def commits(runs: Runs, targets, args, kafka, tmp: str) -> None:
    from storage_bench import commit_point, wait_for_line

    from tests.support.process import GroupdProcess

    def record(target: str, key: str, row: dict) -> None:
        print(f"  {target:6} {key}: {row['commits/s']:,.0f}/s, {row['cpu us/commit']:.0f} µs",
              file=sys.stderr, flush=True)
        if row["bad replies"]:
            runs.failures.append(f"{target} {key}: {row['bad replies']} bad replies")
        runs.add(f"{key}_s", target, row["commits/s"])
        runs.add(f"{key}_cpu_us", target, row["cpu us/commit"])

    n, window = args.commit_connections, (args.warmup, args.seconds)
    for target in targets:
        if target == "groupd":
            for flush, points in ((0, (1, 5)), (1000, (1,))):  # durable; then acknowledged before the fsync
                data = tempfile.mkdtemp(prefix="side-commit-", dir=tmp)
                server = GroupdProcess(data, "topics=t:8", f"log.flush.interval.ms={flush}").start()
                try:
                    wait_for_line(server, "offsets log loaded", 0)
                    pinning.pin_server(server.proc.pid)
                    for p in points:
                        record(target, f"commit{p}" if flush == 0 else "lazy1",
                               commit_point(server.port, server.proc.pid, n, p, *window, driver="go"))
                finally:
                    server.stop()
                    shutil.rmtree(data, ignore_errors=True)
        elif target == "kafka":
            from kafka_reference import set_offsets_flush

            set_offsets_flush(kafka.bootstrap, 1)
            for p in (1, 5):
                record(target, f"commit{p}", commit_point(kafka.port, kafka.proc.pid, n, p, *window, driver="go"))
            set_offsets_flush(kafka.bootstrap, None)  # its default: acknowledged once appended, no fsync of its own
            record(target, "lazy1", commit_point(kafka.port, kafka.proc.pid, n, 1, *window, driver="go"))
        else:
            port = run_groups.free_port()
            proc = subprocess.Popen([PYTHON, os.path.join(BENCH, "echo_server.py"), "--port", str(port)],
                                    stdout=subprocess.PIPE, text=True)
            try:
                assert proc.stdout.readline().strip() == "ready", "the echo server did not start"
                pinning.pin_server(proc.pid)
                for p in (1, 5):  # the very frames the servers get
                    row = commit_point(port, proc.pid, n, p, *window, driver="go", echo=True)
                    record(target, f"commit{p}", row)
                    if p == 1:  # the same frames and load as the durable row's
                        record(target, "lazy1", row)
            finally:
                proc.terminate()
                proc.wait(10)


def records(runs: Runs, targets, args, kafka_target) -> None:
    import records_bench

    mb, size, producers, batch = args.produce_mb, args.value_bytes, args.producers, 16
    for target in targets:
        if target == "echo":
            echo = records_bench.EchoServer()
            try:
                r = records_bench.run_echo(echo, size, mb, producers, batch)
            finally:
                echo.stop()
        elif target == "kafka":
            r = records_bench.run_kafka(kafka_target, "1", size, mb, producers, batch)
        else:
            r = records_bench.run("disk", "1", size, mb, producers, batch, "raw")
        print(f"  {target:6} produce {r['produce_mb_s']:.1f} MB/s, fetch {r.get('fetch_mb_s') or 0:.1f} MB/s",
              file=sys.stderr, flush=True)
        if r["errors"] or (r["fetched"] is not None and r["fetched"] != r["records"]):
            runs.failures.append(f"{target} produce/fetch: {r['errors']} bad replies, fetched {r['fetched']} "
                                 f"of {r['records']}")
        runs.add("produce_mb_s", target, r["produce_mb_s"])
        runs.add("produce_cpu_ms", target, r["produce_cpu_ms_mb"])
        if r["fetched"] is not None:
            runs.add("fetch_mb_s", target, r["fetch_mb_s"])
            runs.add("fetch_cpu_ms", target, r["fetch_cpu_ms_mb"])


# -- the table ---------------------------------------------------------------------------------------

def rows(args) -> list[tuple[str, str]]:
    n = f"{args.members:,}"
    return [
        ("hb_s", f"classic heartbeats/s, {n} members in {args.groups} groups"),
        ("hb_p99_us", "  p99 µs"),
        ("hb_cpu_us", "  server CPU µs per heartbeat"),
        ("chb_s", f"consumer-protocol heartbeats/s, {n} members in 1 group (echo: classic frames)"),
        ("chb_p99_us", "  p99 µs"),
        ("chb_cpu_us", "  server CPU µs per heartbeat"),
        ("cjoin_ms", f"  {n} members join -> converged ms ({args.partitions:,} partitions)"),
        ("commit1_s", f"durable commits/s, 1 partition, {args.commit_connections} connections"),
        ("commit1_cpu_us", "  server CPU µs per commit"),
        ("commit5_s", f"durable commits/s, 5 partitions, {args.commit_connections} connections"),
        ("commit5_cpu_us", "  server CPU µs per commit"),
        ("lazy1_s", "commits/s acknowledged before fsync (groupd flush interval 1 s, Kafka's default), 1 partition"),
        ("lazy1_cpu_us", "  server CPU µs per commit"),
        *((f"form_{s}_ms", f"group formation, {s:,} members, ms") for s in args.form_sizes),
        ("produce_mb_s", f"produce MB/s ({args.producers} connections, {args.value_bytes} B values, acks=1)"),
        ("produce_cpu_ms", "  server CPU ms per MB"),
        ("fetch_mb_s", "fetch MB/s (1 connection)"),
        ("fetch_cpu_ms", "  server CPU ms per MB"),
        ("startup_s", "start-up to ready, s"),
        ("rss_idle_mb", "RSS at idle, MB"),
        ("rss_load_mb", "RSS under load (peak in the heartbeat runs), MB"),
    ]


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def render(runs: Runs, args, targets) -> str:
    cols = [t for t in TARGETS if t in targets]
    ratios = [t for t in cols if t != "echo"] if "echo" in cols else []
    head = ["measure", *("Kafka" if t == "kafka" else t for t in cols),
            *(f"{'Kafka' if t == 'kafka' else t} ÷ echo" for t in ratios)]
    body, spread = [], []
    for key, label in rows(args):
        got = runs.values.get(key, {})
        med = {t: statistics.median(got[t]) if got.get(t) else None for t in cols}
        ratio = [fmt(med[t] / med["echo"]) if med[t] is not None and med.get("echo") else "-" for t in ratios]
        body.append([label, *(fmt(med[t]) for t in cols), *ratio])
        spread.append([label, *(f"{fmt(min(got[t]))}-{fmt(max(got[t]))}" if got.get(t) else "-" for t in cols)])
    return markdown(head, body) + "\n\nmin-max of the runs:\n\n" + markdown(head[:1 + len(cols)], spread)


def markdown(head: list[str], body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    return "\n".join([line(head), "|" + "|".join(("-" * (w + 2)) for w in widths) + "|", *map(line, body)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(TARGETS), help="of groupd, kafka, echo")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measure and target (medians shown)")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured window of each load")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100, help="classic heartbeats: the members are spread over these")
    ap.add_argument("--partitions", type=int, default=1000, help="consumer protocol: partitions of topic t")
    ap.add_argument("--interval-ms", type=int, default=250, help="consumer protocol: heartbeat interval")
    ap.add_argument("--form-sizes", default="10,100,1000", type=lambda s: [int(x) for x in s.split(",") if x])
    ap.add_argument("--commit-connections", type=int, default=100)
    ap.add_argument("--produce-mb", type=float, default=16.0, help="MB of values produced per run")
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--producers", type=int, default=10)
    ap.add_argument("--json", help="also write every run's figures to this file")
    ap.add_argument("--pin", default=os.environ.get(pinning.ENV, "0:1"), metavar="SERVER:CLIENT",
                    help="CPU lists: the server under test on the first, every client on the second ('' for none)")
    args = ap.parse_args()
    pinning.use(args.pin)
    targets = [t for t in TARGETS if t in args.targets.split(",")]
    from echo_server import install_loop_policy

    install_loop_policy()  # the in-process clients (commit checks, producers) on uvloop where installed
    tmp = tempfile.mkdtemp(prefix="side-by-side-")
    runs, kafka, started = Runs(), None, time.monotonic()
    try:
        if "kafka" in targets:
            from kafka_reference import create_topic
            from records_bench import KafkaTarget

            kafka, ready_s, idle_mb = run_groups.hold_kafka(os.path.join(tmp, "kafka"),
                                                            {"group.consumer.heartbeat.interval.ms": str(args.interval_ms),
                                                             "group.consumer.min.heartbeat.interval.ms": str(args.interval_ms)})
            runs.add("startup_s", "kafka", ready_s)
            runs.add("rss_idle_mb", "kafka", idle_mb)
            create_topic(kafka.bootstrap, "t", args.partitions)  # consumers.py's topic; commits name it too
            kafka_target = KafkaTarget(kafka)
        for i in range(args.repeat):
            print(f"run {i + 1} of {args.repeat} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
            startup(runs, targets, tmp)
            heartbeats(runs, targets, args)
            consumer_heartbeats(runs, targets, args)
            formation(runs, targets, args.form_sizes)
            commits(runs, targets, args, kafka, tmp)
            records(runs, targets, args, kafka_target if kafka else None)
        if kafka is not None:
            from kafka_reference import rss_mb

            kafka_peak = rss_mb(kafka.proc.pid, "VmHWM")
            kafka.stop()
            kafka = None
            for _ in range(args.repeat - 1):  # Kafka's start-up, sampled like the others' (none of our servers running)
                broker, ready_s, idle_mb = run_groups.hold_kafka(tempfile.mkdtemp(prefix="kafka-", dir=tmp))
                runs.add("startup_s", "kafka", ready_s)
                runs.add("rss_idle_mb", "kafka", idle_mb)
                broker.stop()
    finally:
        if kafka is not None:
            kafka.stop()
        run_groups.HELD.pop("kafka", None)
        shutil.rmtree(tmp, ignore_errors=True)

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"\n{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{pinning.describe()}; median of {args.repeat} run(s), {args.seconds:g} s windows after {args.warmup:g} s "
          f"warm-up; {time.monotonic() - started:.0f} s in all; load average at the end {load}")
    if "kafka" in targets:
        from tests.support.kafka import VERSION

        print(f"Apache Kafka {VERSION}, JVM defaults ({java_version()}); its peak RSS over the whole run "
              f"{kafka_peak:,.0f} MB")
    print()
    print(render(runs, args, targets))
    if runs.failures:
        print("\nfailures / bad replies:\n" + "\n".join(f"- {f}" for f in runs.failures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "values": runs.values, "failures": runs.failures}, f, indent=1)
    return 1 if runs.failures else 0


def java_version() -> str:
    out = subprocess.run(["java", "-version"], check=False, capture_output=True, text=True)
    return (out.stderr.splitlines() or ["java"])[0]


if __name__ == "__main__":
    sys.exit(main())
