"""A share group's offsets administered at its coordinator while its topic's partitions are led by
several workers or nodes (issue 24): the one flow `groupd serve --workers 2` and a 2-node etcd cluster
both run. Each leader's own state is read with ReadShareGroupStateSummary sent straight to it (what
the coordinator sends there too); the admin requests go to the coordinator, through
kafka-share-groups.sh (Kafka's ShareGroupCommand) and the WireClient; confluent-kafka's ShareConsumer
consumes."""

from __future__ import annotations

import subprocess

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

from .harness import wait_until
from .kafka import java_command
from .process import WireClient

TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def share_tool(bootstrap: str, *args: str) -> list[list[str]]:
    out = subprocess.run(java_command(TOOL, "--bootstrap-server", bootstrap, *args), capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return [line.split() for line in out.stdout.splitlines() if line.strip()]


def topic_id(c: WireClient, name: str):
    return c.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": None}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False}).topics[0].topic_id


def alter(c: WireClient, group: str, topic: str, starts: dict[int, int]):
    """AlterShareGroupOffsets v0 of one topic's partitions."""
    return c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": p, "start_offset": o} for p, o in starts.items()]}]})


def summary(bootstrap: str, group: str, tid, partition: int):
    """ReadShareGroupStateSummary v1 at `bootstrap`: (error, start offset, delivery-complete count)."""
    with WireClient(bootstrap) as c:
        r = c.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {"group_id": group, "topics": [
            {"topic_id": tid, "partitions": [{"partition": partition, "leader_epoch": -1}]}]})
    [p] = r.results[0].partitions
    return p.error_code, p.start_offset, p.delivery_complete_count


def starts_at_leaders(leaders: dict[int, str], group: str, tid) -> dict[int, int]:
    out = {}
    for partition, bootstrap in leaders.items():
        error, start, _ = summary(bootstrap, group, tid, partition)
        assert error is ErrorCode.none, (partition, error)
        out[partition] = start
    return out


def administer_across_leaders(bootstrap: str, coordinator: str, topic: str, group: str,
                              leaders: dict[int, str], elsewhere: dict[int, str]) -> None:
    """`leaders`: each partition → its leader's bootstrap (at least two distinct); `elsewhere`: some
    partition → a worker/node that does not lead it. `coordinator`: the group's coordinator."""
    partitions = sorted(leaders)
    with WireClient(coordinator) as c:
        tid = topic_id(c, topic)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for partition in partitions:
        for i in range(10):
            p.produce(topic, value=b"%d" % i, partition=partition)
    assert p.flush(30) == 0

    # a member's first ShareFetch makes each share-partition's state at its leader (latest: offset 10)
    first = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    first.subscribe([topic])
    try:
        wait_until(lambda: first.poll(0.2) is not None and set(starts_at_leaders(leaders, group, tid).values())
                   == {10}, 90, "every share-partition's state at its leader")
    finally:
        first.close()
    for partition, other in elsewhere.items():  # a leader's state is served by the leader only
        assert summary(other, group, tid, partition)[0] is ErrorCode.not_leader_or_follower

    def altered(start: int):
        def alter_all() -> bool:
            with WireClient(coordinator) as c:
                r = alter(c, group, topic, dict.fromkeys(partitions, start))
            if r.error_code is ErrorCode.non_empty_group:  # the member is still leaving
                return False
            assert r.error_code is ErrorCode.none, r
            assert [(x.partition_index, x.error_code) for x in r.responses[0].partitions] == [
                (q, ErrorCode.none) for q in partitions]
            return True
        wait_until(alter_all, 60, "the empty group's offsets altered")

    altered(3)  # AlterShareGroupOffsets at the coordinator: set at every leader
    assert starts_at_leaders(leaders, group, tid) == dict.fromkeys(partitions, 3)
    assert share_tool(coordinator, "--describe", "--group", group) == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
        *([group, topic, str(q), "3", "7"] for q in partitions)]

    # a consumer resumes from the altered offsets on every partition, wherever it is led
    got: dict[tuple[int, int], int] = {}
    second = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "share.acknowledgement.mode": "explicit"})
    second.subscribe([topic])

    def drained() -> bool:
        for m in second.poll(0.2):
            assert m.error() is None, m.error()
            got[(m.partition(), m.offset())] = got.get((m.partition(), m.offset()), 0) + 1
            second.acknowledge(m, AcknowledgeType.ACCEPT)
        assert all(v is None for v in second.commit_sync(30).values())
        return len(got) >= 7 * len(partitions)

    try:
        wait_until(drained, 90, "offsets 3-9 of every partition")
    finally:
        second.close()
    assert got == {(q, o): 1 for q in partitions for o in range(3, 10)}
    wait_until(lambda: share_tool(coordinator, "--describe", "--group", group)[1:] == [
        [group, topic, str(q), "10", "0"] for q in partitions], 60, "every partition at 10 with no lag")

    # DeleteShareGroupOffsets at the coordinator: the state goes at every leader
    wait_until(lambda: subprocess.run(java_command(TOOL, "--bootstrap-server", coordinator, "--delete-offsets",
                                                   "--group", group, "--topic", topic),
                                      capture_output=True, text=True, timeout=180).stdout.split()
               == ["TOPIC", "STATUS", topic, "Successful"], 60, "the offsets deleted once the group is empty")
    assert starts_at_leaders(leaders, group, tid) == dict.fromkeys(partitions, -1)

    # DeleteGroups at the coordinator: the state set again, then gone at every leader with the group
    altered(5)
    assert starts_at_leaders(leaders, group, tid) == dict.fromkeys(partitions, 5)
    out = share_tool(coordinator, "--delete", "--group", group)
    assert "successful" in " ".join(sum(out, [])).lower(), out
    assert starts_at_leaders(leaders, group, tid) == dict.fromkeys(partitions, -1)
