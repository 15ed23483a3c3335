"""The disk records plane in cluster mode (issue 22): a real etcd and two real groupd nodes on one
shared data dir. A data partition is led by the owner of its home offsets partition (etcd claims):
every node's Metadata names the same single leader per data partition; a producer bootstrapped
through one node and a consumer group through the other see the same log; a kill -9 of a data
partition's leader in an acks=all produce loop moves it to the survivor with every acknowledged
record."""

from __future__ import annotations

import os
import signal
import threading
import uuid

import pytest

from groupd.coordinator.tools.groups import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.cluster.test_cluster_etcd import etcd, spread, two_nodes  # noqa: F401,F811 (the fixture)
from tests.support.harness import wait_until

pytestmark = pytest.mark.clients


@pytest.fixture
def nodes(tmp_path, etcd):  # noqa: F811
    yield from two_nodes(tmp_path, etcd, "records.plane=disk")


def leaders(bootstrap: str, topic: str = "t") -> dict[int, int] | None:
    try:
        with AdminConnection(bootstrap, "records-cluster-test") as c:
            r = c.request(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                                "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
    except OSError:
        return None
    return {p.partition_index: p.leader_id for t in r.topics for p in t.partitions
            if t.error_code == ErrorCode.none}


def agreed_leaders(nodes, among: set[int], exactly: bool = False) -> dict[int, int]:
    def agreed():
        seen = [leaders(n.bootstrap) for n in nodes if n.alive()]
        if seen and all(s == seen[0] for s in seen) and seen[0] and set(seen[0].values()) <= among \
                and -1 not in seen[0].values() and (not exactly or set(seen[0].values()) == among):
            return seen[0]
        return None
    return wait_until(agreed, 60, "every node names the same leader for each data partition")


def consume(bootstrap: str, group: str, count: int) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 10000})
    c.subscribe(["t"])
    got: dict[int, list[bytes]] = {}

    def enough() -> bool:
        for m in c.consume(1000, 0.5):
            if not m.error():
                got.setdefault(m.partition(), []).append(m.value())
        return sum(map(len, got.values())) >= count

    try:
        wait_until(enough, 90, f"{count} records consumed")
    finally:
        c.close()
    return got


def produce_storm(bootstrap: str, acked: dict, stop: threading.Event) -> None:
    """acks=all to every partition of t until `stop`: `acked[(partition, offset)] = value`."""
    from tests.storage.test_records_crash import storm

    storm(bootstrap, "t", acked, stop, 1, partitions=4)


