"""Share-group delivery (KIP-932) with a real client: confluent-kafka 2.16's ShareConsumer (librdkafka
2.16, ShareFetch/ShareAcknowledge v1) against the real server. Two consumers on a one-partition topic
both receive records and every record is acknowledged exactly once; a consumer closed without
acknowledging hands its records to the other with delivery count 2; a restart of groupd keeps
acknowledged records acknowledged."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from groupd.protocol.apis import ApiKey
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, groupd_fixture

pytestmark = pytest.mark.clients

server = groupd_fixture("topics=q:1,r:1,e:1")


def share_consumer(bootstrap: str, group: str, **extra) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit", **extra})


def initialized(server, group: str) -> bool:
    """The share-partition exists (`latest`: it starts at the log end at the group's first ShareFetch)."""
    return re.search(rf"share partition initialized group={group} ", server.log()) is not None


def both_hold_the_partition(bootstrap: str, group: str) -> bool:
    with WireClient(bootstrap) as c:
        [g] = c.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                        "include_authorized_operations": False}).groups
    return len(g.members) == 2 and all(
        [list(t.partitions) for t in m.assignment.topic_partitions] == [[0]] for m in g.members)


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=0)
        if i % 10 == 9:
            p.flush(10)
    assert p.flush(10) == 0


def test_two_share_consumers_split_the_records_and_each_is_accepted_once(server):
    consumers = [share_consumer(server.bootstrap, "sq", **{"max.poll.records": 10}) for _ in range(2)]
    received: list[list[int]] = [[], []]
    try:
        for c in consumers:
            c.subscribe(["q"])
        # a new group gets its partitions at the heartbeat after their share state is initialized (as
        # Kafka's), each member at its own next heartbeat: both must hold q-0 before the records come
        wait_until(lambda: [c.poll(0.1) for c in consumers] and initialized(server, "sq")
                   and both_hold_the_partition(server.bootstrap, "sq"), 60,
                   "both members holding q-0 and the share-partition initialized by a ShareFetch")
        produce(server.bootstrap, "q", 200)

        def drained():
            for i, c in enumerate(consumers):
                for m in c.poll(0.1):
                    assert m.error() is None, m.error()
                    assert m.delivery_count() == 1
                    received[i].append(m.offset())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                results = c.commit_sync(30)
                assert all(v is None for v in results.values()), results
            return sum(map(len, received)) >= 200

        wait_until(drained, 90, "all 200 records received")
    finally:
        for c in consumers:
            c.close()
    assert sorted(received[0] + received[1]) == list(range(200))  # each offset once, none redelivered
    assert received[0] and received[1]  # both consumers had work


def test_records_of_a_consumer_closed_without_acknowledging_go_to_the_other(server):
    holder = share_consumer(server.bootstrap, "sr")
    other = None
    try:
        holder.subscribe(["r"])
        wait_until(lambda: holder.poll(0.1) is not None and initialized(server, "sr"), 60, "the share-partition")
        produce(server.bootstrap, "r", 5)
        held: list[int] = []
        wait_until(lambda: held.extend(m.offset() for m in holder.poll(0.2) if m.error() is None) or len(held) >= 5,
                   60, "the holder has the five records")
        assert sorted(held) == list(range(5))
        other = share_consumer(server.bootstrap, "sr")
        other.subscribe(["r"])
        wait_until(lambda: other.poll(0.1) is not None and "member" in server.log(), 60, "the other consumer joined")
    finally:
        holder.close()  # leave, then ShareAcknowledge epoch -1: what it held is released
    got: dict[int, int] = {}
    try:
        def redelivered():
            for m in other.poll(0.2):
                assert m.error() is None, m.error()
                got[m.offset()] = m.delivery_count()
                other.acknowledge(m)
            other.commit_sync(30)
            return len(got) >= 5

        wait_until(redelivered, 90, "the five records redelivered to the other consumer")
    finally:
        other.close()
    assert got == {o: 2 for o in range(5)}


def test_a_restart_keeps_acknowledged_records_acknowledged(tmp_path):
    s = GroupdProcess(str(tmp_path), "topics=k:1").start()
    try:
        first = share_consumer(s.bootstrap, "sk")
        try:
            first.subscribe(["k"])
            wait_until(lambda: first.poll(0.1) is not None and initialized(s, "sk"), 60, "the share-partition")
            produce(s.bootstrap, "k", 10)
            done: list[int] = []

            def accepted():
                for m in first.poll(0.2):
                    done.append(m.offset())
                    first.acknowledge(m)
                results = first.commit_sync(30)
                assert all(v is None for v in results.values()), results
                return len(done) >= 10

            wait_until(accepted, 60, "ten records accepted")
        finally:
            first.close()
        s.stop()
        s.start()
        produce(s.bootstrap, "k", 5)
        second = share_consumer(s.bootstrap, "sk")
        got: list[int] = []
        try:
            second.subscribe(["k"])

            def the_new_ones():
                for m in second.poll(0.2):
                    got.append(m.offset())
                    second.acknowledge(m)
                second.commit_sync(30)
                return len(got) >= 5

            wait_until(the_new_ones, 60, "the five records produced after the restart")
        finally:
            second.close()
        assert sorted(done) == list(range(10)) and sorted(got) == list(range(10, 15))
    finally:
        s.stop()


def test_share_auto_offset_reset_earliest_set_by_incremental_alter_configs(server):
    """As librdkafka's and confluent-kafka's own share suites do before every test."""
    produce(server.bootstrap, "e", 3)  # before the group's first ShareFetch
    client = AdminClient({"bootstrap.servers": server.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "se", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "bogus", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        client.incremental_alter_configs([resource])[resource].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    resource = ConfigResource(ResourceType.GROUP, "se", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(10)
    described = client.describe_configs([ConfigResource(ResourceType.GROUP, "se")])
    [configs] = [f.result(10) for f in described.values()]
    assert configs["share.auto.offset.reset"].value == "earliest"
    consumer = share_consumer(server.bootstrap, "se")
    got: list[int] = []
    try:
        consumer.subscribe(["e"])

        def received():
            for m in consumer.poll(0.2):
                got.append(m.offset())
                consumer.acknowledge(m)
            consumer.commit_sync(30)
            return len(got) >= 3

        wait_until(received, 60, "the three records produced before the group fetched")
    finally:
        consumer.close()
    assert sorted(got) == [0, 1, 2]
