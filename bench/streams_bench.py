"""Kafka Streams at scale, groupd beside Apache Kafka in one run (issue 25): how long N Kafka Streams instances
take from start to every task running, and how long the others take to run a killed instance's tasks.

Instances are KafkaStreams clients of bench/StreamsScale.java (many to a JVM, one stream thread each, a
stateless topology with one task per input partition), with `group.protocol` classic (Kafka Streams'
own assignor in a classic group) and streams (KIP-1071: the server assigns the tasks). Per target, protocol
and size N:
  join     N instances in one JVM start at once; from the first start() to every instance RUNNING
           and the input's P tasks each active on exactly one instance
  recover  (N in --recover, 10 by default) N-1 instances in one JVM and one in another; once the N hold every
           task, kill -9 the lone JVM; to the N-1 running all P tasks again. This includes the session
           timeout (6 s for both protocols and both servers), after which the server notices the death.
A join without a kill runs with a 30 s session timeout: a hundred instances in one JVM on two shared cores
miss 6 s sessions against either server (Kafka Streams then stops an instance: "Failed to initialize
offsets", an OffsetFetch answered UNKNOWN_MEMBER_ID).

    .venv/bin/python bench/streams_bench.py                                 # groupd and kafka, 10 and 100
    .venv/bin/python bench/streams_bench.py --targets groupd --sizes 10 --protocols streams

Needs the jars of .ci/install-streams (Kafka Streams 4.3.1) and, for the kafka target, of .ci/install-kafka
(`make clients kafka`). Both servers run with the same group settings: the tests' shared settings
(tests/support/kafka.py) with streams groups enabled, a streams session timeout of 6 s with 1 s heartbeats
and no initial rebalance delay; Kafka Streams' classic members use session.timeout.ms=6000 and
heartbeat.interval.ms=1000. Kafka runs with its JVM defaults; every Streams JVM with the tests' JVM options.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from groupd.protocol.apis import ApiKey  # noqa: E402
from tests.support.kafka import TEST_JVM, KafkaBroker, groupd_settings  # noqa: E402
from tests.support.process import GroupdProcess, WireClient  # noqa: E402
from tests.support.streams import VERSION, classpath, create_topics  # noqa: E402

SOURCE = os.path.join(ROOT, "bench", "StreamsScale.java")
SESSION_MS = 6000  # with a kill; a join alone: JOIN_SESSION_MS
JOIN_SESSION_MS = 30000
SETTINGS = {
    "group.coordinator.rebalance.protocols": "classic,consumer,streams",
    "group.streams.min.session.timeout.ms": "2000",
    "group.streams.session.timeout.ms": str(SESSION_MS),  # set per group (set_session)
    "group.streams.min.heartbeat.interval.ms": "500",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.initial.rebalance.delay.ms": "0",
}


def set_session(bootstrap: str, group: str, protocol: str, ms: int) -> str:
    """The session timeout of `group`'s members: a streams group's config on the server (Kafka and groupd
    alike, before the group exists), or a classic member's own config (returned, for --config)."""
    if protocol == "classic":
        return f"session.timeout.ms={ms},heartbeat.interval.ms=1000"
    with WireClient(bootstrap) as c:
        answer = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 32, "resource_name": group, "configs": [
                {"name": "streams.session.timeout.ms", "config_operation": 0, "value": str(ms)}]}],
            "validate_only": False}).responses[0]
    if answer.error_code:
        raise RuntimeError(f"streams.session.timeout.ms of {group}: error {answer.error_code} {answer.error_message}")
    return ""


class Board:
    """What every instance of every JVM of one measurement last said: its state and its active tasks. `wait`
    returns the arrival time of the line after which `done` first held."""

    def __init__(self) -> None:
        self.instances: dict[str, tuple[str, frozenset[str]]] = {}
        self.started: dict[str, float] = {}  # JVM name -> arrival of its STARTING
        self.errors: list[str] = []
        self._cond = threading.Condition()
        self._done = None
        self._when: float | None = None

    def line(self, jvm: str, line: str) -> None:
        now = time.monotonic()
        parts = line.split()
        with self._cond:
            if parts[:1] == ["STARTING"]:
                self.started[jvm] = now
            elif parts[:1] == ["TASKS"] and len(parts) == 4:
                self.instances[parts[1]] = (parts[2], frozenset(t for t in parts[3].split(",") if t != "-"))
            elif parts[:1] == ["ERROR"]:
                self.errors.append(line)
            if self._done is not None and self._when is None and self._done():
                self._when = now
            self._cond.notify_all()

    def wait(self, done, timeout: float, what: str) -> float:
        with self._cond:
            self._done, self._when = done, (time.monotonic() if done() else None)
            if not self._cond.wait_for(lambda: self._when is not None or self.errors, timeout):
                raise TimeoutError(f"{what}: not within {timeout} s; last: {self.summary()}")
            if self.errors:
                raise RuntimeError(f"{what}: {self.errors[0]}")
            self._done = None
            return self._when

    def covered(self, names: set[str], tasks: int) -> bool:
        """Every instance of `names` RUNNING and the tasks 0_0..0_{tasks-1} each active on exactly one."""
        held: list[str] = []
        for name in names:
            state, active = self.instances.get(name, ("", frozenset()))
            if state != "RUNNING":
                return False
            held += active
        return len(held) == tasks and set(held) == {f"0_{p}" for p in range(tasks)}

    def summary(self) -> str:
        states: dict[str, int] = {}
        for state, _ in self.instances.values():
            states[state] = states.get(state, 0) + 1
        held = sum(len(t) for _, t in self.instances.values())
        return f"{len(self.instances)} instances {states}, {held} active tasks held"


