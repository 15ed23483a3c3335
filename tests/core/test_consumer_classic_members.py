"""Classic-protocol members inside a consumer group (spec §7.3) through the runner with a fake clock:
JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit beside consumer-protocol members; after each
scenario the written records are replayed into a fresh partition and must rebuild the same groups."""

import pytest

from groupd.coordinator.core.consumer.reconciliation import MemberState
from groupd.coordinator.core.partition import GroupSettings
from groupd.protocol import ErrorCode
from groupd.protocol.consumer import assigned_partitions, encode_subscription

from .driver import Driver
from .test_consumer_heartbeat import FOO, TOPICS, assert_replay_matches, group, hb, join, owned

E = ErrorCode


@pytest.fixture
def d():
    """Policy `upgrade`: no downgrade when the last consumer-protocol member goes (test_consumer_migration)."""
    d = Driver(GroupSettings())
    d.settings.consumer.migration_policy = "upgrade"
    return d


def classic_join(d, member_id, ticket, owned_partitions=None, protocols=("range",), **kw):
    meta = encode_subscription(["foo"], owned={"foo": owned_partitions or []})
    return d.join("g", member_id, ticket=ticket, protocols=[(p, meta) for p in protocols], **kw)


def classic_member(d, name="b", **kw) -> tuple[str, dict]:
    """A classic member joins the live group the v4+ way: MEMBER_ID_REQUIRED, then the join."""
    first = classic_join(d, "", f"{name}-id", **kw)
    assert first["error_code"] == E.member_id_required
    return first["member_id"], classic_join(d, first["member_id"], f"{name}-join", **kw)


def synced(d, member_id, generation, ticket):
    r = d.sync("g", member_id, generation, ticket=ticket, protocol_type="consumer", protocol_name="range")
    return r["error_code"], assigned_partitions(r["assignment"])


