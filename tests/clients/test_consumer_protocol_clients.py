"""Consumer groups on the KIP-848 protocol (group.protocol=consumer) with real clients against the
real server: confluent-kafka (librdkafka), the Java client and @platformatic/kafka (groupProtocol
'consumer'; no regex subscription). The server runs with short
consumer-group timeouts so that fencing by session expiry happens within seconds."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from groupd.coordinator.tools import groups as groupd_admin
from tests.support.harness import ClientProcess, wait_until
from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients

STACKS = ["confluent", "java", "platformatic"]
# what platformatic 1.35 lacks on this protocol: regex subscriptions (it sends no subscribedTopicRegex),
# the -2 static leave (it closes with epoch -1 even as a static member), and a safe partition-growth
# path (see test_added_partitions_are_assigned)
REGEX_STACKS = STATIC_LEAVE_STACKS = GROWTH_STACKS = ["confluent", "java"]
SIX = {f"t6-{p}" for p in range(6)}
SETTINGS = ("topics=t6:6", "group.consumer.session.timeout.ms=3000", "group.consumer.min.session.timeout.ms=1000",
            "group.consumer.heartbeat.interval.ms=300", "group.consumer.min.heartbeat.interval.ms=100")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp("kip848")), *SETTINGS)
    s.start()
    yield s
    _admins.pop(s.bootstrap, None)
    s.stop()


def group_name(request) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", request.node.name)


def opts(group: str, topic: str = "t6", **extra) -> dict:
    return {"topic": topic, "group": group, "seconds": 0, "group.protocol": "consumer", **extra}


def owns_exactly(members: list[ClientProcess], partitions: set[str]) -> bool:
    """Every member holds something, and together they hold `partitions`, each once."""
    assignments = [m.assignment() for m in members]
    if any(not a for a in assignments):
        return False
    flat = [p for a in assignments for p in a]
    return len(flat) == len(set(flat)) and set(flat) == partitions


_admins: dict[str, AdminClient] = {}


def admin(server) -> AdminClient:
    """One admin client per server address (each new one costs threads and connections)."""
    if server.bootstrap not in _admins:
        _admins[server.bootstrap] = AdminClient({"bootstrap.servers": server.bootstrap})
    return _admins[server.bootstrap]


def describe(server, group: str):
    return admin(server).describe_consumer_groups([group])[group].result(10)


@pytest.mark.parametrize("stack", STACKS)
def test_three_consumers_share_the_partitions_and_the_others_take_over_when_one_closes(server, clients, stack,
                                                                                     request):
    group = group_name(request)
    members = [clients(stack, "subscribe", server.bootstrap, **opts(group)) for _ in range(3)]
    wait_until(lambda: owns_exactly(members, SIX), 90, "each partition owned once, all assigned")
    assert members[2].close() == 0
    wait_until(lambda: owns_exactly(members[:2], SIX), 60, "the two others own every partition")
    assert all(not m.errors() for m in members[:2]), [m.errors() for m in members[:2]]
    assert f"member left group={group} type=consumer" in server.log()


@pytest.mark.parametrize("stack", STACKS)
def test_a_killed_consumer_is_fenced_when_its_session_expires(server, clients, stack, request):
    group = group_name(request)
    members = [clients(stack, "subscribe", server.bootstrap, **opts(group)) for _ in range(2)]
    wait_until(lambda: owns_exactly(members, SIX), 90, "both members assigned")
    members[1].kill()
    wait_until(lambda: f"member fenced group={group} type=consumer" in server.log(), 30, "session expiry")
    assert "reason=session-expired" in server.log()
    wait_until(lambda: owns_exactly(members[:1], SIX), 60, "the survivor owns every partition")


@pytest.fixture(scope="module")
def long_sessions(tmp_path_factory):
    """Kafka's consumer session timeout (45 s), short heartbeats: a restarted static member (a JVM
    start under load takes more than 3 s) is back long before its session runs out."""
    s = GroupdProcess(str(tmp_path_factory.mktemp("long-sessions")), "topics=t6:6",
                      "group.consumer.heartbeat.interval.ms=300", "group.consumer.min.heartbeat.interval.ms=100")
    s.start()
    yield s
    _admins.pop(s.bootstrap, None)
    s.stop()


@pytest.mark.parametrize("stack", STATIC_LEAVE_STACKS)
def test_a_restarted_static_member_gets_its_partitions_back_without_a_new_epoch(long_sessions, clients, stack,
                                                                               request):
    server, group = long_sessions, group_name(request)
    a = clients(stack, "subscribe", server.bootstrap, **opts(group, **{"group.instance.id": "a"}))
    b = clients(stack, "subscribe", server.bootstrap, **opts(group, **{"group.instance.id": "b"}))
    wait_until(lambda: owns_exactly([a, b], SIX), 90, "both static members assigned")
    wait_until(lambda: describe(server, group).state == ConsumerGroupState.STABLE, 30, "Stable")
    before, epoch = set(b.assignment()), groupd_admin.describe_group(server.bootstrap, group)["group_epoch"]
    assert b.close() == 0  # a static member leaves with epoch -2: it keeps its partitions
    b2 = clients(stack, "subscribe", server.bootstrap, **opts(group, **{"group.instance.id": "b"}))
    wait_until(lambda: set(b2.assignment() or ()) == before, 60, "the same partitions back")
    assert f"static member replaced group={group} type=consumer instance=b" in server.log()
    assert set(a.assignment()) == SIX - before
    wait_until(lambda: describe(server, group).state == ConsumerGroupState.STABLE, 30, "Stable")
    assert groupd_admin.describe_group(server.bootstrap, group)["group_epoch"] == epoch


def test_a_static_member_that_leaves_with_epoch_minus_one_leaves_for_good(server, clients, request):
    """platformatic closes with memberEpoch -1 even as a static member: as in Kafka that is a full leave
    (a new group epoch, its partitions move at once) and its instance id is free for the next member."""
    group = group_name(request)
    a = clients("platformatic", "subscribe", server.bootstrap, **opts(group, **{"group.instance.id": "a"}))
    b = clients("platformatic", "subscribe", server.bootstrap, **opts(group, **{"group.instance.id": "b"}))
    wait_until(lambda: owns_exactly([a, b], SIX), 90, "both static members assigned")
    wait_until(lambda: describe(server, group).state == ConsumerGroupState.STABLE, 30, "Stable")
    epoch = groupd_admin.describe_group(server.bootstrap, group)["group_epoch"]
    assert b.close() == 0
    wait_until(lambda: set(a.assignment()) == SIX, 60, "the other member owns every partition")
    assert re.search(rf"member left group={group} type=consumer member=\S+ instance=b temporary=False", server.log())
    b2 = clients("platformatic", "subscribe", server.bootstrap, **opts(group, **{"group.instance.id": "b"}))
    wait_until(lambda: owns_exactly([a, b2], SIX), 60, "the instance id is taken again at once")
    assert not a.errors() and not b2.errors(), (a.errors(), b2.errors())
    assert f"static member replaced group={group} type=consumer instance=b" not in server.log()
    assert groupd_admin.describe_group(server.bootstrap, group)["group_epoch"] > epoch


@pytest.mark.parametrize("stack", REGEX_STACKS)
def test_a_regex_subscription_picks_up_a_created_topic(server, clients, stack, request):
    group, prefix = group_name(request), f"rx-{stack}"
    a = admin(server)
    a.create_topics([NewTopic(f"{prefix}.one", 2)])[f"{prefix}.one"].result(10)
    # librdkafka takes a topic starting with ^ as a regex; the Java tool subscribes a SubscriptionPattern
    regex = {"topic": f"^{prefix}[.].*"} if stack == "confluent" else {"pattern": f"{prefix}[.].*"}
    member = clients(stack, "subscribe", server.bootstrap, **{**opts(group), **regex})
    one = {f"{prefix}.one-0", f"{prefix}.one-1"}
    wait_until(lambda: set(member.assignment() or ()) == one, 60, "the matching topic")
    a.create_topics([NewTopic(f"{prefix}.two", 1)])[f"{prefix}.two"].result(10)
    wait_until(lambda: set(member.assignment() or ()) == one | {f"{prefix}.two-0"}, 60, "the new topic too")
    assert not member.errors(), member.errors()


# Not platformatic 1.35: it looks the leader of a newly assigned partition up in its cached metadata and
# crashes (TypeError in messages-stream.js) when the assignment arrives before its next metadata refresh,
# a race no cache age closes (a heartbeat may land just after CreatePartitions).
@pytest.mark.parametrize("stack", GROWTH_STACKS)
def test_added_partitions_are_assigned(server, clients, stack, request):
    group, topic = group_name(request), f"grows-{stack}"
    a = admin(server)
    a.create_topics([NewTopic(topic, 2)])[topic].result(10)
    members = [clients(stack, "subscribe", server.bootstrap, **opts(group, topic=topic)) for _ in range(2)]
    wait_until(lambda: owns_exactly(members, {f"{topic}-0", f"{topic}-1"}), 60, "two partitions, one each")
    a.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
    wait_until(lambda: owns_exactly(members, {f"{topic}-{p}" for p in range(4)}), 60, "four partitions")


def test_describe_and_list_by_type_through_the_admin_client(server, clients, request):
    group = group_name(request)
    members = [clients("confluent", "subscribe", server.bootstrap, **opts(group)) for _ in range(2)]
    wait_until(lambda: owns_exactly(members, SIX), 60, "both assigned")
    wait_until(lambda: describe(server, group).state == ConsumerGroupState.STABLE, 30, "Stable")
    d = describe(server, group)
    assert d.type == ConsumerGroupType.CONSUMER and len(d.members) == 2
    owned = {f"{tp.topic}-{tp.partition}" for m in d.members for tp in m.assignment.topic_partitions}
    assert owned == SIX
    listed = admin(server).list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(10).valid
    assert group in {g.group_id for g in listed}
    classic = admin(server).list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(10).valid
    assert group not in {g.group_id for g in classic}
    # `groupd groups describe`: the type, the epochs, each member's current and target assignment
    described = groupd_admin.describe_group(server.bootstrap, group)
    assert (described["type"], described["state"]) == ("consumer", "Stable")
    assert described["group_epoch"] == described["assignment_epoch"] >= 2
    assert all(m["assignment"] == m["target_assignment"] and m["member_epoch"] == described["assignment_epoch"]
               for m in described["members"])
    assert {"group": group, "state": "Stable", "protocol_type": "consumer", "type": "consumer"} in \
        groupd_admin.list_groups(server.bootstrap)


@pytest.mark.parametrize("stack", ["confluent", "platformatic"])  # the tools with commit_offset=N
def test_commits_and_epochs_survive_a_server_restart(tmp_path, clients, stack):
    # the pure coordinator: offset 7 on empty partitions stays the members' position (with the memory
    # plane it is out of range, and a member that resets may rejoin and bump the epoch meanwhile)
    s = GroupdProcess(str(tmp_path / "data"), *SETTINGS, "records.plane=none")
    s.start()
    try:
        members = [clients(stack, "subscribe", s.bootstrap, **opts("resume", commit_offset=7))
                   for _ in range(2)]
        wait_until(lambda: owns_exactly(members, SIX), 60, "both assigned")
        wait_until(lambda: {tp for m in members for e in m.events if e["event"] == "committed"
                            for tp in e["offsets"]} == SIX, 30, "every partition committed")
        wait_until(lambda: describe(s, "resume").state == ConsumerGroupState.STABLE, 30, "Stable")
        before, epochs = describe(s, "resume"), groupd_admin.describe_group(s.bootstrap, "resume")
        assignment = {m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
                      for m in before.members}
        s.stop()
        # a fresh admin client: librdkafka's, once its broker went away, can stay stuck reconnecting
        _admins.pop(s.bootstrap, None)
        s.start()
        after = describe(s, "resume")
        reloaded = groupd_admin.describe_group(s.bootstrap, "resume")
        assert (reloaded["group_epoch"], reloaded["assignment_epoch"]) == (epochs["group_epoch"],
                                                                          epochs["assignment_epoch"])
        assert {m["member_id"]: m["member_epoch"] for m in reloaded["members"]} == \
            {m["member_id"]: m["member_epoch"] for m in epochs["members"]}
        assert {m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
                for m in after.members} == assignment
        assert "groups=1" in s.log().split("offsets log loaded")[-1]
        fetched = clients(stack, "fetch", s.bootstrap, group="resume", topic="t6")
        offsets = fetched.wait_for(lambda e: e["event"] == "offsets", 30)["offsets"]
        assert {tp: o["offset"] for tp, o in offsets.items()} == {tp: 7 for tp in SIX}
        wait_until(lambda: all(m.assignment() for m in members), 30, "the members carry on")
        assert "member joined group=resume" not in s.log().split("offsets log loaded")[-1], \
            "no member had to rejoin: the epochs came back from the log"
    finally:
        _admins.pop(s.bootstrap, None)  # its server goes: no admin client left retrying it
        s.stop()


@pytest.fixture(scope="module")
def no_migration(tmp_path_factory):
    """A server with online migration off: Kafka's answers when a group of the other type is live."""
    s = GroupdProcess(str(tmp_path_factory.mktemp("no-migration")), *SETTINGS,
                      "group.consumer.migration.policy=disabled")
    s.start()
    yield s
    _admins.pop(s.bootstrap, None)
    s.stop()


