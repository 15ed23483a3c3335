"""Online migration (spec §7.4) through the runner with a fake clock: a live classic group becomes a
consumer group when a consumer-protocol member joins; replayed records rebuild the same groups."""

import pytest

from groupd.coordinator.core.classic.group import ClassicGroup
from groupd.coordinator.core.consumer.group import ConsumerGroup
from groupd.coordinator.core.consumer.reconciliation import MemberState
from groupd.coordinator.core.partition import GroupSettings
from groupd.protocol import ErrorCode
from groupd.protocol.consumer import assigned_partitions, encode_assignment, encode_subscription
from groupd.storage.records import GroupMetadataKey

from .driver import Driver, completing_group
from .test_consumer_classic_members import classic_join
from .test_consumer_heartbeat import FOO, TOPICS, assert_replay_matches, hb, join, owned

E = ErrorCode
SUBSCRIBED = (("range", encode_subscription(["foo"])),)


def driver(policy="bidirectional") -> Driver:
    d = Driver(GroupSettings())
    d.settings.consumer.migration_policy = policy
    return d


def classic_group(d, split=((0, 1), (2, 3)), user_data=b"", protocols=SUBSCRIBED, **join) -> dict[str, str]:
    """Two classic members a and b, Stable at generation 1, a owning foo-0/1 and b foo-2/3."""
    ids = completing_group(d, "g", ("a", "b"), protocols=protocols, **join)
    g = d.shard.groups["g"]
    leader = next(n for n, i in ids.items() if i == g.leader_id)
    assignments = {ids[n]: encode_assignment({"foo": list(ps)}, user_data) for n, ps in zip("ab", split)}
    d.sync("g", ids[leader], 1, ticket="sync-leader", assignments=assignments)
    d.sync("g", ids["b" if leader == "a" else "a"], 1, ticket="sync-follower")
    assert g.state_name == "Stable"
    return ids


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade"])
def test_a_consumer_protocol_member_upgrades_a_live_classic_group(policy):
    d = driver(policy)
    ids = classic_group(d)
    r = d.consumer_heartbeat(join("c"), TOPICS)
    assert r["error_code"] == E.none and r["member_epoch"] == 2
    group = d.shard.groups["g"]
    assert isinstance(group, ConsumerGroup) and group.group_epoch == 2
    a, b = group.members[ids["a"]], group.members[ids["b"]]
    assert (a.member_epoch, a.classic.session_timeout_ms, a.subscribed_topic_names) == (1, 10_000, ("foo",))
    assert a.assignment.assigned_partitions == {FOO: frozenset({0, 1})}
    first = max(i for i, r in enumerate(d.written) if r.key == GroupMetadataKey("g"))
    assert d.written[first].value is None  # the classic tombstone opens the conversion
    assert type(d.written[first + 1].key).__name__ == "ConsumerGroupMemberMetadataKey"
    assert [e.direction for e in d.events if type(e).__name__ == "GroupConverted"] == ["upgrade"]
    # the classic members re-join as told and give up what c is to get: each partition owned once
    mine = {name: list(ps) for name, ps in zip("ab", ((0, 1), (2, 3)))}
    generation = {"a": 1, "b": 1}
    c = []
    for step in range(6):
        for name in ("a", "b"):
            if d.heartbeat("g", ids[name], generation[name]) == E.none:
                continue
            r = classic_join(d, ids[name], f"rejoin-{name}-{step}", owned_partitions=mine[name])
            generation[name] = r["generation_id"]
            r = d.sync("g", ids[name], generation[name], ticket=f"sync-{name}-{step}", protocol_type="consumer",
                       protocol_name="range")
            assert r["error_code"] == E.none
            mine[name] = assigned_partitions(r["assignment"]).get("foo", [])
            assert not set(mine[name]) & set(c)
        r = d.consumer_heartbeat(hb("c", 2, owned(*c)), TOPICS)
        if r["assignment"] is not None:
            c = sorted(p for tp in r["assignment"]["topic_partitions"] for p in tp["partitions"])
        assert not set(c) & (set(mine["a"]) | set(mine["b"])), (c, mine)
    assert sorted(mine["a"] + mine["b"] + c) == [0, 1, 2, 3] and all(mine.values()) and c
    assert generation == {"a": 2, "b": 2}
    assert group.state_name == "Stable"
    assert_replay_matches(d)


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_without_upgrade_in_the_policy_the_classic_group_stays(policy):
    d = driver(policy)
    classic_group(d)
    r = d.consumer_heartbeat(join("c"), TOPICS)
    message = "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, message)
    assert isinstance(d.shard.groups["g"], ClassicGroup)
    assert [(e.reason, e.message) for e in d.events if type(e).__name__ == "UpgradeRefused"] == [("disabled", message)]