class ScaleJvm:
    """One JVM of StreamsScale.java with `count` instances named `<name>-<i>`."""

    def __init__(self, board: Board, work: str, bootstrap: str, app: str, name: str, count: int, protocol: str,
                 topics: tuple[str, str], heap: str, config: str) -> None:
        self.board, self.name, self.count = board, name, count
        self.cmd = ["java", heap, *TEST_JVM[1:], "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp", classpath(VERSION, SOURCE), "StreamsScale",
                    "--bootstrap", bootstrap, "--application-id", app, "--instances", str(count), "--name", name,
                    "--state-dir", os.path.join(work, "state"), "--group-protocol", protocol,
                    "--input", topics[0], "--output", topics[1], "--config", config]
        self.log_path = os.path.join(work, f"{name}.log")
        self.proc: subprocess.Popen | None = None

    @property
    def names(self) -> set[str]:
        return {f"{self.name}-{i}" for i in range(self.count)}

    def start(self) -> ScaleJvm:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                                         bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.board.line(self.name, line.strip())

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.kill()


def measure(bootstrap: str, work: str, protocol: str, size: int, partitions: int, heap: str,
            timeout: float, recover: bool) -> dict[str, float]:
    app = f"scale-{protocol}-{size}-{uuid.uuid4().hex[:6]}"
    topics = (f"{app}-in", f"{app}-out")
    create_topics(bootstrap, {topics[0]: partitions, topics[1]: partitions})
    out: dict[str, float] = {}

    board = Board()
    config = set_session(bootstrap, app + "-j", protocol, JOIN_SESSION_MS)
    jvm = ScaleJvm(board, work, bootstrap, app + "-j", "join", size, protocol, topics, heap, config).start()
    try:
        board.wait(lambda: "join" in board.started, timeout, "the instances starting")
        done = board.wait(lambda: board.covered(jvm.names, partitions), timeout, f"{size} instances running")
        out["join"] = done - board.started["join"]
    finally:
        jvm.stop()

    if recover and size > 1:
        board = Board()
        config = set_session(bootstrap, app + "-r", protocol, SESSION_MS)
        rest = ScaleJvm(board, work, bootstrap, app + "-r", "rest", size - 1, protocol, topics, heap, config).start()
        lone = ScaleJvm(board, work, bootstrap, app + "-r", "lone", 1, protocol, topics, heap, config).start()
        try:
            board.wait(lambda: board.covered(rest.names | lone.names, partitions), timeout, f"{size} instances")
            killed = time.monotonic()
            lone.kill()
            done = board.wait(lambda: board.covered(rest.names, partitions), timeout + SESSION_MS / 1000,
                              f"{size - 1} instances taking over")
            out["recover"] = done - killed
        finally:
            lone.stop()
            rest.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="groupd,kafka", help="groupd, kafka, or both (default)")
    ap.add_argument("--protocols", default="classic,streams")
    ap.add_argument("--sizes", default="10,100", help="instances per measurement")
    ap.add_argument("--recover", default="10", help="sizes that also measure a takeover after a kill -9")
    ap.add_argument("--partitions", type=int, default=100, help="input partitions, i.e. tasks")
    ap.add_argument("--heap", default="-Xmx1g", help="heap of each Streams JVM")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = []
    for target in args.targets.split(","):
        work = tempfile.mkdtemp(prefix=f"streams-bench-{target}-")
        if target == "groupd":
            server = GroupdProcess(os.path.join(work, "server"), *groupd_settings(SETTINGS)).start()
        elif target == "kafka":
            server = KafkaBroker(os.path.join(work, "server"), settings=SETTINGS, jvm=[]).start()
        else:
            ap.error(f"unknown target {target}")
        done = False
        try:
            for protocol in args.protocols.split(","):
                for size in sizes:
                    got = measure(server.bootstrap, work, protocol, size, args.partitions, args.heap, args.timeout,
                                  str(size) in args.recover.split(","))
                    rows.append((target, protocol, size, got.get("join"), got.get("recover")))
                    print(f"{target:7} {protocol:8} {size:4} instances: join {got['join']:.2f} s"
                          + (f", recover {got['recover']:.2f} s" if "recover" in got else ""), flush=True)
            done = True
        finally:
            server.stop()
            if done:
                shutil.rmtree(work, ignore_errors=True)
            else:
                print(f"failed: the server's and the JVMs' logs are in {work}", file=sys.stderr)

    print(f"\nKafka Streams {VERSION}, {args.partitions} tasks (stateless); session timeout {SESSION_MS} ms with a "
          f"kill, {JOIN_SESSION_MS} ms for a join alone")
    print(f"{'target':7} {'protocol':8} {'N':>4} {'join s':>8} {'recover s':>10} {'recover - session s':>20}")
    for target, protocol, size, join, recover in rows:
        rec = f"{recover:10.2f} {recover - SESSION_MS / 1000:20.2f}" if recover is not None else f"{'-':>10} {'-':>20}"
        print(f"{target:7} {protocol:8} {size:4} {join:8.2f} {rec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
