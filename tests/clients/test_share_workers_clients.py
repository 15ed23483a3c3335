"""Share groups on `groupd serve --workers 2` with confluent-kafka's ShareConsumer: the group is
coordinated by the worker that owns its offsets partition, each data partition's records are
acquired and acknowledged at its leader (partition p at worker p mod 2), which keeps that
share-partition's state; a `kill -9` of worker 1 while a consumer holds records of its partition
hands them out again once the worker is back, and records accepted before the kill never come
again. DescribeShareGroupOffsets at the group's coordinator reads the other worker's share state, and
the group's offsets altered, deleted and the group deleted there change it at both workers; a worker
that cannot be asked fails only its own partitions."""

from __future__ import annotations

import os
import re
import signal

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.cluster.test_workers import at, group_on, start_workers, worker_pid
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, free_ports
from tests.support.share_admin import administer_across_leaders, alter

pytestmark = pytest.mark.clients

TOPIC = "sw"


@pytest.fixture
def server(tmp_path):
    s = start_workers(str(tmp_path), f"topics={TOPIC}:2")
    yield s
    assert s.stop() == 0, s.log()


def share_consumer(bootstrap: str, group: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "max.poll.records": 20})
    c.subscribe([TOPIC])
    return c


def initialized(server, group: str, partitions: int) -> bool:
    return server.log().count(f"share partition initialized group={group} ") >= partitions


def produce(bootstrap: str, counts: dict[int, int], start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, n in counts.items():
        for i in range(start, start + n):
            p.produce(TOPIC, value=b"%d" % i, partition=partition)
    assert p.flush(30) == 0


def test_each_partitions_records_are_acquired_at_its_leader_and_accepted_once(server):
    group = group_on(1, "share-w")  # coordinated by worker 1; partition 0 is led by worker 0
    consumers = [share_consumer(server.bootstrap, group) for _ in range(2)]
    got: list[tuple[int, int]] = []
    try:
        wait_until(lambda: [c.poll(0.1) for c in consumers] and initialized(server, group, 2), 60,
                   "both share-partitions initialized, each by its leader")
        produce(server.bootstrap, {0: 50, 1: 50})

        def drained():
            for c in consumers:
                for m in c.poll(0.1):
                    assert m.error() is None, m.error()
                    got.append((m.partition(), m.offset()))
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                results = c.commit_sync(30)
                assert all(v is None for v in results.values()), results
            return len(got) >= 100

        wait_until(drained, 90, "all 100 records received")
    finally:
        for c in consumers:
            c.close()
    assert sorted(got) == [(p, o) for p in (0, 1) for o in range(50)]  # each once
    log = server.log()
    assert "groupd[0]" in log and "groupd[1]" in log
    for worker, partition in ((0, 0), (1, 1)):  # each share-partition lives at its data partition's leader
        assert any(f"groupd[{worker}]" in line and f"group={group} " in line and f"partition={partition} " in line
                   for line in log.splitlines() if "share partition initialized" in line), log

    def offsets():  # at the coordinator: partition 0's state read from worker 0's log, its end as worker 0 reports it
        with WireClient(at(server, 1)) as c:
            r = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})
        return [(p.partition_index, p.start_offset, p.lag) for t in r.groups[0].topics for p in t.partitions]

    wait_until(lambda: offsets() == [(0, 50, 0), (1, 50, 0)], 30, "both start offsets at 50 with no lag")
    with WireClient(at(server, 0)) as c:  # the other worker does not coordinate the group
        r = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})
    assert r.groups[0].error_code is ErrorCode.not_coordinator


