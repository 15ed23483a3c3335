"""Share groups in cluster mode (a real etcd, two real groupd nodes on one shared data dir) with
confluent-kafka's ShareConsumer: a share-partition's state lives with its data partition's leader,
and when that leader is killed -9 the survivor takes the data partition and its share state over:
records accepted before the kill are never delivered again, records acquired and not acknowledged
are delivered again, and the group (coordinated by the survivor) carries on. A clean hand-over (a
node joining takes partitions over) moves the state too. The group's offsets altered, described and
deleted, and the group deleted, at its coordinator reach the state at both nodes."""

from __future__ import annotations

import re
import signal

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.cluster.test_cluster_etcd import SETTINGS, etcd, two_nodes  # noqa: F401 (the fixture)
from tests.cluster.test_cluster_records import agreed_leaders
from tests.support.etcd_server import cluster_node, coordinators
from tests.support.harness import wait_until
from tests.support.share_admin import administer_across_leaders

pytestmark = pytest.mark.clients


@pytest.fixture
def nodes(tmp_path, etcd):  # noqa: F811
    yield from two_nodes(tmp_path, etcd, "records.plane=disk")


def share_consumer(bootstrap: str, group: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "max.poll.records": 20})
    c.subscribe(["t"])
    return c


def earliest(nodes, group: str) -> None:
    """share.auto.offset.reset=earliest for the group, seen by every node."""
    client = AdminClient({"bootstrap.servers": nodes[0].bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(30)

    admins = [AdminClient({"bootstrap.servers": n.bootstrap}) for n in nodes]

    def everywhere() -> bool:
        for admin in admins:
            described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
            [configs] = [f.result(30) for f in described.values()]
            if configs["share.auto.offset.reset"].value != "earliest":
                return False
        return True

    wait_until(everywhere, 30, "the group config on both nodes")


def produce(bootstrap: str, partition: int, offsets: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for i in offsets:
        p.produce("t", value=b"%d" % i, partition=partition)
    assert p.flush(30) == 0


def take(consumer: ShareConsumer, partition: int, into: dict[int, int]) -> None:
    for m in consumer.poll(0.2):
        assert m.error() is None and m.partition() == partition, m.error()
        into[m.offset()] = into.get(m.offset(), 0) + 1
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    assert all(v is None for v in consumer.commit_sync(30).values())


def test_a_killed_leader_hands_its_share_state_to_the_survivor(nodes):
    lead = agreed_leaders(nodes, {1, 2}, exactly=True)
    victim = lead[min(lead)]  # the leader of some data partition
    partition = min(p for p, n in lead.items() if n == victim)
    survivor = nodes[2 - victim]
    group = next(g for g in (f"share-{i}" for i in range(1000))
                 if wait_until(lambda g=g: coordinators(survivor.bootstrap, [g]), 30, "a coordinator")[g]
                 == survivor_id(victim))
    earliest(nodes, group)
    bootstrap = f"{nodes[0].bootstrap},{nodes[1].bootstrap}"
    produce(bootstrap, partition, range(5))
    accepted: dict[int, int] = {}
    first = share_consumer(bootstrap, group)
    try:
        wait_until(lambda: take(first, partition, accepted) or len(accepted) >= 5, 60, "five records accepted")
    finally:
        first.close()  # it fetches ahead in the background: it must not take what the holder gets
    produce(bootstrap, partition, range(5, 10))
    holder = share_consumer(bootstrap, group)
    held = wait_until(lambda: [m.offset() for m in holder.poll(0.2) if m.error() is None], 60,
                      "the holder acquired records (and never acknowledges them)")
    nodes[victim - 1].stop(signal.SIGKILL)
    holder.close()  # its leader is dead: it releases nothing
    agreed_leaders([survivor], {survivor_id(victim)})
    produce(survivor.bootstrap, partition, range(10, 15))
    after: dict[int, int] = {}
    taker = share_consumer(survivor.bootstrap, group)
    try:
        wait_until(lambda: take(taker, partition, after) or set(range(5, 15)) <= set(after), 90,
                   "the held records delivered again by the survivor, and the new ones")
    finally:
        taker.close()
    assert accepted == {o: 1 for o in range(5)} and set(held) <= set(range(5, 10))
    assert after == {o: 1 for o in range(5, 15)}  # what was accepted before the kill: never again
    assert re.search(rf"share state loaded topic_id=\S+ partition={partition} stamp=\d+ share_partitions=1",
                     survivor.log())


def survivor_id(victim: int) -> int:
    return 3 - victim


def test_partitions_moving_to_a_joining_node_keep_their_share_state(tmp_path, etcd):  # noqa: F811
    """A clean hand-over: node 2 joins and takes some data partitions from node 1 with their
    share-partitions' state; the consumer follows them there (NOT_LEADER_OR_FOLLOWER, then the new
    leader), and what was accepted at node 1 is not delivered again by either."""
    data = str(tmp_path / "data")
    first = cluster_node(data, etcd, 1, *SETTINGS, "records.plane=disk").start()
    second = None
    consumer = None
    try:
        agreed_leaders([first], {1})
        group = "share-move"
        earliest([first], group)
        for partition in range(4):
            produce(first.bootstrap, partition, range(5))
        seen: dict[tuple[int, int], int] = {}
        consumer = ShareConsumer({"bootstrap.servers": first.bootstrap, "group.id": group,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe(["t"])

        def drained(count: int):
            def check() -> bool:
                for m in consumer.poll(0.2):
                    assert m.error() is None, m.error()
                    seen[(m.partition(), m.offset())] = seen.get((m.partition(), m.offset()), 0) + 1
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                consumer.commit_sync(30)
                return len(seen) >= count
            return check

        wait_until(drained(20), 60, "the twenty records accepted at node 1")
        second = cluster_node(data, etcd, 2, *SETTINGS, "records.plane=disk").start()
        moved = agreed_leaders([first, second], {1, 2}, exactly=True)
        for partition in range(4):
            produce(f"{first.bootstrap},{second.bootstrap}", partition, range(5, 8))
        wait_until(drained(32), 90, "the new records, from both nodes, to the same consumer")
        assert seen == {(p, o): 1 for p in range(4) for o in range(8)}  # none of the accepted ones again
        assert 2 in moved.values()
        assert re.search(r"share state loaded topic_id=\S+ partition=\d stamp=\d+ share_partitions=1", second.log())
    finally:
        if consumer is not None:
            consumer.close()
        for node in (second, first):
            if node is not None and node.alive():
                assert node.stop() == 0, node.log()


def test_offsets_administered_at_the_coordinator_reach_both_nodes_share_state(nodes):
    """Topic t's partitions are led by both nodes, each keeping its partitions' share state:
    AlterShareGroupOffsets, DescribeShareGroupOffsets (lag from the leader's high watermark),
    DeleteShareGroupOffsets and DeleteGroups at the group's coordinator reach the other node over the
    broker channel (share_admin.py), and a consumer resumes from the altered offsets."""
    lead = agreed_leaders(nodes, {1, 2}, exactly=True)
    group = "share-admin"
    coordinator = wait_until(lambda: coordinators(nodes[0].bootstrap, [group]).get(group), 30, "a coordinator")
    other = next(p for p, n in lead.items() if n != coordinator)  # a partition the coordinator does not lead
    administer_across_leaders(f"{nodes[0].bootstrap},{nodes[1].bootstrap}", nodes[coordinator - 1].bootstrap, "t",
                              group, leaders={p: nodes[n - 1].bootstrap for p, n in lead.items()},
                              elsewhere={other: nodes[coordinator - 1].bootstrap})
