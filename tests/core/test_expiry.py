"""Spec §11: offset retention and group expiry, `GroupShard.expire(now, retention_ms)` driven by a
fake clock. Every row of §11.2's table, explicit expire timestamps (OffsetCommit v2–v4), group
deletion (§11.4), and replaying the written tombstones into a fresh shard.
"""

import pytest

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from groupd.coordinator.core.partition import GroupShard
from groupd.protocol.consumer import encode_subscription
from groupd.storage.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

from .driver import E, stable_group

RETENTION = 7 * 24 * 3600 * 1000  # offsets.retention.minutes default, in ms
SUBSCRIBED_TO_T = (("range", encode_subscription(["t"])),)


def expire(d, retention_ms: int = RETENTION) -> list[Record]:
    """Run the expiry pass at the fake clock's now; the records it wrote."""
    before = len(d.written)
    d._op(None, lambda ticket: d.shard.expire(d.clock.read(), retention_ms))
    return d.written[before:]


def offset_tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group, topic, partition), None)


def group_tombstone(group: str) -> Record:
    return Record(GroupMetadataKey(group), None)


def committed(d, group: str = "g") -> set[tuple[str, int]]:
    return {(t, p) for t, p, v in d.fetch(group) if v is not None}


def later(d, ms: int) -> None:
    """Time passes while every member keeps heartbeating: the clock moves, no timer fires."""
    d.clock.now += ms


def at(d, when: int) -> None:
    """Move the fake clock to absolute time `when` (firing any timer due meanwhile)."""
    assert when >= d.now
    d.advance(when - d.now)


# -- §11.2 row 1: protocol type present, group Empty → ages from when the group became Empty ---------

def test_empty_consumer_group_offsets_age_from_when_the_group_became_empty(d):
    ids = stable_group(d, names=("a",))
    committed_at = d.now
    assert d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["a"]) == {("t", 0): E.none}
    later(d, 60_000)
    d.leave("g", ids["a"])
    emptied_at = d.now
    assert d.group("g").state is EMPTY and d.group("g").state_timestamp == emptied_at

    at(d, committed_at + RETENTION)  # the commit is old enough, the Empty state is not
    assert expire(d) == []
    assert committed(d) == {("t", 0)}

    at(d, emptied_at + RETENTION - 1)
    assert expire(d) == []

    at(d, emptied_at + RETENTION)
    assert expire(d) == [offset_tombstone("g", "t", 0), group_tombstone("g")]
    assert "g" not in d.shard.groups and d.fetch("g", [("t", [0])]) == [("t", 0, None)]
    d.assert_replay_matches()


def test_empty_group_loaded_without_a_state_timestamp_ages_offsets_from_their_commit(d):
    """An old GroupMetadataValue (v0/v1) carries no currentStateTimestamp: the commit timestamp is the base."""
    shard = d.shard = GroupShard(0, d.settings, lambda prefix: prefix)

    shard.apply(Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 4, None, None, -1, ())))
    shard.apply(Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", d.now - 1000)))
    shard.apply(Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(2, -1, "", d.now)))
    d.runner.run(shard.on_loaded(d.clock.read()))
    assert d.group("g").state is EMPTY and d.group("g").state_timestamp is None

    d.advance(RETENTION - 1000)
    assert expire(d) == [offset_tombstone("g", "t", 0)]
    assert d.group("g").state is EMPTY  # an offset is left: the group stays
    d.advance(1000)
    assert expire(d) == [offset_tombstone("g", "t", 1), group_tombstone("g")]


# -- row 2: "consumer", subscriptions known, Stable → only unsubscribed topics, from the commit ------

def test_stable_consumer_group_expires_only_offsets_of_topics_it_does_not_subscribe_to(d):
    ids = stable_group(d, names=("a", "b"), protocols=SUBSCRIBED_TO_T)
    assert d.group("g").subscribed_topics == {"t"}
    d.commit("g", [("t", 0, 1), ("t", 1, 1), ("gone", 0, 7)], generation=1, member_id=ids["a"])
    later(d, RETENTION - 1)
    assert expire(d) == []
    later(d, 1)
    assert expire(d) == [offset_tombstone("g", "gone", 0)]
    later(d, 10 * RETENTION)
    assert expire(d) == []  # subscribed topics never expire while the group is Stable
    assert committed(d) == {("t", 0), ("t", 1)}
    assert d.group("g").state is STABLE
    d.assert_replay_matches()


def test_subscribed_topic_is_protected_even_with_an_explicit_expire_timestamp(d):
    ids = stable_group(d, names=("a",), protocols=SUBSCRIBED_TO_T)
    d.commit("g", [("t", 0, 1), ("other", 0, 1)], generation=1, member_id=ids["a"], retention_ms=1000, version=2)
    later(d, 1000)
    assert expire(d) == [offset_tombstone("g", "other", 0)]
    later(d, RETENTION)
    assert expire(d) == []
    assert committed(d) == {("t", 0)}


