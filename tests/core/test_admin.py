"""Spec §9: DescribeGroups per state, ListGroups, DeleteGroups and OffsetDelete."""

import pytest

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY
from groupd.protocol.consumer import encode_subscription
from groupd.storage.records import GroupMetadataKey, OffsetCommitKey, Record

from .driver import E, assignment_of, completing_group, empty_group, preparing_group, stable_group

# -- §9.1 DescribeGroups ---------------------------------------------------------------------------


def test_describe_stable_group_gives_protocol_metadata_and_assignments(d):
    ids = stable_group(d, client_host="/10.0.0.7")
    assert d.describe("g") == {
        "group_id": "g", "group_state": "Stable", "protocol_type": "consumer", "protocol_data": "range",
        "members": [
            {"member_id": ids[n], "group_instance_id": None, "client_id": n, "client_host": "/10.0.0.7",
             "member_metadata": b"range-meta", "member_assignment": assignment_of(n)} for n in ("a", "b")]}


def test_describe_static_members_gives_their_instance_ids(d):
    stable_group(d, static=True)
    assert [m["group_instance_id"] for m in d.describe("g")["members"]] == ["a-instance", "b-instance"]


@pytest.mark.parametrize("build, state", [(preparing_group, "PreparingRebalance"),
                                          (completing_group, "CompletingRebalance")])
def test_describe_rebalancing_group_gives_no_protocol_and_no_metadata(d, build, state):
    build(d)
    described = d.describe("g")
    assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == (
        state, "consumer", "")
    assert [m["member_metadata"] for m in described["members"]] == [b"", b""]


def test_describe_outside_stable_gives_the_stored_assignment(d):
    preparing_group(d)
    assert [m["member_assignment"] for m in d.describe("g")["members"]] == [assignment_of("a"), assignment_of("b")]


def test_describe_empty_group(d):
    empty_group(d)
    assert d.describe("g") == {"group_id": "g", "group_state": "Empty", "protocol_type": "consumer",
                               "protocol_data": "", "members": []}


def test_describe_simple_group_has_no_protocol_type(d):
    d.commit("g", [("t", 0, 1)])
    assert (d.describe("g")["group_state"], d.describe("g")["protocol_type"]) == ("Empty", "")


def test_describe_unknown_group_is_not_found(d):
    assert d.describe("g") is None


# -- §9.2 ListGroups -------------------------------------------------------------------------------

def test_list_groups_gives_every_live_group(d):
    stable_group(d, "consumers")
    d.commit("standalone", [("t", 0, 1)])
    assert sorted((g.group_id, g.state.value, g.protocol_type or "") for g in d.shard.list_groups()) == [
        ("consumers", "Stable", "consumer"), ("standalone", "Empty", "")]


# -- §9.3 DeleteGroups -----------------------------------------------------------------------------

def test_delete_unknown_group_is_group_id_not_found(d):
    assert d.delete_group("nope") == E.group_id_not_found


@pytest.mark.parametrize("build", [preparing_group, completing_group, stable_group])
def test_delete_non_empty_group_is_non_empty_group(d, build):
    build(d)
    written = len(d.written)
    assert d.delete_group("g") == E.non_empty_group
    assert len(d.written) == written


def test_delete_empty_group_tombstones_every_offset_then_the_group(d):
    empty_group(d)
    d.commit("g", [("t", 0, 1), ("t", 1, 2)])
    d.commit("other", [("t", 0, 3)])
    d.hold_writes()
    assert d.delete_group("g") is None
    d.finish_writes()
    assert d.answers[-1][1] == E.none
    assert d.written[-3:] == [Record(OffsetCommitKey("g", "t", 0), None), Record(OffsetCommitKey("g", "t", 1), None),
                              Record(GroupMetadataKey("g"), None)]
    assert "g" not in d.shard.groups and "g" not in d.shard.offsets
    assert "other" in d.shard.offsets
    d.assert_replay_matches()
    assert "g" not in d.replay().groups


