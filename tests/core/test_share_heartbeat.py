"""ShareGroupHeartbeat (share-groups spec §2) through the runner with a fake clock: joins with
client-generated ids, epochs, leaving, session expiry, the target assignment, the errors; after each
scenario the written records are replayed into a fresh partition and must rebuild the same groups."""

import uuid

import pytest

from groupd.coordinator.core import events as ev
from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, TopicsImage
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.core.share.group import ShareGroup
from groupd.coordinator.core.share.machine import ShareHeartbeatRequest, ShareSettings
from groupd.protocol import ErrorCode
from groupd.storage.catalog import Topic
from groupd.storage.consumer_records import decode, encode_key, encode_value
from groupd.storage.share_records import ShareGroupMetadataKey, ShareGroupStatePartitionMetadataKey

from .driver import Driver

E = ErrorCode
FOO = uuid.UUID(int=1)
BAR = uuid.UUID(int=2)
TOPICS = TopicsImage.of(1, [Topic("foo", 2, FOO), Topic("bar", 3, BAR)])
SESSION_MS = 45_000


def join(member_id, topics=("foo",), group_id="g"):
    return ShareHeartbeatRequest(group_id, member_id, 0, None, tuple(topics) if topics is not None else None,
                                 "client", "/127.0.0.1")


def hb(member_id, epoch, topics=None, group_id="g"):
    return ShareHeartbeatRequest(group_id, member_id, epoch, None, topics, "client", "/127.0.0.1")


def assigned(reply):
    a = reply["assignment"]
    return None if a is None else {tp["topic_id"]: set(tp["partitions"]) for tp in a["topic_partitions"]}


@pytest.fixture
def d():
    return Driver(GroupSettings(share=ShareSettings(max_size=3)))


def group(d) -> ShareGroup:
    return d.shard.groups["g"]


def durable(g: ShareGroup) -> dict:
    return {"epoch": g.group_epoch, "hash": g.metadata_hash, "assignment_epoch": g.assignment_epoch,
            "targets": g.targets, "initialized": g.initialized(),
            "members": {m.member_id: (m.metadata, m.current) for m in g.members.values()}}


def assert_replay_matches(d):
    fresh = d.replay()
    live = {gid: durable(g) for gid, g in d.shard.groups.items() if isinstance(g, ShareGroup)}
    assert {gid: durable(g) for gid, g in fresh.groups.items() if isinstance(g, ShareGroup)} == live


def test_first_member_joins_with_its_own_id_and_gets_its_partitions_once_initialized(d):
    reply = d.share_heartbeat(join("m-1"), TOPICS)
    assert reply["error_code"] == E.none
    assert reply["member_id"] == "m-1"  # the client's id, kept
    assert reply["member_epoch"] == 1 == group(d).group_epoch == group(d).assignment_epoch
    assert reply["heartbeat_interval_ms"] == 5000
    assert assigned(reply) == {}  # nothing is initialized yet
    assert d.run_effects() == 1
    assert group(d).initialized() == {FOO: frozenset({0, 1})}
    reply = d.share_heartbeat(hb("m-1", 1), TOPICS)
    assert reply["member_epoch"] == 2 and assigned(reply) == {FOO: {0, 1}}
    assert group(d).state_name == "Stable"
    assert_replay_matches(d)


def test_more_members_than_partitions_share_them(d):
    replies = [d.share_heartbeat(join(m), TOPICS) for m in ("a", "b", "c")]
    assert [r["member_epoch"] for r in replies] == [1, 2, 3]
    d.run_effects()
    # every member picks up the target of the epoch the initialization bumped on its next heartbeat
    latest = {m: d.share_heartbeat(hb(m, r["member_epoch"]), TOPICS) for m, r in zip("abc", replies)}
    assert all(r["member_epoch"] == 4 for r in latest.values())
    held = {m: group(d).members[m].assigned.get(FOO, frozenset()) for m in "abc"}
    assert all(held.values())  # everyone gets work
    counts = [sum(p in ps for ps in held.values()) for p in (0, 1)]
    assert counts == [2, 2]  # S = ceil(3/2) = 2 members per partition
    assert_replay_matches(d)


def test_steady_heartbeat_writes_nothing_and_sends_no_assignment(d):
    d.share_heartbeat(join("a"), TOPICS)
    written = len(d.written)
    reply = d.share_heartbeat(hb("a", 1), TOPICS)
    assert reply["error_code"] == E.none and reply["member_epoch"] == 1 and reply["assignment"] is None
    assert len(d.written) == written


