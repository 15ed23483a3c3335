"""Real clients on `groupd serve --workers 2`: confluent-kafka and kafka-python groups spread over both
workers produce to each partition's leader, consume and commit, each group served by the worker that
owns its offsets partition; after a `kill -9` of worker 1 the supervisor restarts it, the groups carry
on committing and every committed offset is intact."""

from __future__ import annotations

import os
import signal
import time

import pytest

from groupd.protocol import ErrorCode
from tests.cluster.test_workers import at, find, group_on, start_workers, worker_pid
from tests.support.harness import wait_until

pytestmark = pytest.mark.clients

TOPIC, PARTITIONS, RECORDS = "t", 4, 10  # per partition; partitions 0, 2 led by worker 0, 1, 3 by worker 1


def groups(prefix: str, per_worker: int) -> list[str]:
    out = []
    for worker in (0, 1):
        out += [group_on(worker, f"{prefix}{worker}-{i}-") for i in range(per_worker)]
    return out


@pytest.fixture
def server(tmp_path):
    s = start_workers(str(tmp_path), f"topics={TOPIC}:{PARTITIONS}", "group.min.session.timeout.ms=1000")
    yield s
    assert s.stop() == 0, s.log()


class Member:
    """One consumer of a group (either library) polled by the test's loop."""

    def __init__(self, library: str, bootstrap: str, group: str) -> None:
        self.library, self.group, self.records = library, group, 0
        if library == "confluent":
            from confluent_kafka import Consumer

            self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                               "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                               "heartbeat.interval.ms": 500})
            self.c.subscribe([TOPIC])
        else:
            from kafka import KafkaConsumer

            self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                   auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=500)
            self.c.subscribe([TOPIC])

    def poll(self) -> None:
        if self.library == "confluent":
            for m in self.c.consume(100, 0.05):
                if m.error() is None:
                    self.records += 1
        else:
            self.records += sum(len(batch) for batch in self.c.poll(timeout_ms=50).values())

    def commit(self, offsets: dict[int, int]) -> None:
        if self.library == "confluent":
            from confluent_kafka import TopicPartition

            result = self.c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
            assert all(tp.error is None for tp in result), result
        else:
            from kafka import TopicPartition
            from kafka.structs import OffsetAndMetadata

            self.c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def committed(self) -> dict[int, int]:
        if self.library == "confluent":
            from confluent_kafka import TopicPartition

            return {tp.partition: tp.offset for tp in
                    self.c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)}
        from kafka import TopicPartition

        return {p: self.c.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}

    def close(self) -> None:
        self.c.close()


def produce(bootstrap: str, count: int) -> None:
    from confluent_kafka import Producer

    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in range(PARTITIONS):
        for i in range(count):
            p.produce(TOPIC, f"r{i}".encode(), partition=partition, on_delivery=lambda e, m: e and failed.append(e))
    assert p.flush(60) == 0 and not failed, failed


def poll_until(members: list[Member], done, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what}: " + ", ".join(f"{m.group}={m.records}" for m in members)
        for m in members:
            m.poll()


def test_groups_on_both_workers_consume_commit_and_survive_a_killed_worker(server):
    produce(server.bootstrap, RECORDS)
    members = [Member("confluent", server.bootstrap, g) for g in groups("cf", 3)]
    members += [Member("kafka-python", server.bootstrap, g) for g in groups("kp", 1)]
    try:
        # every group reads every partition, from both leaders
        poll_until(members, lambda: all(m.records == RECORDS * PARTITIONS for m in members), 120, "consumed")
        for m in members:
            m.commit({p: RECORDS for p in range(PARTITIONS)})
            owner = find(at(server, 0), m.group)
            assert (owner.error_code, owner.port) == (ErrorCode.none, server.port + (owner.node_id - 1))
        assert {find(at(server, 1), m.group).node_id for m in members} == {1, 2}

        seen = server.log().count("worker ready worker=1 ")
        os.kill(worker_pid(server, 1), signal.SIGKILL)
        wait_until(lambda: server.log().count("worker ready worker=1 ") > seen, timeout=60, what="worker 1 again")

        # the same members commit again: their groups were reloaded from worker 1's log
        deadline = time.monotonic() + 90
        pending = list(members)
        while pending:
            m = pending[0]
            try:
                m.commit({p: RECORDS + 1 + p for p in range(PARTITIONS)})
                pending.pop(0)
            except Exception:  # noqa: BLE001 - a rebalance or the coordinator still moving: poll, then again
                assert time.monotonic() < deadline, f"{m.group} could not commit after the restart"
                for x in members:
                    x.poll()
        for m in members:
            assert m.committed() == {p: RECORDS + 1 + p for p in range(PARTITIONS)}, m.group
    finally:
        for m in members:
            m.close()


def test_java_consumers_commit_at_the_worker_that_owns_their_group(server, clients):
    from groupd.coordinator.tools import groups as admin

    produce(server.bootstrap, RECORDS)
    groups = [group_on(w, "java") for w in (0, 1)]
    members = [clients("java", "subscribe", server.bootstrap, topic=TOPIC, group=g, seconds=0, commit="true",
                       **{"session.ms": 6000, "auto.offset.reset": "earliest"}) for g in groups]

    def committed(group: str) -> list | None:
        try:
            return [o["offset"] for o in admin.describe_group(server.bootstrap, group)["offsets"]]
        except admin.UnknownGroup:  # not joined yet
            return None

    for group in groups:
        wait_until(lambda: committed(group) == [RECORDS] * PARTITIONS, 120, f"{group}'s commits")
    assert all(not m.errors() for m in members), [m.errors() for m in members]
    assert [find(server.bootstrap, g).node_id for g in groups] == [1, 2]