def test_with_migration_disabled_a_consumer_protocol_member_cannot_join_a_live_classic_group(no_migration, clients,
                                                                                          request):
    group = group_name(request)
    classic = clients("confluent", "subscribe", no_migration.bootstrap, topic="t6", group=group, seconds=0,
                      **{"session.ms": 6000})
    wait_until(lambda: set(classic.assignment() or ()) == SIX, 60, "the classic member owns everything")
    newcomer = clients("confluent", "subscribe", no_migration.bootstrap, **opts(group))
    error = newcomer.wait_for(lambda e: e["event"] == "error", 30)
    assert "The group id does not exist" in error["message"], error  # GROUP_ID_NOT_FOUND: fatal, as with Kafka
    assert set(classic.assignment()) == SIX and not classic.errors()
    assert describe(no_migration, group).type == ConsumerGroupType.CLASSIC



@pytest.fixture(scope="module")
def upgrade_only(tmp_path_factory):
    """Policy `upgrade`: a consumer group whose last consumer-protocol member goes stays one."""
    s = GroupdProcess(str(tmp_path_factory.mktemp("upgrade-only")), *SETTINGS, "group.consumer.migration.policy=upgrade")
    s.start()
    yield s
    _admins.pop(s.bootstrap, None)
    s.stop()


