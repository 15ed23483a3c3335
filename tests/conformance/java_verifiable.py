"""The Java client through Kafka's own "verifiable" clients: VerifiableProducer and VerifiableConsumer
from kafka-tools 4.3.1 (Maven Central, the jars `.ci/install-kafka` already fetches), the programs
Kafka's system tests drive (tests/kafkatest/services/verifiable_*.py). Each prints one JSON event per
line: the producer every acknowledged record (`producer_send_success`: partition, offset); the
consumer, with --verbose, every record it handed the application (`record_data`), its assignment
changes (`partitions_assigned`/`partitions_revoked`, the rebalance listener's calls), and the result of
the synchronous commit it makes after every poll (`offsets_committed`).

Why not the clients' own integration tests: kafka-clients' and core's integration tests
(`*IntegrationTest`, `PlaintextConsumerTest`, …) start their cluster in the test JVM (KRaft test kit,
`ClusterInstance`) and have no switch for an external bootstrap, and no test jar of them is published
with its test dependencies; the verifiable clients are what Kafka itself points at an external cluster.

An allowlist entry's target is a scenario below, modelled on kafkatest's consumer_test.py, and its
subtests field the group protocol (`classic` or `consumer`). Each runs against a fresh groupd with a
4-partition topic (a 1 s consumer-protocol heartbeat interval) and checks what the system tests check: every acknowledged record consumed (no
loss), none consumed twice (no duplicates: every consumer commits synchronously after each poll and
shuts down cleanly), the committed offsets at the end of each partition, every commit successful,
and the final assignment: disjoint and covering the topic.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from tests.support import kafka

from .common import Entry, Result, logs_dir, safe_name, start_groupd, stop_groupd

TOPIC = "verifiable"
PARTITIONS = 4
RECORDS = 2000
GROUP = "verifiable-group"
PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
SETTINGS = (f"topics={TOPIC}:{PARTITIONS}",)
# the consumer protocol moves partitions at members' heartbeats: 1 s instead of Kafka's 5 s keeps the
# scenarios short (as librdkafka's consumer-protocol run does); the classic protocol rebalances at once
PROTOCOL_SETTINGS = {"classic": (), "consumer": ("group.consumer.min.heartbeat.interval.ms=1000",
                                                 "group.consumer.heartbeat.interval.ms=1000")}


class CheckFailed(Exception):
    pass


def ensure_built(say=print) -> tuple[str, float]:
    """Kafka's jars (kafka-tools among them), installed by .ci/install-kafka on first use."""
    started = time.monotonic()
    try:
        cp = kafka.classpath()
    except BaseException:  # noqa: BLE001  (pytest.fail's exception when absent: install, then retry)
        say("java-verifiable: installing Apache Kafka's jars (.ci/install-kafka)")
        script = Path(__file__).resolve().parents[2] / ".ci" / "install-kafka"
        out = subprocess.run([str(script)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            raise RuntimeError(f"install-kafka failed ({out.returncode}):\n{out.stderr[-4000:]}") from None
        cp = kafka.classpath()
    return cp, time.monotonic() - started


class Verifiable:
    """One verifiable client process: its JSON events collected as they come, the rest logged."""

    def __init__(self, name: str, main: str, args: list[str], log_dir: Path) -> None:
        self.name = name
        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.log = open(log_dir / f"{name}.log", "w")
        self.proc = subprocess.Popen(kafka.java_command(main, *args), stdout=subprocess.PIPE,
                                     stderr=self.log, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, name=f"verifiable-{name}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.log.write(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def named(self, *names: str) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e.get("name") in names]

    def assignment(self) -> set[int]:
        """The partitions the rebalance listener holds now: eager (classic) revokes all and assigns
        all, cooperative and the consumer protocol add and remove; both read as set updates."""
        held: set[int] = set()
        for e in self.named("partitions_assigned", "partitions_revoked"):
            parts = {p["partition"] for p in e["partitions"]}
            held = held | parts if e["name"] == "partitions_assigned" else held - parts
        return held

    def consumed(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self.named("record_data")]

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM: VerifiableConsumer's shutdown hook wakes the consumer up and closes it."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.reader.join(10)
        self.log.close()


def wait_for(what: str, condition, deadline: float, every: float = 0.1) -> None:
    while not condition():
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out waiting for {what}")
        time.sleep(every)


class Scenario:
    def __init__(self, bootstrap: str, protocol: str, log_dir: Path, deadline: float) -> None:
        self.bootstrap = bootstrap
        self.protocol = protocol
        self.log_dir = log_dir
        self.deadline = deadline
        self.consumers: list[Verifiable] = []
        self.retired: list[Verifiable] = []  # consumers stopped on purpose: their events still count
        self.notes: list[str] = []

    def consumer(self, name: str, instance_id: str | None = None) -> Verifiable:
        args = ["--bootstrap-server", self.bootstrap, "--topic", TOPIC, "--group-id", GROUP,
                "--group-protocol", self.protocol, "--reset-policy", "earliest", "--verbose"]
        if self.protocol == "classic":  # the consumer protocol refuses a client-side session timeout
            args += ["--session-timeout", "10000"]
        if instance_id:
            args += ["--group-instance-id", instance_id]
        c = Verifiable(name, CONSUMER, args, self.log_dir)
        self.consumers.append(c)
        return c

    def produce(self, count: int, throughput: int = -1) -> list[tuple[int, int]]:
        p = Verifiable(f"producer-{int(time.monotonic() * 1000)}", PRODUCER,
                       ["--bootstrap-server", self.bootstrap, "--topic", TOPIC, "--max-messages", str(count),
                        "--acks", "-1", "--throughput", str(throughput)], self.log_dir)
        try:
            wait_for("the producer to finish", lambda: p.proc.poll() is not None, self.deadline, 0.2)
        finally:
            p.stop()
        errors = p.named("producer_send_error")
        acked = [(e["partition"], e["offset"]) for e in p.named("producer_send_success")]
        if p.proc.returncode != 0 or errors or len(acked) != count:
            raise CheckFailed(f"producer: rc {p.proc.returncode}, {len(acked)} of {count} acknowledged, "
                              f"{len(errors)} send errors {errors[:1]}")
        return acked

    def stable(self) -> bool:
        """Every live consumer holds partitions, none twice, all of the topic's."""
        live = [c.assignment() for c in self.consumers]
        held = [p for a in live for p in a]
        return all(live) and len(held) == len(set(held)) == PARTITIONS

    def wait_stable(self) -> None:
        wait_for(f"{len(self.consumers)} consumer(s) to share the {PARTITIONS} partitions", self.stable, self.deadline)

    def every(self) -> list[Verifiable]:
        return self.retired + self.consumers

    def wait_consumed(self, acked: list[tuple[int, int]]) -> None:
        wanted = set(acked)
        wait_for(f"all {len(wanted)} acknowledged records to be consumed",
                 lambda: wanted <= {r for c in self.every() for r in c.consumed()}, self.deadline, 0.2)

    def stop_all(self) -> None:
        for c in self.consumers:
            c.stop()
        self.retired += self.consumers
        self.consumers = []

    def retire(self, c: Verifiable) -> None:
        c.stop()
        self.consumers.remove(c)
        self.retired.append(c)

    def check(self, acked: list[tuple[int, int]], final_assignments: list[set[int]]) -> None:
        consumed = Counter(r for c in self.every() for r in c.consumed())
        lost = set(acked) - set(consumed)
        duplicated = sorted(r for r, n in consumed.items() if n > 1)
        problems = []
        if lost:
            problems.append(f"{len(lost)} acknowledged records never consumed, e.g. {sorted(lost)[:3]}")
        if duplicated:
            problems.append(f"{len(duplicated)} records consumed more than once, e.g. {duplicated[:3]}")
        failed = [e for c in self.every() for e in c.named("offsets_committed") if not e.get("success")]
        if failed:
            problems.append(f"{len(failed)} failed commits, e.g. {failed[0].get('error')}")
        ends = {p: max(o for q, o in acked if q == p) + 1 for p in {q for q, _ in acked}}
        committed: dict[int, int] = {}
        for c in self.every():
            for e in c.named("offsets_committed"):
                for o in e.get("offsets") or []:
                    committed[o["partition"]] = max(committed.get(o["partition"], 0), o["offset"])
        if committed != ends:
            problems.append(f"committed offsets {committed}, partition ends {ends}")
        held = [p for a in final_assignments for p in a]
        if len(held) != len(set(held)) or set(held) != set(range(PARTITIONS)):
            problems.append(f"final assignments {final_assignments} are not a partition of the topic")
        for c in self.every():
            if not c.named("shutdown_complete"):
                problems.append(f"{c.name} did not report shutdown_complete (rc {c.proc.returncode})")
        if problems:
            raise CheckFailed("; ".join(problems))
        self.notes.append(f"{len(acked)} records, {sum(consumed.values())} consumed, "
                          f"{sum(len(c.named('offsets_committed')) for c in self.every())} commits")


def group_consumption(s: Scenario) -> None:
    """Two consumers share the topic, then records arrive: each consumed once, committed to the end."""
    s.consumer("c1")
    s.consumer("c2")
    s.wait_stable()
    acked = s.produce(RECORDS)
    s.wait_consumed(acked)
    final = [c.assignment() for c in s.consumers]
    s.stop_all()
    s.check(acked, final)


def consumer_bounce(s: Scenario) -> None:
    """kafkatest's test_consumer_bounce with a clean shutdown: while records arrive, one of two consumers
    stops and a new one joins, twice; the group moves its partitions each time without loss or
    duplicates (the leaving consumer committed what it handed over)."""
    s.consumer("c1")
    c2 = s.consumer("c2")
    s.wait_stable()
    acked = s.produce(RECORDS // 2)
    wait_for("c2 to consume", lambda: c2.consumed(), s.deadline)
    for round_ in (1, 2):
        s.retire(c2)
        s.wait_stable()  # c1 alone holds everything
        acked += s.produce(RECORDS // 4)
        c2 = s.consumer(f"c2-bounce{round_}")
        s.wait_stable()
    s.wait_consumed(acked)
    final = [c.assignment() for c in s.consumers]
    s.stop_all()
    s.check(acked, final)


def static_bounce(s: Scenario) -> None:
    """kafkatest's test_static_consumer_bounce: two static members (group.instance.id); one restarts
    within the session timeout and gets its own partitions back without the other losing any (a static
    member's LeaveGroup is not sent on close, so the group does not rebalance)."""
    s.consumer("c1", instance_id="static-1")
    c2 = s.consumer("c2", instance_id="static-2")
    s.wait_stable()
    before = c2.assignment()
    c1_changes = len(s.consumers[0].named("partitions_assigned", "partitions_revoked"))
    acked = s.produce(RECORDS // 2)
    s.retire(c2)
    c2 = s.consumer("c2-restarted", instance_id="static-2")
    s.wait_stable()
    if c2.assignment() != before:
        raise CheckFailed(f"the restarted static member got {sorted(c2.assignment())}, held {sorted(before)}")
    changes = len(s.consumers[0].named("partitions_assigned", "partitions_revoked"))
    if changes != c1_changes:
        raise CheckFailed(f"the other static member saw {changes - c1_changes} assignment change(s)")
    acked += s.produce(RECORDS // 2)
    s.wait_consumed(acked)
    final = [c.assignment() for c in s.consumers]
    s.stop_all()
    s.check(acked, final)


SCENARIOS = {f.__name__: f for f in (group_consumption, consumer_bounce, static_bounce)}


def run_entry(entry: Entry, run_dir: Path | None = None) -> Result:
    run_dir = (run_dir or logs_dir(entry.suite)) / safe_name(entry.id)
    run_dir.mkdir(parents=True, exist_ok=True)
    protocol = entry.subtests or "classic"
    started = time.monotonic()
    server, data_dir = start_groupd(SETTINGS + PROTOCOL_SETTINGS[protocol])
    scenario = Scenario(server.bootstrap, protocol, run_dir, started + entry.timeout)
    try:
        SCENARIOS[entry.target](scenario)
        status, detail = "PASS", "; ".join(scenario.notes)
    except CheckFailed as e:
        status, detail = "FAIL", str(e)
    finally:
        for c in scenario.consumers:
            c.stop(timeout=20)
        stop_groupd(server, data_dir, keep_log=run_dir / "groupd.log")
    return Result(entry, status, time.monotonic() - started, detail, str(run_dir))