def test_failed_delete_keeps_the_group(d):
    d.commit("g", [("t", 0, 1)])
    d.fail_next_write(E.not_coordinator)
    assert d.delete_group("g") == E.not_coordinator
    assert d.fetch("g")[0][2].offset == 1


# -- §9.4 OffsetDelete -----------------------------------------------------------------------------

def subscribed_to(*topics):
    return (("range", encode_subscription(list(topics))),)


def test_offset_delete_of_unknown_group_is_group_id_not_found(d):
    assert d.delete_offsets("nope", [("t", [0])])["error_code"] == E.group_id_not_found


def test_offset_delete_of_non_empty_non_consumer_group_is_non_empty_group(d):
    stable_group(d, protocol_type="connect")
    assert d.delete_offsets("g", [("t", [0])]) == {"error_code": E.non_empty_group, "partitions": {}}


def test_offset_delete_of_topic_a_consumer_group_subscribes_to_is_group_subscribed_to_topic(d):
    ids = stable_group(d, protocols=subscribed_to("t"))
    d.commit("g", [("t", 0, 1), ("t", 1, 1)], generation=1, member_id=ids["a"])
    written = len(d.written)
    reply = d.delete_offsets("g", [("t", [0, 1])])
    assert reply == {"error_code": E.none, "partitions": {("t", 0): E.group_subscribed_to_topic,
                                                          ("t", 1): E.group_subscribed_to_topic}}
    assert len(d.written) == written


def test_offset_delete_of_unsubscribed_topic_in_stable_consumer_group_tombstones_committed_partitions(d):
    ids = stable_group(d, protocols=subscribed_to("t"))
    d.commit("g", [("u", 0, 1), ("t", 0, 1)], generation=1, member_id=ids["a"])
    reply = d.delete_offsets("g", [("u", [0, 1])])
    assert reply == {"error_code": E.none, "partitions": {("u", 0): E.none, ("u", 1): E.none}}
    assert d.written[-1] == Record(OffsetCommitKey("g", "u", 0), None)
    assert sorted((t, p) for t, p, _ in d.fetch("g")) == [("t", 0)]
    d.assert_replay_matches()


def test_offset_delete_unions_the_subscriptions_of_every_member(d):
    ids = completing_group(d, names=("a",), protocols=subscribed_to("t"))
    d.join("g", ticket="join-b", client_id="b", version=3, protocols=subscribed_to("u"))
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", protocols=subscribed_to("t"))
    assert d.group().state is COMPLETING_REBALANCE
    assert d.delete_offsets("g", [("u", [0])])["partitions"] == {("u", 0): E.group_subscribed_to_topic}


def test_offset_delete_in_empty_consumer_group_is_allowed_for_any_topic(d):
    ids = stable_group(d, names=("a",), protocols=subscribed_to("t"))
    d.commit("g", [("t", 0, 1)], generation=1, member_id=ids["a"])
    d.leave("g", ids["a"])
    assert d.group().state is EMPTY
    assert d.delete_offsets("g", [("t", [0])])["partitions"] == {("t", 0): E.none}
    assert d.fetch("g") == []


def test_offset_delete_in_simple_group_is_allowed(d):
    d.commit("g", [("t", 0, 1)])
    assert d.delete_offsets("g", [("t", [0])]) == {"error_code": E.none, "partitions": {("t", 0): E.none}}
    assert d.fetch("g") == []


def test_offset_delete_in_consumer_group_with_unparsable_subscriptions_counts_as_subscribed(d):
    stable_group(d, protocols=(("range", b"\x00"),))
    assert d.group().subscribed_topics is None
    assert d.delete_offsets("g", [("t", [0])])["partitions"] == {("t", 0): E.group_subscribed_to_topic}


def test_failed_offset_delete_write_is_the_top_level_error(d):
    d.commit("g", [("t", 0, 1)])
    d.fail_next_write(E.coordinator_not_available)
    assert d.delete_offsets("g", [("t", [0])]) == {"error_code": E.coordinator_not_available, "partitions": {}}
    assert d.fetch("g")[0][2].offset == 1