def test_a_classic_member_joins_a_live_consumer_group_and_takes_over_when_the_other_leaves(upgrade_only, clients,
                                                                                          request):
    """Spec §7.3: a classic member (JoinGroup/SyncGroup) beside a consumer-protocol one."""
    server = upgrade_only
    group = group_name(request)
    modern = clients("java", "subscribe", server.bootstrap, **opts(group))
    wait_until(lambda: set(modern.assignment() or ()) == SIX, 60, "the consumer-protocol member owns everything")
    classic = clients("confluent", "subscribe", server.bootstrap, topic="t6", group=group, seconds=0,
                      commit_offset=7, **{"session.ms": 6000})
    wait_until(lambda: owns_exactly([modern, classic], SIX), 60, "each partition owned once, both assigned")
    committed = classic.wait_for(lambda e: e["event"] == "committed", 30)
    assert set(committed["offsets"]) <= SIX and committed["offsets"]
    described = describe(server, group)
    assert described.type == ConsumerGroupType.CONSUMER and len(described.members) == 2
    assert modern.close() == 0
    wait_until(lambda: set(classic.assignment() or ()) == SIX, 60, "the classic member owns everything")
    assert not classic.errors(), classic.errors()
    assert describe(server, group).type == ConsumerGroupType.CONSUMER
    assert "Traceback" not in server.log()