def test_a_custom_assignors_user_data_blocks_the_upgrade():
    d = driver()
    classic_group(d, user_data=b"custom")
    r = d.consumer_heartbeat(join("c"), TOPICS)
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, (
        "Cannot upgrade classic group g to consumer group because an unsupported custom assignor is in use. Please "
        "refer to the documentation or switch to a default assignor before re-attempting the upgrade."))
    assert isinstance(d.shard.groups["g"], ClassicGroup)
    assert [e.reason for e in d.events if type(e).__name__ == "UpgradeRefused"] == ["custom-assignor"]


def test_a_group_over_the_consumer_max_size_is_not_upgraded():
    d = driver()
    d.settings.consumer.max_size = 1
    classic_group(d)
    r = d.consumer_heartbeat(join("c"), TOPICS)
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, "Cannot upgrade classic group g to "
                                                     "consumer group because the group size exceeds the consumer "
                                                     "group maximum size.")


@pytest.mark.parametrize("with_offsets", [False, True])
def test_a_failed_upgrade_write_leaves_the_classic_group_intact(with_offsets):
    d = driver()
    ids = classic_group(d)
    if with_offsets:  # then the classic tombstone keeps the group object, and the consumer records replace it
        assert d.commit("g", [("foo", 0, 5)], generation=1, member_id=ids["a"]) == {("foo", 0): E.none}
    original = d.shard.groups["g"]
    before = {m: (v.assignment, v.deadline) for m, v in original.members.items()}
    d.fail_next_write(E.not_coordinator)
    assert d.consumer_heartbeat(join("c"), TOPICS)["error_code"] == E.not_coordinator
    assert d.shard.groups["g"] is original
    assert {m: (v.assignment, v.deadline) for m, v in original.members.items()} == before
    assert (original.state_name, original.generation) == ("Stable", 1)
    assert d.heartbeat("g", ids["a"], 1) == E.none  # still a classic member of generation 1
    assert d.replay().groups["g"].generation == 1
    assert_replay_matches(d)


def test_parked_joins_are_answered_rebalance_in_progress():
    d = driver()
    ids = classic_group(d)
    d.join("g", ids["a"], ticket="rejoin-a", protocols=SUBSCRIBED)  # parked: PreparingRebalance
    assert "rejoin-a" not in d.replies
    d.consumer_heartbeat(join("c"), TOPICS)
    assert d.replies["rejoin-a"]["error_code"] == E.rebalance_in_progress
    assert isinstance(d.shard.groups["g"], ConsumerGroup)


def upgraded(d, **classic_join_options) -> dict[str, str]:
    """classic_group, an offset committed, then c upgrades it (group epoch 2, a and b at epoch 1)."""
    ids = classic_group(d, **classic_join_options)
    assert d.commit("g", [("foo", 0, 5)], generation=1, member_id=ids["a"]) == {("foo", 0): E.none}
    assert d.consumer_heartbeat(join("c"), TOPICS)["error_code"] == E.none
    return ids


