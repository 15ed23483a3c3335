"""Spec §12.6 and style §2: `apply(record)` is the one path by which durable state changes, for
log loading and live writes alike."""

from groupd.coordinator.core.classic.group import EMPTY, PREPARING_REBALANCE, STABLE
from groupd.coordinator.core.clock import Now
from groupd.protocol.consumer import encode_subscription
from groupd.storage.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

from .driver import Driver, stable_group


def loading(d: Driver):
    shard = d.new_shard()

    return shard


def offset(group="g", topic="t", partition=0, value=OffsetCommitValue(5, 2, "m", 100, -1)):
    return Record(OffsetCommitKey(group, topic, partition), value)


def member(member_id, instance_id=None, rebalance_timeout=20_000, subscription=b"sub", assignment=b"asg"):
    return MemberMetadata(member_id, instance_id, "client", "/10.0.0.1", rebalance_timeout, 10_000,
                          subscription, assignment)


def group_record(members=(), generation=3, protocol_type="consumer", protocol="range", leader=None,
                 timestamp=500):
    leader = leader if leader is not None else (members[0].member_id if members else None)
    return Record(GroupMetadataKey("g"), GroupMetadataValue(protocol_type, generation, protocol if members else None,
                                                            leader, timestamp, tuple(members)))


def test_offset_commit_record_stores_the_offset(d):
    shard = loading(d)
    shard.apply(offset())
    assert shard.offsets == {"g": {("t", 0): OffsetCommitValue(5, 2, "m", 100, -1)}}


def test_offset_commit_record_for_group_without_metadata_creates_a_simple_empty_group(d):
    shard = loading(d)
    shard.apply(offset())
    g = shard.groups["g"]
    assert (g.state, g.protocol_type, g.generation, g.members) == (EMPTY, None, 0, {})


def test_later_offset_commit_record_overwrites_the_earlier(d):
    shard = loading(d)
    shard.apply(offset())
    shard.apply(offset(value=OffsetCommitValue(9, -1, "", 200, -1)))
    assert shard.offsets["g"][("t", 0)].offset == 9


def test_offset_commit_tombstone_removes_the_offset_but_not_the_group(d):
    shard = loading(d)
    shard.apply(offset(partition=0))
    shard.apply(offset(partition=1))
    shard.apply(offset(partition=0, value=None))
    assert list(shard.offsets["g"]) == [("t", 1)]
    shard.apply(offset(partition=1, value=None))
    assert "g" not in shard.offsets
    assert "g" in shard.groups


def test_offset_commit_tombstone_for_unknown_offset_is_ignored(d):
    shard = loading(d)
    shard.apply(offset(value=None))
    assert shard.offsets == {} and shard.groups == {}


def test_group_metadata_record_with_members_loads_a_stable_group(d):
    shard = loading(d)
    shard.apply(group_record([member("a-1", "a-instance"), member("b-2")], leader="b-2"))
    g = shard.groups["g"]
    assert (g.state, g.generation, g.protocol_type, g.protocol_name, g.leader_id, g.state_timestamp) == (
        STABLE, 3, "consumer", "range", "b-2", 500)
    assert g.static_members == {"a-instance": "a-1"}
    a = g.members["a-1"]
    assert (a.protocols, a.assignment, a.client_id, a.client_host, a.rebalance_timeout_ms, a.session_timeout_ms) == (
        (("range", b"sub"),), b"asg", "client", "/10.0.0.1", 20_000, 10_000)


def test_group_metadata_record_without_members_loads_an_empty_group(d):
    shard = loading(d)
    shard.apply(group_record(protocol_type="", timestamp=-1))
    g = shard.groups["g"]
    assert (g.state, g.protocol_type, g.protocol_name, g.leader_id, g.state_timestamp) == (
        EMPTY, None, None, None, None)


def test_missing_rebalance_timeout_is_taken_to_be_the_session_timeout(d):
    shard = loading(d)
    shard.apply(group_record([member("a-1", rebalance_timeout=-1)]))
    assert shard.groups["g"].members["a-1"].rebalance_timeout_ms == 10_000


def test_group_metadata_record_computes_the_subscribed_topics(d):
    shard = loading(d)
    shard.apply(group_record([member("a-1", subscription=encode_subscription(["t", "u"])),
                              member("b-2", subscription=encode_subscription(["v"]))]))
    assert shard.groups["g"].subscribed_topics == {"t", "u", "v"}


def test_later_group_metadata_record_replaces_the_group(d):
    shard = loading(d)
    shard.apply(group_record([member("a-1"), member("b-2")]))
    shard.apply(group_record([member("c-3")], generation=4))
    g = shard.groups["g"]
    assert (g.generation, list(g.members), g.leader_id) == (4, ["c-3"], "c-3")


def test_group_metadata_tombstone_removes_the_group(d):
    shard = loading(d)
    shard.apply(group_record([member("a-1")]))
    shard.apply(Record(GroupMetadataKey("g"), None))
    assert "g" not in shard.groups


def test_offsets_survive_a_group_tombstone_written_before_them(d):
    shard = loading(d)
    shard.apply(Record(GroupMetadataKey("g"), None))
    shard.apply(offset())
    assert shard.groups["g"].state is EMPTY and "g" in shard.offsets


def test_loaded_members_get_a_session_timer_of_their_session_timeout(d):
    shard = loading(d)
    shard.apply(group_record([member("a-1"), member("b-2")]))
    out = shard.on_loaded(Now(7000, 7000))
    assert sorted(out.timers) == [(("session", "g", "a-1"), 17_000), (("session", "g", "b-2"), 17_000)]


def test_live_record_of_a_group_does_not_rebuild_it(d):
    ids = stable_group(d)
    g = d.group()
    d.shard.apply(group_record([member("x-9")], generation=1))
    assert d.group() is g and list(g.members) == list(ids.values())


def test_loaded_member_rejoining_with_its_full_protocol_list_rebalances(d):
    stable_group(d, protocols=(("range", b"r"), ("roundrobin", b"rr")))
    d.shard = d.replay()
    ids = list(d.group().members)
    d.join("g", ids[1], ticket="rejoin", client_id="b", protocols=(("range", b"r"), ("roundrobin", b"rr")))
    assert d.group().state is PREPARING_REBALANCE
