"""One command for the report: a 1,000-member KIP-848 consumer group (bench/consumers.py) against
groupd, side by side with the classic Heartbeat load (bench/members.py) and the echo server.

    python bench/run_consumer_groups.py [--members 1000] [--partitions 1000] [--interval-ms 250]
                                        [--seconds 5] [--repeat 1] [--classic-groups 1]
                                        [--driver go] [--pin 0:1]   # server CPU 0, simulators CPU 1

Every run gets a fresh server on a free 127.0.0.1 port (bench/run_groups.py's one_run). groupd
runs the consumer group with topic t of --partitions partitions and
group.consumer.heartbeat.interval.ms = group.consumer.min.heartbeat.interval.ms = --interval-ms
(Kafka's floor is 5 s; the interval paces the members while they converge, not the steady load).
`--targets groupd,kafka,echo` adds Apache Kafka's classic and consumer legs: one broker for the command
(run_groups.hold_kafka: JVM defaults, the same intervals, topic t created with --partitions partitions).
"""

import argparse
import datetime
import os
import platform
import shutil
import sys
import tempfile

import pinning
from run_groups import fmt, hold_kafka, median, one_run, server_us, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--interval-ms", type=int, default=250, help="the consumer group's heartbeat interval")
    ap.add_argument("--leave-pct", type=int, default=10)
    ap.add_argument("--classic-groups", type=int, default=1, help="the classic members are spread over these")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0, help="heartbeat window")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs per target (median shown)")
    ap.add_argument("--driver", choices=("python", "go"), default="python",
                    help="the classic and echo legs' closed loop (the consumer leg's is Python)")
    ap.add_argument("--targets", default="groupd,echo", help="of groupd, echo, kafka (Apache Kafka: `make kafka`)")
    ap.add_argument("--legs", default="echo,classic,consumer", help="which legs to run of each target (e.g. consumer alone, "
                    "to profile it with bench/profile_server.py)")
    ap.add_argument("--consumer-only", action="store_true",
                    help="only the KIP-848 legs (join and leave convergence, then their heartbeats): --legs consumer")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a groupd setting for the consumer leg (repeatable), e.g. log.flush.interval.ms=1000")
    pinning.add_argument(ap)
    args = ap.parse_args()
    pinning.use(args.pin)
    targets = args.targets.split(",")
    kafka = None
    if "kafka" in targets:
        from kafka_reference import create_topic

        kafka, ready_s, idle_mb = hold_kafka(tempfile.mkdtemp(prefix="bench-kafka-"), {
            "group.consumer.heartbeat.interval.ms": str(args.interval_ms),
            "group.consumer.min.heartbeat.interval.ms": str(args.interval_ms)})
        create_topic(kafka.bootstrap, "t", args.partitions)
        print(f"  kafka    ready in {ready_s:.1f} s, RSS at idle {idle_mb:.0f} MB", file=sys.stderr, flush=True)
    try:
        run_legs(args, targets)
    finally:
        if kafka is not None:
            kafka.stop()
            shutil.rmtree(kafka.data_dir, ignore_errors=True)


def legs_for(args, targets) -> dict:
    """label -> one run of that leg, for the targets asked for."""
    window = ["--depth", str(args.depth), "--seconds", str(args.seconds), "--warmup", str(args.warmup),
              "--setup-timeout", "150"]
    classic = ["--members", str(args.members), "--groups", str(args.classic_groups), *window, "--driver", args.driver]
    consumer = ["--members", str(args.members), "--partitions", str(args.partitions),
                "--leave-pct", str(args.leave_pct), *window]
    settings = [f"topics=t:{args.partitions}", f"group.consumer.heartbeat.interval.ms={args.interval_ms}",
                f"group.consumer.min.heartbeat.interval.ms={args.interval_ms}", *args.set]
    legs = {
        "echo": lambda: one_run("echo", "heartbeat", classic + ["--raw"], 300),
        "classic": lambda: one_run("groupd", "heartbeat", classic, 300),
        "consumer": lambda: one_run("groupd", None, consumer, 600, script="consumers.py", settings=settings),
        "kafka classic": lambda: one_run("kafka", "heartbeat", classic, 300),
        "kafka consumer": lambda: one_run("kafka", None, consumer, 600, script="consumers.py"),
    }
    return {label: leg for label, leg in legs.items()
            if {"classic": "groupd", "consumer": "groupd"}.get(label, label.split()[0]) in targets
            and label.split()[-1] in args.legs.split(",")
            and (not args.consumer_only or label.endswith("consumer"))}