# -- row 3: no protocol type (simple group) → each offset ages from its own commit ------------------

def test_simple_group_offsets_each_age_from_their_commit_and_the_group_goes_with_the_last(d):
    first = d.now
    d.commit("simple", [("t", 0, 10)])
    d.advance(5000)
    d.commit("simple", [("t", 1, 20)])
    g = d.group("simple")
    assert (g.state, g.protocol_type) == (EMPTY, None)

    at(d, first + RETENTION - 1)
    assert expire(d) == []
    at(d, first + RETENTION)
    assert expire(d) == [offset_tombstone("simple", "t", 0)]
    assert "simple" in d.shard.groups
    at(d, first + 5000 + RETENTION)
    assert expire(d) == [offset_tombstone("simple", "t", 1), group_tombstone("simple")]
    assert "simple" not in d.shard.groups
    d.assert_replay_matches()


def test_recommitting_restarts_a_simple_group_offsets_clock(d):
    d.commit("simple", [("t", 0, 1)])
    d.advance(RETENTION - 1)
    d.commit("simple", [("t", 0, 2)])
    d.advance(1)
    assert expire(d) == []
    d.advance(RETENTION - 1)
    assert expire(d) == [offset_tombstone("simple", "t", 0), group_tombstone("simple")]


# -- row 4: anything else → nothing expires ------------------------------------------------------------

def test_preparing_rebalance_group_keeps_every_offset(d):
    ids = stable_group(d, names=("a", "b"), protocols=SUBSCRIBED_TO_T)
    d.commit("g", [("other", 0, 1)], generation=1, member_id=ids["a"], retention_ms=1000, version=2)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", protocols=SUBSCRIBED_TO_T)
    assert d.group("g").state is PREPARING_REBALANCE
    later(d, 2 * RETENTION)  # the join timer does not fire: still PreparingRebalance
    assert expire(d) == []
    assert committed(d) == {("other", 0)}


def test_completing_rebalance_group_keeps_every_offset(d):
    ids = stable_group(d, names=("a", "b"), protocols=SUBSCRIBED_TO_T)
    d.commit("g", [("other", 0, 1)], generation=1, member_id=ids["a"], retention_ms=1000, version=2)
    for name in ("a", "b"):  # both re-join: the join phase completes, the syncs have not come yet
        d.join("g", ids[name], ticket=f"rejoin-{name}", client_id=name, protocols=SUBSCRIBED_TO_T)
    assert d.group("g").state is COMPLETING_REBALANCE
    later(d, 2 * RETENTION)  # the sync timer does not fire
    assert expire(d) == []
    assert committed(d) == {("other", 0)}


def test_stable_group_of_another_protocol_type_keeps_every_offset(d):
    ids = stable_group(d, names=("a",), protocol_type="connect", protocols=SUBSCRIBED_TO_T)
    assert d.group("g").subscribed_topics is None
    d.commit("g", [("t", 0, 1), ("other", 0, 1)], generation=1, member_id=ids["a"])
    later(d, 2 * RETENTION)
    assert expire(d) == []
    assert committed(d) == {("t", 0), ("other", 0)}


def test_stable_consumer_group_with_unparsable_subscriptions_keeps_every_offset(d):
    ids = stable_group(d, names=("a",), protocols=(("range", b"\xff"),))
    assert d.group("g").subscribed_topics is None
    d.commit("g", [("other", 0, 1)], generation=1, member_id=ids["a"], retention_ms=1, version=2)
    later(d, 2 * RETENTION)
    assert expire(d) == []
    assert committed(d) == {("other", 0)}


# -- explicit expire timestamps (OffsetCommit v2–v4 retention_time) -----------------------------------

def test_explicit_expire_timestamp_replaces_the_retention(d):
    d.commit("s", [("t", 0, 1)], retention_ms=1000, version=2)
    assert d.written[-1].value.expire_timestamp == d.now + 1000
    d.advance(999)
    assert expire(d) == []
    d.advance(1)
    assert expire(d) == [offset_tombstone("s", "t", 0), group_tombstone("s")]


def test_explicit_expire_timestamp_longer_than_the_retention_is_honoured(d):
    d.commit("s", [("t", 0, 1)], retention_ms=2 * RETENTION, version=2)
    d.advance(RETENTION)
    assert expire(d) == []
    d.advance(RETENTION)
    assert expire(d) == [offset_tombstone("s", "t", 0), group_tombstone("s")]


def test_explicit_expire_timestamp_in_an_empty_consumer_group_ignores_the_state_timestamp(d):
    ids = stable_group(d, names=("a",))
    d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["a"], retention_ms=10 * RETENTION, version=2)
    d.commit("g", [("t", 1, 5)], generation=1, member_id=ids["a"])
    later(d, 1000)
    d.leave("g", ids["a"])
    d.advance(RETENTION)
    assert expire(d) == [offset_tombstone("g", "t", 1)]
    assert d.group("g").state is EMPTY
    d.advance(9 * RETENTION)
    assert expire(d) == [offset_tombstone("g", "t", 0), group_tombstone("g")]