def test_a_killed_leader_worker_delivers_what_was_in_flight_again_and_never_what_was_accepted(server):
    group = group_on(0, "share-k")
    accepted: dict[int, int] = {}  # offset of partition 1 → times delivered, before the kill
    after: dict[int, int] = {}  # the same, after it

    def take(consumer, into: dict, until) -> bool:
        for m in consumer.poll(0.2):
            assert m.error() is None and m.partition() == 1, m.error()
            into[m.offset()] = into.get(m.offset(), 0) + 1
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        assert all(v is None for v in consumer.commit_sync(30).values())
        return until()

    first = share_consumer(server.bootstrap, group)
    try:
        wait_until(lambda: first.poll(0.1) is not None and initialized(server, group, 2), 60, "the share-partitions")
        produce(server.bootstrap, {1: 5})
        wait_until(lambda: take(first, accepted, lambda: len(accepted) >= 5), 60, "five records accepted")
    finally:
        first.close()  # the client fetches ahead in the background: it must not take what the holder gets
    holder = share_consumer(server.bootstrap, group)
    taker = None
    try:
        produce(server.bootstrap, {1: 5}, start=5)
        held = wait_until(lambda: [m.offset() for m in holder.poll(0.2) if m.error() is None], 60,
                          "the holder acquired records (and never acknowledges them)")
        seen = server.log().count("worker ready worker=1 ")
        os.kill(worker_pid(server, 1), signal.SIGKILL)
        # gone while its leader is down: it releases nothing (the next worker 1 never knew its session),
        # and the taker, alone in the group, is assigned both partitions
        holder.close()
        holder = None
        wait_until(lambda: server.log().count("worker ready worker=1 ") > seen, 60, "worker 1 restarted")
        produce(server.bootstrap, {1: 5}, start=10)
        taker = share_consumer(server.bootstrap, group)
        wait_until(lambda: take(taker, after, lambda: set(range(5, 15)) <= set(after)), 60,
                   "the held records delivered again and the new ones delivered")
    finally:
        for c in (holder, taker):
            if c is not None:
                c.close()
    assert accepted == {o: 1 for o in range(5)} and set(held) <= set(range(5, 10))
    assert after == {o: 1 for o in range(5, 15)}  # what was accepted before the kill: never again
    assert re.search(r"groupd\[1\].* share state loaded topic_id=\S+ partition=1 stamp=0 ", server.log())


def test_offsets_altered_described_and_deleted_at_the_coordinator_reach_both_workers(server):
    """The group is coordinated by worker 1; partition 0 is led by worker 0, which keeps its state:
    AlterShareGroupOffsets, DescribeShareGroupOffsets (with lag), DeleteShareGroupOffsets and
    DeleteGroups at worker 1 reach it (share_admin.py), and a consumer resumes from the altered offsets."""
    administer_across_leaders(server.bootstrap, at(server, 1), TOPIC, group_on(1, "share-admin"),
                              leaders={0: at(server, 0), 1: at(server, 1)}, elsewhere={0: at(server, 1)})


def test_a_leader_that_cannot_be_asked_fails_only_its_partitions(tmp_path):
    """Only a SASL listener and no super user with a password: the workers cannot authenticate to each
    other (one warning). AlterShareGroupOffsets and DescribeShareGroupOffsets at the coordinator (worker
    1) answer COORDINATOR_NOT_AVAILABLE for partition 0, led by worker 0, once its retries run out,
    while the coordinator's own partition 1 is altered and described."""
    port = free_ports(2)
    s = GroupdProcess(str(tmp_path), "workers=2", f"topics={TOPIC}:2", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                      "sasl.enabled.mechanisms=PLAIN", "sasl.users=admin:admin-secret",
                      port=port, ready="workers ready").start(timeout=60)
    try:
        group = group_on(1, "share-cut")
        with WireClient(at(s, 1), timeout=60) as c:
            assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code is ErrorCode.none
            assert c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0admin\0admin-secret"}).error_code \
                is ErrorCode.none
            r = alter(c, group, TOPIC, {0: 3, 1: 3})
            assert r.error_code is ErrorCode.none
            assert [(p.partition_index, p.error_code) for p in r.responses[0].partitions] == [
                (0, ErrorCode.coordinator_not_available), (1, ErrorCode.none)]
            r = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
                {"group_id": group, "topics": [{"topic_name": TOPIC, "partitions": [0, 1]}]}]})
            assert [(p.partition_index, p.error_code, p.start_offset) for p in r.groups[0].topics[0].partitions] \
                == [(0, ErrorCode.coordinator_not_available, 0), (1, ErrorCode.none, 3)]
        assert s.log().count("broker request impossible: listener") == 1, s.log()
    finally:
        assert s.stop() == 0, s.log()