def test_a_classic_member_shares_the_partitions_then_gets_them_all(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    b, r = classic_member(d)
    assert (r["error_code"], r["generation_id"], r["protocol_type"], r["protocol_name"], r["leader"], r["members"]) \
        == (E.none, 2, "consumer", "range", "", [])
    assert group(d).members[b].classic.session_timeout_ms == 10_000
    assert synced(d, b, 2, "b-sync-1") == (E.none, {})  # a still holds everything
    assert d.heartbeat("g", b, 2) == E.none  # nothing released yet
    d.consumer_heartbeat(hb("a", 1, owned(0, 1)), TOPICS)  # a revokes 2 and 3
    assert d.heartbeat("g", b, 2) == E.rebalance_in_progress  # they are free: re-join to take them
    r = classic_join(d, b, "b-join-2")
    assert r["generation_id"] == 2
    assert synced(d, b, 2, "b-sync-2") == (E.none, {"foo": [2, 3]})
    assert group(d).state_name == "Stable"
    assert d.commit("g", [("foo", 2, 7)], generation=2, member_id=b, version=7) == {("foo", 2): E.none}
    assert d.commit("g", [("foo", 2, 8)], generation=1, member_id=b) == {("foo", 2): E.illegal_generation}
    described = {m["member_id"]: m["member_type"] for m in d.shard.consumer_describe("g", TOPICS)["members"]}
    assert described == {"a": 1, b: 0}

    d.consumer_heartbeat(hb("a", -1), TOPICS)  # the consumer-protocol member leaves
    assert d.heartbeat("g", b, 2) == E.rebalance_in_progress
    r = classic_join(d, b, "b-join-3", owned_partitions=[2, 3])
    assert r["generation_id"] == 3
    assert synced(d, b, 3, "b-sync-3") == (E.none, {"foo": [0, 1, 2, 3]})
    assert d.heartbeat("g", b, 3) == E.none
    assert_replay_matches(d)
    assert d.replay().groups["g"].members[b].classic == group(d).members[b].classic


def test_sync_and_heartbeat_come_from_a_known_classic_member_of_the_generation(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    b, _ = classic_member(d)
    assert d.heartbeat("g", "nobody", 2) == E.unknown_member_id
    assert d.heartbeat("g", "a", 1) == E.unknown_member_id  # a consumer-protocol member
    assert classic_join(d, "a", "join-as-a")["error_code"] == E.unknown_member_id
    assert d.heartbeat("g", b, 1) == E.illegal_generation
    assert synced(d, b, 3, "sync-wrong-generation")[0] == E.illegal_generation
    r = d.sync("g", b, 2, ticket="sync-wrong-protocol", protocol_type="consumer", protocol_name="roundrobin")
    assert r["error_code"] == E.inconsistent_group_protocol


def test_a_join_needs_a_protocol_every_classic_member_supports(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    classic_member(d, protocols=("range", "roundrobin"))
    assert classic_join(d, "c", "c-join", protocols=("sticky",))["error_code"] == E.inconsistent_group_protocol
    r = d.join("g", "c", ticket="c-other", protocol_type="connect")
    assert r["error_code"] == E.inconsistent_group_protocol
    r = classic_join(d, "c", "c-join-2", protocols=("sticky", "roundrobin"))
    assert (r["error_code"], r["protocol_name"]) == (E.none, "roundrobin")


def test_a_full_group_refuses_a_classic_member(d):
    d.settings.consumer.max_size = 1
    d.consumer_heartbeat(join("a"), TOPICS)
    assert classic_join(d, "", "b", version=9)["error_code"] == E.group_max_size_reached


def test_a_classic_member_leaves_and_the_group_epoch_moves_once(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    b, _ = classic_member(d)
    c, _ = classic_member(d, "c")
    epoch = group(d).group_epoch
    r = d.leave("g", b, c, "nobody")
    assert r["members"] == [(b, None, E.none), (c, None, E.none), ("nobody", None, E.unknown_member_id)]
    assert set(group(d).members) == {"a"} and group(d).group_epoch == epoch + 1
    assert_replay_matches(d)


def test_the_classic_session_timeout_fences_a_silent_member(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    b, _ = classic_member(d, session_timeout_ms=6_000)
    d.advance(5_000)
    assert d.heartbeat("g", b, 2) == E.none  # moves the deadline
    d.advance(5_000)
    assert b in group(d).members
    d.advance(1_001)
    assert set(group(d).members) == {"a"}
    assert_replay_matches(d)


def test_a_failed_write_reverts_the_classic_join(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    before = (group(d).group_epoch, group(d).assignment_epoch, dict(group(d).target_assignment))
    d.fail_next_write(E.not_coordinator)
    r = classic_join(d, "b-id", "b-join")
    assert r["error_code"] == E.not_coordinator
    assert set(group(d).members) == {"a"}
    assert (group(d).group_epoch, group(d).assignment_epoch, group(d).target_assignment) == before
    assert group(d).members["a"].assignment.state is MemberState.STABLE
    assert group(d).partition_epoch(FOO, 3) == 1
    assert_replay_matches(d)


def test_a_classic_member_that_does_not_sync_or_rejoin_in_its_rebalance_timeout_is_fenced(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    b, _ = classic_member(d, rebalance_timeout_ms=4_000)  # never syncs
    d.advance(3_000)
    assert d.heartbeat("g", b, 2) == E.none
    d.advance(1_001)
    assert set(group(d).members) == {"a"}
    assert [e.reason for e in d.events if type(e).__name__ == "ConsumerMemberFenced"] == ["sync-timeout"]

    c, _ = classic_member(d, "c", rebalance_timeout_ms=4_000)
    epoch = group(d).group_epoch
    assert synced(d, c, epoch, "c-sync")[0] == E.none
    d.consumer_heartbeat(hb("a", -1), TOPICS)  # a new epoch: c is told to re-join, and does not
    for _ in range(2):
        assert d.heartbeat("g", c, epoch) == E.rebalance_in_progress
        d.advance(1_000)
    assert c in group(d).members
    d.advance_until(lambda: c not in group(d).members, limit_ms=10_000)  # before its session would end
    assert [e.reason for e in d.events if type(e).__name__ == "ConsumerMemberFenced"] == ["sync-timeout",
                                                                                           "join-timeout"]
    assert_replay_matches(d)