def test_mixed_retention_in_one_pass(d):
    d.commit("s", [("t", 0, 1)], retention_ms=500, version=2)
    d.commit("s", [("t", 1, 1)])
    d.commit("other", [("t", 0, 1)], retention_ms=500, version=4)
    d.advance(500)
    records = expire(d)
    assert set(records) == {offset_tombstone("s", "t", 0), offset_tombstone("other", "t", 0),
                            group_tombstone("other")}
    assert set(d.shard.groups) == {"s"}


# -- §11.4 group deletion --------------------------------------------------------------------------------

def test_empty_group_that_never_had_offsets_is_deleted_at_the_next_pass(d):
    ids = stable_group(d, names=("a",))
    d.leave("g", ids["a"])
    assert expire(d) == [group_tombstone("g")]
    assert "g" not in d.shard.groups
    d.assert_replay_matches()


def test_empty_group_keeps_living_while_any_offset_is_left(d):
    d.commit("s", [("t", 0, 1)], retention_ms=100, version=2)
    d.commit("s", [("t", 1, 1)])
    d.advance(100)
    assert expire(d) == [offset_tombstone("s", "t", 0)]
    assert d.group("s").state is EMPTY
    assert committed(d, "s") == {("t", 1)}


def test_stable_group_without_offsets_is_never_deleted(d):
    stable_group(d, names=("a",), protocols=SUBSCRIBED_TO_T)
    later(d, 2 * RETENTION)
    assert expire(d) == []
    assert d.group("g").state is STABLE


def test_group_with_a_member_between_member_id_required_and_its_rejoin_is_kept(d):
    first = d.join("g", ticket="first")  # v9: MEMBER_ID_REQUIRED, the group is created Empty
    assert first["error_code"] == E.member_id_required
    assert d.group("g").state is EMPTY and d.group("g").pending_join
    assert expire(d) == []
    assert "g" in d.shard.groups
    # the member comes back within its session timeout and the group goes on as usual
    d.join("g", first["member_id"], ticket="second")
    assert d.group("g").state is PREPARING_REBALANCE


def test_group_whose_pending_member_never_came_back_is_deleted(d):
    d.join("g", ticket="first", session_timeout_ms=10_000)
    d.advance(10_000)  # the pending member id expires
    assert not d.group("g").pending_join
    assert expire(d) == [group_tombstone("g")]


def test_nothing_to_expire_writes_nothing(d):
    d.commit("s", [("t", 0, 1)])
    stable_group(d, names=("a",), protocols=SUBSCRIBED_TO_T)
    later(d, 1000)
    assert expire(d) == []
    assert set(d.shard.groups) == {"s", "g"}


def test_expiry_tombstones_replay_into_a_fresh_shard(d):
    ids = stable_group(d, names=("a",), protocols=SUBSCRIBED_TO_T)
    d.commit("g", [("t", 0, 1), ("x", 0, 1)], generation=1, member_id=ids["a"])
    d.commit("s1", [("t", 0, 1)])
    d.commit("s2", [("t", 0, 1)], retention_ms=10 * RETENTION, version=3)
    later(d, RETENTION)
    expire(d)
    assert set(d.shard.groups) == {"g", "s2"}
    assert committed(d, "g") == {("t", 0)}
    d.assert_replay_matches()
    fresh = d.replay()
    assert set(fresh.groups) == {"g", "s2"}


def test_failed_expiry_write_changes_nothing(d):
    d.commit("s", [("t", 0, 1)])
    d.advance(RETENTION)
    d.fail_next_write(E.not_coordinator)
    assert expire(d) == []  # nothing became durable
    assert committed(d, "s") == {("t", 0)} and "s" in d.shard.groups
    assert expire(d) == [offset_tombstone("s", "t", 0), group_tombstone("s")]  # the next pass does it


def test_member_joining_while_the_group_tombstone_is_being_written_is_not_lost(d):
    """The tombstone is applied when appended: the join that follows creates the group anew."""
    ids = stable_group(d, names=("a",))
    d.leave("g", ids["a"])
    d.hold_writes()
    d._op("expiry", lambda ticket: d.shard.expire(d.clock.read(), RETENTION))  # the group tombstone is in flight
    assert "g" not in d.shard.groups
    first = d.join("g", ticket="first")  # answered at once; the new group's record queues behind the tombstone
    assert first["error_code"] == E.member_id_required
    d.finish_writes()
    d.join("g", first["member_id"], ticket="second")
    d.advance(d.settings.initial_rebalance_delay_ms)
    assert d.replies.get("second") is not None, "the parked JoinGroup is answered"
    assert d.replies["second"]["error_code"] == E.none
    assert "g" in d.shard.groups and first["member_id"] in d.group("g").members
