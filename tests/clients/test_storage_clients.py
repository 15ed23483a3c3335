"""Real clients across a groupd restart: what one client library committed, another resumes from
after the server came back; static members survive a restart of the coordinator without a
rebalance, because their group (members, generation, assignments) is reloaded from the log.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from groupd.protocol.apis import ApiKey
from tests.support.harness import ClientProcess, wait_until
from tests.support.process import GroupdProcess, WireClient, groupd_fixture

pytestmark = pytest.mark.clients

TOPIC = "t6"
SIX = {f"{TOPIC}-{p}" for p in range(6)}
# the pure coordinator: committed offsets far beyond empty partitions stay the consumers' positions
# (with the memory plane, records are gone after a restart and such positions are out of range)
SETTINGS = (f"topics={TOPIC}:6", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
            "records.plane=none")


server = groupd_fixture(*SETTINGS, scope="function")


def restart(server: GroupdProcess, sig: int = signal.SIGTERM) -> str:
    """Stop the server and start it again on the same port and data dir; the log of the new run."""
    server.stop(sig)
    since = len(server.log())
    server.start()
    deadline = time.monotonic() + 30
    while "offsets log loaded" not in server.log()[since:]:
        assert time.monotonic() < deadline, server.log()[since:]
        time.sleep(0.05)
    return server.log()[since:]


def test_kafka_python_resumes_from_what_confluent_kafka_committed_before_a_restart(server, request):
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    group = "resume-" + request.node.name[-20:]
    committed = {p: 1000 * (p + 1) + p for p in range(6)}
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})
    try:
        assigned = []
        c.subscribe([TOPIC], on_assign=lambda consumer, tps: assigned.extend(tps))
        deadline = time.monotonic() + 60
        while len(assigned) < 6:
            assert time.monotonic() < deadline, "confluent-kafka got no assignment"
            c.poll(0.2)
        result = c.commit(offsets=[TopicPartition(TOPIC, p, o, metadata=f"cf-{p}") for p, o in committed.items()],
                          asynchronous=False)
        assert all(tp.error is None for tp in result), result
    finally:
        c.close()

    log = restart(server)
    assert re.search(r"offsets log loaded partitions=50 active=50 failed=0 groups=1\b", log), log

    k = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        k.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while len(k.assignment()) < 6:
            assert time.monotonic() < deadline, "kafka-python got no assignment"
            k.poll(timeout_ms=200)
        for p, offset in committed.items():
            tp = KTopicPartition(TOPIC, p)
            assert k.committed(tp) == offset
            assert k.position(tp) == offset  # it resumes where the other client left off
        metadata = k.committed(KTopicPartition(TOPIC, 3), metadata=True).metadata
        assert metadata.rstrip("\x00") == "cf-3"  # librdkafka sends the C string's NUL along
    finally:
        k.close(autocommit=False)


def describe(bootstrap: str, group: str):
    with WireClient(bootstrap) as c:
        return c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]


def test_static_members_keep_their_generation_and_partitions_across_a_coordinator_restart(server, clients):
    group = "static-restart"
    opts = {"topic": TOPIC, "group": group, "seconds": 0, "session.ms": 60000, "heartbeat.interval.ms": 500}
    a = clients("confluent", "subscribe", server.bootstrap, instance="a", **opts)
    b = clients("confluent", "subscribe", server.bootstrap, instance="b", **opts)

    def balanced() -> bool:
        sa, sb = a.assignment(), b.assignment()
        return sa is not None and sb is not None and set(sa) | set(sb) == SIX and not set(sa) & set(sb)

    wait_until(balanced, 90, "two static members assigned")
    time.sleep(1)  # let the group settle
    before = describe(server.bootstrap, group)
    assert before.group_state == "Stable"
    generation = re.findall(rf"join phase completed group={group} generation=(\d+)", server.log())[-1]
    members_before = sorted((m.group_instance_id, m.member_id, m.member_assignment) for m in before.members)
    a_parts, b_parts = a.assignment(), b.assignment()
    events_a, events_b = len(a.events), len(b.events)

    log = restart(server, signal.SIGKILL)  # the coordinator dies; the members do not
    assert re.search(r"offsets log loaded .*failed=0 groups=1\b", log), log
    reloaded = describe(server.bootstrap, group)
    assert reloaded.group_state == "Stable"  # from the log: members, generation, assignments
    assert sorted((m.group_instance_id, m.member_id, m.member_assignment) for m in reloaded.members) == members_before

    # the members reconnect and heartbeat on with the generation they had: nothing moves
    since = len(server.log()) - len(log)
    time.sleep(5)  # heartbeats every 500 ms: ten rounds against the restarted server
    after = server.log()[since:]
    assert f"rebalance started group={group}" not in after and f"join phase completed group={group}" not in after
    assert "member expired" not in after
    assert describe(server.bootstrap, group).group_state == "Stable"
    assert [e["event"] for e in a.events[events_a:] if e["event"] in ("assigned", "revoked", "lost")] == []
    assert [e["event"] for e in b.events[events_b:] if e["event"] in ("assigned", "revoked", "lost")] == []
    assert (a.assignment(), b.assignment()) == (a_parts, b_parts)

    # a member that now restarts re-joins under its instance id and gets its partitions back,
    # still without a new generation
    a.kill()
    a2 = clients("confluent", "subscribe", server.bootstrap, instance="a", **opts)
    wait_until(lambda: a2.assignment() is not None, 60, "the restarted member is assigned")
    assert a2.assignment() == a_parts
    assert b.assignment() == b_parts
    after = server.log()[since:]
    assert f"static member replaced group={group} instance=a" in after
    assert f"join phase completed group={group}" not in after, "no new generation"
    assert re.findall(rf"join phase completed group={group} generation=(\d+)", server.log())[-1] == generation