def test_one_leader_per_data_partition_and_a_producer_and_a_group_through_different_nodes(nodes):
    from confluent_kafka import Producer

    spread(nodes)
    first = agreed_leaders(nodes, {1, 2})
    assert sorted(first) == [0, 1, 2, 3]
    p = Producer({"bootstrap.servers": nodes[0].bootstrap, "acks": "all"})
    errors: list = []
    for i in range(40):
        p.produce("t", value=f"v{i}".encode(), partition=i % 4,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors
    got = consume(nodes[1].bootstrap, f"g-{uuid.uuid4().hex[:6]}", 40)
    assert {p: sorted(v) for p, v in got.items()} == {
        q: sorted(f"v{i}".encode() for i in range(40) if i % 4 == q) for q in range(4)}


def test_a_killed_leader_moves_its_data_partitions_with_every_acknowledged_record(nodes):
    spread(nodes)
    lead = agreed_leaders(nodes, {1, 2})
    victim = next((n for n in (2, 1) if n in lead.values()), None)
    assert victim is not None
    acked: dict[tuple[int, int], bytes] = {}
    stop = threading.Event()
    storm = lambda: produce_storm(f"{nodes[0].bootstrap},{nodes[1].bootstrap}", acked, stop)  # noqa: E731
    t = threading.Thread(target=storm, daemon=True)
    t.start()
    try:
        wait_until(lambda: len(acked) >= 2000, 60, "records acknowledged before the kill")
        nodes[victim - 1].stop(signal.SIGKILL)
        survivor = nodes[2 - victim]
        agreed_leaders([survivor], {survivor_id := 3 - victim})
        before = len(acked)
        wait_until(lambda: len(acked) >= before + 1000, 90, "records acknowledged by the survivor")
    finally:
        stop.set()
        t.join(90)
    assert set(agreed_leaders([survivor], {survivor_id}).values()) == {survivor_id}
    from tests.storage.test_records_crash import read_all

    stored = read_all(survivor.bootstrap, "t", 4)
    lost = {k: v for k, v in acked.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost, e.g. {sorted(lost)[:5]}"


def test_workers_own_their_data_partitions_on_disk_through_a_workers_kill_9(tmp_path):
    """`--workers 2`: worker i leads (and writes the directories of) the data partitions p mod 2 = i;
    a producer bootstrapped through worker 0 and a group through worker 1 see every record, and after
    a kill -9 of worker 1 (restarted by the supervisor) its partitions still hold theirs."""
    from confluent_kafka import Producer

    from tests.cluster.test_workers import at, start_workers, worker_pid

    s = start_workers(str(tmp_path), "topics=t:4", "group.min.session.timeout.ms=1000")
    try:
        assert leaders(at(s, 0)) == leaders(at(s, 1)) == {0: 1, 1: 2, 2: 1, 3: 2}
        p = Producer({"bootstrap.servers": at(s, 0), "acks": "all"})
        for i in range(40):
            p.produce("t", value=f"v{i}".encode(), partition=i % 4)
        assert p.flush(30) == 0
        expected = {q: sorted(f"v{i}".encode() for i in range(40) if i % 4 == q) for q in range(4)}
        got = consume(at(s, 1), "g-workers", 40)
        assert {q: sorted(v) for q, v in got.items()} == expected
        seen = s.log().count("worker ready worker=1 ")
        os.kill(worker_pid(s, 1), signal.SIGKILL)
        wait_until(lambda: s.log().count("worker ready worker=1 ") > seen, 60, "worker 1 again")
        got = consume(at(s, 0), "g-after", 40)
        assert {q: sorted(v) for q, v in got.items()} == expected
    finally:
        assert s.stop() == 0, s.log()


def test_data_partitions_handed_over_to_a_joining_node_keep_every_acknowledged_record(tmp_path, etcd):  # noqa: F811
    """A clean hand-over: node 2 joins while node 1 takes an acks=all storm; the data partitions whose
    home moves are let go (their writes in flight finish) before node 2 loads them."""
    from tests.cluster.test_cluster_etcd import SETTINGS
    from tests.storage.test_records_crash import read_all
    from tests.support.etcd_server import cluster_node

    data = str(tmp_path / "data")
    one = cluster_node(data, etcd, 1, *SETTINGS).start()
    two = None
    acked: dict[tuple[int, int], bytes] = {}
    stop = threading.Event()
    # node 1 claims its offsets partitions one by one: it must lead (and have written) every data
    # partition before node 2 comes, or a home node 2 wins has nothing to hand over
    assert agreed_leaders([one], {1}) == {0: 1, 1: 1, 2: 1, 3: 1}
    t = threading.Thread(target=produce_storm, args=(one.bootstrap, acked, stop), daemon=True)
    t.start()
    try:
        wait_until(lambda: {p for p, _ in list(acked)} == {0, 1, 2, 3} and len(acked) >= 1500, 60,
                   "records acknowledged by node 1 alone, on every partition")
        two = cluster_node(data, etcd, 2, *SETTINGS).start()
        agreed_leaders([one, two], {1, 2}, exactly=True)  # t-3's home moves to node 2 (rendezvous)
        before = len(acked)
        wait_until(lambda: len(acked) >= before + 1500, 90, "records acknowledged after the hand-over")
        stop.set()
        t.join(90)
        assert "data partition released partition=t-3" in one.log()
        stored = read_all(f"{one.bootstrap},{two.bootstrap}", "t", 4)
        lost = {k: v for k, v in acked.items() if stored.get(k) != v}
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    finally:
        stop.set()
        for node in (one, two):
            if node is not None:
                assert node.stop() == 0, node.log()


@pytest.fixture
def cleaning_nodes(tmp_path, etcd):  # noqa: F811
    yield from two_nodes(tmp_path, etcd, "records.plane=disk", "log.cleaner.backoff.ms=100")


def test_a_cluster_leader_compacts_its_own_segments_and_keeps_tombstones_over_older_leaders(cleaning_nodes):
    """Cluster mode: the leader of a compacted partition cleans the closed segments of its own stamp;
    after the partition moves, the new leader cleans only its own, and keeps every tombstone (with
    delete.retention.ms=0) since the value it deletes may lie in the earlier leader's segments."""
    import time

    from tests.storage.test_records_compaction import create, keyed, read_all
    from tests.storage.test_records_plane import produce
    from tests.support.process import WireClient

    by_id = {i + 1: n for i, n in enumerate(cleaning_nodes)}  # nodes 1 and 2
    with WireClient(cleaning_nodes[0].bootstrap) as c:
        create(c, "ct", cleanup_policy="compact", segment_ms="100", delete_retention_ms="0",
               min_cleanable_dirty_ratio="0.01")
    def agreed():
        seen = [leaders(n.bootstrap, "ct") for n in cleaning_nodes]
        return seen[0] if seen[0] and seen[0].get(0, -1) > 0 and all(x == seen[0] for x in seen) else None
    first_id = wait_until(agreed, 60, "both nodes name ct's leader")[0]
    first = by_id[first_id]
    ts = int(time.time() * 1000) - 600_000

    def write(node, rounds: range, keys=("a", "b", "c")) -> None:
        nonlocal ts
        with WireClient(node.bootstrap) as c:
            for r in rounds:
                for k in keys:
                    ts += 1000  # each batch a second after the last: segment.ms=100 rolls before it
                    value = None if r < 0 else b"%d" % r
                    assert produce(c, "ct", 0, keyed(k.encode(), value, ts)).error_code is ErrorCode.none

    write(first, range(3))
    wait_until(lambda: "compacted partition=ct-0 " in first.log(), 60, "the first leader's clean")
    # one record a segment, a0 b0 c0 a1 b1 c1 a2 b2 | c2 (active): the closed ones keep each key's latest
    expected = [(5, b"c", b"1"), (6, b"a", b"2"), (7, b"b", b"2"), (8, b"c", b"2")]
    with WireClient(first.bootstrap) as c:
        wait_until(lambda: read_all(c, "ct") == expected, 60, "each key's latest value in the closed segments")

    assert first.stop() == 0, first.log()
    second_id = 3 - first_id
    second = by_id[second_id]
    wait_until(lambda: leaders(second.bootstrap, "ct") == {0: second_id}, 60, "the partition moved")
    write(second, range(3, 5), keys=("a", "b"))
    write(second, [-1], keys=("a",))  # a tombstone for a, whose older value is in the first leader's segments
    write(second, [9], keys=("z",))  # one more record: the tombstone's segment closes
    before = second.log().count("compacted partition=ct-0 ")
    wait_until(lambda: second.log().count("compacted partition=ct-0 ") > before, 60, "the second leader's clean")
    with WireClient(second.bootstrap) as c:
        got = read_all(c, "ct")
    by_key: dict[bytes, list] = {}
    for offset, k, v in got:
        by_key.setdefault(k, []).append((offset, v))
    assert by_key[b"a"][-1][1] is None, got  # the tombstone is kept: it hides a's value in older segments
    assert [v for _, v in by_key[b"b"]][-1] == b"4"
    # the second leader's own segments hold one record per key: b's round 3 is gone
    assert b"3" not in [v for _, v in by_key[b"b"]], got