def test_a_classic_group_is_upgraded_online_and_downgraded_again(server, clients, request):
    """Spec §7.4: two classic members, then a Java group.protocol=consumer member joins → a consumer
    group with all three, each partition owned once; it leaves → a classic group again, whose
    members share everything; the offsets are kept throughout."""
    group = group_name(request)
    classic = [clients("confluent", "subscribe", server.bootstrap, topic="t6", group=group, seconds=0,
                       commit_offset=5, **{"session.ms": 6000}) for _ in range(2)]
    wait_until(lambda: owns_exactly(classic, SIX), 60, "the classic members share everything")
    for c in classic:
        c.wait_for(lambda e: e["event"] == "committed", 30)
    assert describe(server, group).type == ConsumerGroupType.CLASSIC
    modern = clients("java", "subscribe", server.bootstrap, **opts(group))
    wait_until(lambda: owns_exactly(classic + [modern], SIX), 60, "each partition owned once by the three")
    assert describe(server, group).type == ConsumerGroupType.CONSUMER
    assert "group converted group=%s direction=upgrade" % group in server.log()
    offsets = admin(server).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert {f"{tp.topic}-{tp.partition}": tp.offset for tp in offsets.topic_partitions} == {tp: 5 for tp in SIX}
    assert all(not c.errors() for c in classic + [modern])
    assert modern.close() == 0
    wait_until(lambda: describe(server, group).type == ConsumerGroupType.CLASSIC, 30, "downgraded")
    wait_until(lambda: owns_exactly(classic, SIX), 60, "the classic members share everything again")
    assert "group converted group=%s direction=downgrade" % group in server.log()
    offsets = admin(server).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert {f"{tp.topic}-{tp.partition}": tp.offset for tp in offsets.topic_partitions} == {tp: 5 for tp in SIX}
    assert all(not c.errors() for c in classic)
    assert "Traceback" not in server.log()