@pytest.mark.parametrize("policy", ["bidirectional", "downgrade"])
def test_the_last_consumer_protocol_member_leaving_downgrades_the_group(policy):
    d = driver("bidirectional")
    ids = upgraded(d)
    d.settings.consumer.migration_policy = policy
    d.consumer_heartbeat(hb("c", -1), TOPICS)
    group = d.shard.groups["g"]
    assert isinstance(group, ClassicGroup)
    assert (group.state_name, group.generation, group.protocol_type, group.protocol_name) == \
        ("PreparingRebalance", 2, "consumer", "range")
    assert assigned_partitions(group.members[ids["a"]].assignment) == {"foo": [0, 1]}
    assert [e.direction for e in d.events if type(e).__name__ == "GroupConverted"] == ["upgrade", "downgrade"]
    assert {k[0] for k in d.timers if k[1:2] == ("g",)} >= {"session", "join"}
    # a classic rebalance: both re-join, the leader assigns, everyone syncs
    assert d.heartbeat("g", ids["a"], 2) == E.rebalance_in_progress
    for name in ("a", "b"):
        d.join("g", ids[name], ticket=f"down-join-{name}", protocols=SUBSCRIBED)
    assert d.replies["down-join-a"]["generation_id"] == 3
    leader = group.leader_id
    d.sync("g", leader, 3, ticket="down-sync-leader",
           assignments={ids["a"]: encode_assignment({"foo": [0, 1]}), ids["b"]: encode_assignment({"foo": [2, 3]})})
    other = ids["b"] if leader == ids["a"] else ids["a"]
    d.sync("g", other, 3, ticket="down-sync-other")
    assert group.state_name == "Stable"
    assert [(t, p, v.offset) for t, p, v in d.fetch("g")] == [("foo", 0, 5)]  # kept across both conversions
    d.assert_replay_matches()


def test_with_policy_upgrade_the_group_stays_a_consumer_group():
    d = driver("upgrade")
    upgraded(d)
    d.consumer_heartbeat(hb("c", -1), TOPICS)
    assert isinstance(d.shard.groups["g"], ConsumerGroup) and len(d.shard.groups["g"].members) == 2


def test_a_fenced_last_consumer_protocol_member_downgrades_the_group():
    d = driver()
    ids = upgraded(d, rebalance_timeout_ms=300_000)
    for _ in range(12):  # c stays silent; a and b heartbeat (told to re-join, within their rebalance timeout)
        if isinstance(d.shard.groups["g"], ClassicGroup):
            break
        assert {d.heartbeat("g", i, 1) for i in ids.values()} == {E.rebalance_in_progress}
        d.advance(5_000)
    group = d.shard.groups["g"]
    assert isinstance(group, ClassicGroup) and set(group.members) == set(ids.values())
    assert any(type(e).__name__ == "ConsumerMemberFenced" and e.member_id == "c" for e in d.events)


def test_a_failed_downgrade_write_leaves_the_consumer_group():
    d = driver()
    ids = upgraded(d)
    before = {m: (v.metadata, v.assignment) for m, v in d.shard.groups["g"].members.items()}
    d.fail_next_write(E.not_coordinator)
    assert d.consumer_heartbeat(hb("c", -1), TOPICS)["error_code"] == E.not_coordinator
    group = d.shard.groups["g"]
    assert isinstance(group, ConsumerGroup) and group.group_epoch == 2
    assert {m: (v.metadata, v.assignment) for m, v in group.members.items()} == before
    assert d.heartbeat("g", ids["a"], 1) == E.rebalance_in_progress  # still a classic member of the consumer group
    assert_replay_matches(d)


def test_each_conversion_is_one_log_line_and_counted_by_direction(caplog):
    from prometheus_client import REGISTRY

    from groupd.coordinator.observability import observe

    def count(direction):
        return REGISTRY.get_sample_value("groupd_group_conversions_total", {"direction": direction}) or 0

    d = driver()
    upgraded(d)
    d.consumer_heartbeat(hb("c", -1), TOPICS)
    converted = [e for e in d.events if type(e).__name__ == "GroupConverted"]
    assert [(e.direction, e.members) for e in converted] == [("upgrade", 2), ("downgrade", 2)]
    before = {k: count(k) for k in ("upgrade", "downgrade")}
    with caplog.at_level("INFO", logger="groupd.group"):
        observe.emit(converted)
    assert [r.getMessage() for r in caplog.records] == [
        "group converted group=g direction=upgrade to=consumer members=2",
        "group converted group=g direction=downgrade to=classic members=2"]
    assert {k: count(k) - v for k, v in before.items()} == {"upgrade": 1, "downgrade": 1}