def run_legs(args, targets) -> None:
    legs = legs_for(args, targets)
    all_runs: dict[str, list] = {label: [] for label in legs}
    for _ in range(args.repeat):  # the legs in turn, so a change in the machine's load hits them alike
        for label, leg in legs.items():
            runs = all_runs[label]
            runs.append(leg())
            print(f"  {label:14} {runs[-1].get('hb_per_s', runs[-1].get('failed'))} hb/s, server cpu "
                  f"{runs[-1].get('server_cpu_pct')}%", file=sys.stderr, flush=True)
    results = {label: (median(runs, "hb_per_s"), runs) for label, runs in all_runs.items()}

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"\n{datetime.date.today()}  {platform.machine()}  {os.cpu_count()} cores shared by server, simulator, "
          f"kernel and anything else running (load average at the end: {load})  Python "
          f"{platform.python_version()}  median of {args.repeat} run(s); {pinning.describe()}")
    print(f"\nHeartbeats, {args.members:,} members, closed loop depth {args.depth}, {args.seconds:g} s window after "
          f"{args.warmup:g} s warmup (echo: the classic frames, reply not checked)")
    rows = []
    for label in results:
        what = ("raw request/reply" if label == "echo" else f"Heartbeat v3, {args.classic_groups} group(s)"
                if label.endswith("classic") else "ConsumerGroupHeartbeat v1, 1 group")
        r = results[label][0]
        rows.append((label, what, r.get("hb_per_s"), r.get("range"), r.get("p50_us"), r.get("p99_us"),
                     r.get("errors"), r.get("client_cpu_pct"), r.get("server_cpu_pct"), server_us(results[label][1]),
                     r.get("machine_cpu_pct"),
                     r.get("failed", "")))
    table(("target", "requests", "hb/s", "hb/s range", "p50 µs", "p99 µs", "errors", "client cpu%",
           "server cpu%", "server µs/hb", "machine cpu%", "note"), rows)

    print(f"\nKIP-848 group of {args.members:,} members, topic of {args.partitions:,} partitions, heartbeat interval "
          f"{args.interval_ms} ms, assignor uniform (both servers' default): converged = every member at one epoch with its assignment "
          "acknowledged, every partition owned once (checked with ConsumerGroupDescribe)")
    rows = []
    for label, r in ((leg, r) for leg in ("consumer", "kafka consumer") if leg in results
                     for r in results[leg][1]):
        rows.append((label, fmt(r.get("join_ms")), r.get("join_server_cpu_s"), r.get("join_epoch"), r.get("leave_ms"),
                     r.get("leave_server_cpu_s"), r.get("leavers"), r.get("leave_epoch"), r.get("leave_errors"),
                     " ".join(f"{k}:{v}" for k, v in sorted(r.get("join_replies", {}).items())),
                     " ".join(f"{k}:{v}" for k, v in sorted(r.get("leave_replies", {}).items())), r.get("failed", "")))
    table(("target", "join -> stable ms", "server cpu s", "epoch", f"{args.leave_pct} % leave -> stable ms",
           "server cpu s", "left", "epoch", "leave errors",
           "join replies (error:n)", "leave replies (error:n)", "note"), rows)


if __name__ == "__main__":
    main()