def test_a_static_member_restarted_on_the_other_protocol_keeps_its_partitions(long_sessions, clients, request):
    """Spec §7.4 with static members: a consumer-protocol static member is restarted as a classic one
    with the same group.instance.id (it replaces the old one and, being the last consumer-protocol
    member, downgrades the group), then as a consumer-protocol one again (it replaces the classic one,
    which sends no leave, and upgrades the group); each time it gets its partitions back."""
    server, group = long_sessions, group_name(request)
    static = {"group.instance.id": "s"}
    member = clients("confluent", "subscribe", server.bootstrap, **opts(group, **static))
    wait_until(lambda: set(member.assignment() or ()) == SIX, 60, "the static member owns everything")
    other = clients("confluent", "subscribe", server.bootstrap, topic="t6", group=group, seconds=0,
                    **{"session.ms": 6000})
    wait_until(lambda: owns_exactly([member, other], SIX), 60, "each partition owned once, both assigned")
    held = set(member.assignment())
    member.kill()
    member = clients("confluent", "subscribe", server.bootstrap, topic="t6", group=group, seconds=0,
                     instance="s", **{"session.ms": 6000})
    wait_until(lambda: set(member.assignment() or ()) == held, 60, "the classic restart gets them back")
    assert describe(server, group).type == ConsumerGroupType.CLASSIC
    assert f"static member replaced group={group} type=consumer instance=s" in server.log()
    assert f"group converted group={group} direction=downgrade" in server.log()
    member.kill()
    member = clients("confluent", "subscribe", server.bootstrap, **opts(group, **static))
    wait_until(lambda: set(member.assignment() or ()) == held, 60, "the consumer-protocol restart too")
    wait_until(lambda: owns_exactly([member, other], SIX), 60, "each partition owned once")
    assert describe(server, group).type == ConsumerGroupType.CONSUMER
    assert f"group converted group={group} direction=upgrade" in server.log()
    assert not member.errors() and not other.errors(), (member.errors(), other.errors())
    assert "Traceback" not in server.log()