def test_previous_epoch_is_accepted_other_epochs_are_fenced(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.share_heartbeat(join("b"), TOPICS)
    assert d.share_heartbeat(hb("a", 1), TOPICS)["member_epoch"] == 2  # a moves 1 → 2
    assert d.share_heartbeat(hb("a", 1), TOPICS)["error_code"] == E.none  # its previous epoch: a lost answer
    assert d.share_heartbeat(hb("a", 3), TOPICS)["error_code"] == E.fenced_member_epoch
    d.share_heartbeat(join("c"), TOPICS)
    d.share_heartbeat(hb("a", 2), TOPICS)  # a moves 2 → 3
    assert d.share_heartbeat(hb("a", 1), TOPICS)["error_code"] == E.fenced_member_epoch


def test_unknown_member_and_unknown_group(d):
    assert d.share_heartbeat(hb("a", 1), TOPICS)["error_code"] == E.group_id_not_found
    d.share_heartbeat(join("a"), TOPICS)
    assert d.share_heartbeat(hb("x", 1), TOPICS)["error_code"] == E.unknown_member_id
    assert d.share_heartbeat(hb("x", -1), TOPICS)["error_code"] == E.unknown_member_id
    assert d.share_heartbeat(hb("x", -1, group_id="nope"), TOPICS)["error_code"] == E.group_id_not_found


@pytest.mark.parametrize("req, message", [
    (join("a", topics=None), "SubscribedTopicNames must be set in first request."),
    (join("a", topics=()), "SubscribedTopicNames must be set in first request."),
    (join(""), "MemberId can't be empty."),
    (join("a", group_id=""), "GroupId can't be empty."),
    (hb("a", -2), "MemberEpoch is invalid."),
    (join("x" * 37), None),
])
def test_invalid_requests(d, req, message):
    reply = d.share_heartbeat(req, TOPICS)
    assert (reply["error_code"], reply["error_message"]) == (E.invalid_request, message)
    assert "g" not in d.shard.groups


def test_member_ids_are_any_client_string_up_to_36_chars(d):
    member_id = "a/b+c" + "z" * 31
    assert d.share_heartbeat(join(member_id), TOPICS)["member_id"] == member_id


def test_group_max_size(d):
    for m in "abc":
        d.share_heartbeat(join(m), TOPICS)
    reply = d.share_heartbeat(join("d"), TOPICS)
    assert reply["error_code"] == E.group_max_size_reached
    assert d.share_heartbeat(join("a"), TOPICS)["error_code"] == E.none  # a known member may rejoin


def test_leave_echoes_minus_one_and_bumps_the_group_epoch(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.share_heartbeat(join("b"), TOPICS)
    d.run_effects()
    assert len(assigned(d.share_heartbeat(hb("a", 1), TOPICS))[FOO]) == 1  # a shares with b: one partition each
    reply = d.share_heartbeat(hb("b", -1), TOPICS)
    assert (reply["error_code"], reply["member_id"], reply["member_epoch"]) == (E.none, "b", -1)
    assert list(group(d).members) == ["a"] and group(d).group_epoch == 4
    again = d.share_heartbeat(hb("a", 3), TOPICS)  # a gets the new target: everything
    assert again["member_epoch"] == 4 and assigned(again) == {FOO: {0, 1}}
    assert_replay_matches(d)


def test_last_member_leaving_leaves_an_empty_group(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.share_heartbeat(hb("a", -1), TOPICS)
    assert group(d).state_name == "Empty" and group(d).group_epoch == 2
    assert_replay_matches(d)


def test_session_expiry_fences_the_member(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.share_heartbeat(join("b"), TOPICS)
    for _ in range(4):  # a keeps heartbeating, b goes quiet
        d.advance(SESSION_MS // 3)
        d.share_heartbeat(hb("a", 1), TOPICS)
    assert list(group(d).members) == ["a"]
    assert group(d).group_epoch == 3
    assert ev.ShareMemberFenced("g", "b", "session-expired") in d.events
    assert ev.ShareGroupEpochBumped("g", 3, "session-expired") in d.events
    assert d.share_heartbeat(hb("b", 2), TOPICS)["error_code"] == E.unknown_member_id
    assert d.share_heartbeat(join("b"), TOPICS)["error_code"] == E.none  # it rejoins with the same id
    assert_replay_matches(d)


def test_subscription_change_bumps_the_epoch_and_reassigns(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.run_effects()
    reply = d.share_heartbeat(hb("a", 1, topics=("foo", "bar")), TOPICS)
    assert reply["member_epoch"] == 2 and assigned(reply) == {FOO: {0, 1}}  # bar is initializing
    d.run_effects()
    reply = d.share_heartbeat(hb("a", 2), TOPICS)
    assert reply["member_epoch"] == 3 and assigned(reply) == {FOO: {0, 1}, BAR: {0, 1, 2}}
    reply = d.share_heartbeat(hb("a", 3, topics=("bar",)), TOPICS)
    assert reply["member_epoch"] == 4 and assigned(reply) == {BAR: {0, 1, 2}}
    assert_replay_matches(d)


def test_a_topic_created_later_is_assigned_after_a_new_epoch(d):
    reply = d.share_heartbeat(join("a", topics=("later",)), TOPICS)
    assert reply["member_epoch"] == 1 and assigned(reply) == {}
    later = uuid.UUID(int=9)
    grown = TopicsImage.of(2, [Topic("foo", 2, FOO), Topic("later", 1, later)])
    reply = d.share_heartbeat(hb("a", 1), grown)
    assert reply["member_epoch"] == 2 and reply["assignment"] is None  # `later` is initializing
    d.run_effects()
    reply = d.share_heartbeat(hb("a", 2), grown)
    assert reply["member_epoch"] == 3 and assigned(reply) == {later: {0}}


def test_restart_keeps_the_group_and_restarts_the_sessions(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.share_heartbeat(join("b"), TOPICS)
    d.share_heartbeat(hb("a", 1), TOPICS)
    d.advance(SESSION_MS - 1)
    fresh = d.replay()  # the log replayed at load: members, epochs, targets, current assignments
    g = fresh.groups["g"]
    assert isinstance(g, ShareGroup) and set(g.members) == {"a", "b"} and g.group_epoch == 2
    assert {m: g.members[m].member_epoch for m in "ab"} == {"a": 2, "b": 2}
    load = fresh.on_loaded(d.clock.read())
    assert sorted(t for t, _ in load.timers) == [("share-session", "g", "a"), ("share-session", "g", "b")]
    assert {deadline for _, deadline in load.timers} == {d.now + SESSION_MS}


def test_share_records_are_kafkas_types_10_to_15_and_round_trip(d):
    d.share_heartbeat(join("a"), TOPICS)
    types = {int.from_bytes(encode_key(r.key)[:2], "big") for r in d.written}
    assert types == {10, 11, 12, 13, 14, 15}
    for r in d.written:
        assert decode(encode_key(r.key), encode_value(r.value)) == r
    assert any(isinstance(r.key, ShareGroupStatePartitionMetadataKey) for r in d.written)


def test_a_failed_write_changes_nothing(d):
    d.fail_next_write(E.not_coordinator)
    reply = d.share_heartbeat(join("a"), TOPICS)
    assert reply["error_code"] == E.not_coordinator
    assert "g" not in d.shard.groups


def test_delete_an_empty_share_group_and_refuse_a_live_one(d):
    d.share_heartbeat(join("a"), TOPICS)
    assert d.delete_group("g") == E.non_empty_group
    d.share_heartbeat(hb("a", -1), TOPICS)
    assert d.delete_group("g") == E.none
    assert "g" not in d.shard.groups
    assert "g" not in d.replay().groups


def test_other_group_types_and_share_ids_stay_apart(d):
    d.share_heartbeat(join("a"), TOPICS)
    consumer = ConsumerHeartbeatRequest("g", "c", 0, None, None, 300_000, ("foo",), None, None, [])
    assert d.consumer_heartbeat(consumer, TOPICS)["error_code"] == E.group_id_not_found
    assert d.join("g", ticket="j")["error_code"] == E.inconsistent_group_protocol
    assert d.heartbeat("g", "a", 1) == E.unknown_member_id
    assert d.describe("g") == {"group_id": "g", "type": "share"}  # DescribeGroups: not a classic group
    d.commit("c", [("foo", 0, 5)])  # a classic (simple) group
    reply = d.share_heartbeat(join("a", group_id="c"), TOPICS)
    assert (reply["error_code"], reply["error_message"]) == (E.group_id_not_found, "Group c is not a share group.")
    assert isinstance(d.shard.groups["g"], ShareGroup)
    assert any(isinstance(r.key, ShareGroupMetadataKey) for r in d.written)


def test_a_subscribed_topic_growing_bumps_the_epoch_and_assigns_the_new_partitions(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.run_effects()
    assert assigned(d.share_heartbeat(hb("a", 1), TOPICS)) == {FOO: {0, 1}}
    assert d.share_heartbeat(hb("a", 2), TopicsImage.of(2, [Topic("foo", 2, FOO)]))["assignment"] is None
    grown = TopicsImage.of(3, [Topic("foo", 4, FOO), Topic("bar", 3, BAR)])
    reply = d.share_heartbeat(hb("a", 2), grown)
    assert reply["member_epoch"] == 3 and reply["assignment"] is None  # 2 and 3 are initializing
    d.run_effects()
    reply = d.share_heartbeat(hb("a", 3), grown)
    assert reply["member_epoch"] == 4 and assigned(reply) == {FOO: {0, 1, 2, 3}}
    assert group(d).initialized()[FOO] == frozenset(range(4))
    assert_replay_matches(d)


def test_a_deleted_topic_leaves_the_assignment_at_the_next_epoch(d):
    d.share_heartbeat(join("a", topics=("foo", "bar")), TOPICS)
    d.run_effects()
    assert assigned(d.share_heartbeat(hb("a", 1), TOPICS)) == {FOO: {0, 1}, BAR: {0, 1, 2}}
    reply = d.share_heartbeat(hb("a", 2), TopicsImage.of(2, [Topic("bar", 3, BAR)]))
    assert reply["member_epoch"] == 3 and assigned(reply) == {BAR: {0, 1, 2}}
    assert_replay_matches(d)
