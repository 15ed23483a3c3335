"""Spec §2.3: what each request gets in each group state (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead). Member and generation checks come first; these tests send
valid identities so that the state column decides."""

import pytest

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from groupd.storage.records import OffsetCommitKey

from .driver import (
    E,
    assignment_of,
    completing_group,
    empty_group,
    new_member,
    preparing_group,
    stable_group,
)

OTHER_PROTOCOLS = (("roundrobin", b"rr-meta"), ("range", b"range-meta"))


# -- JoinGroup, new member ------------------------------------------------------------------------

def test_join_of_new_member_in_empty_group_starts_a_rebalance(d):
    empty_group(d)
    c = new_member(d, "g", "c")
    assert d.group().state is PREPARING_REBALANCE
    assert c in d.group().members
    assert "join-c" not in d.replies


def test_join_of_new_member_in_preparing_rebalance_is_parked(d):
    preparing_group(d)
    c = new_member(d, "g", "c")
    assert d.group().state is PREPARING_REBALANCE
    assert d.group().members[c].awaiting_join == "join-c"
    assert "join-c" not in d.replies


def test_join_of_new_member_in_completing_rebalance_starts_a_rebalance(d):
    completing_group(d)
    c = new_member(d, "g", "c")
    assert d.group().state is PREPARING_REBALANCE
    assert c in d.group().members
    assert "join-c" not in d.replies


def test_join_of_new_member_in_stable_starts_a_rebalance(d):
    stable_group(d)
    c = new_member(d, "g", "c")
    assert d.group().state is PREPARING_REBALANCE
    assert c in d.group().members


# -- JoinGroup, known member ----------------------------------------------------------------------

def test_join_of_known_member_in_empty_group_is_unknown_member_id(d):
    ids = empty_group(d)
    reply = d.join("g", ids["a"], ticket="rejoin-a", client_id="a")
    assert reply["error_code"] == E.unknown_member_id
    assert reply["member_id"] == ids["a"]
    assert d.group().state is EMPTY


def test_join_of_known_member_in_preparing_rebalance_updates_it_and_parks(d):
    ids = preparing_group(d, names=("a", "b", "c"))
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b", protocols=OTHER_PROTOCOLS)
    member = d.group().members[ids["b"]]
    assert "rejoin-b" not in d.replies
    assert member.awaiting_join == "rejoin-b"
    assert member.protocols == OTHER_PROTOCOLS


def test_join_of_follower_with_same_protocols_in_completing_rebalance_returns_current_generation(d):
    ids = completing_group(d)
    reply = d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert reply["error_code"] == E.none
    assert (reply["generation_id"], reply["member_id"], reply["leader"]) == (1, ids["b"], ids["a"])
    assert reply["protocol_name"] == "range"
    assert reply["members"] == []
    assert d.group().state is COMPLETING_REBALANCE


def test_join_of_leader_with_same_protocols_in_completing_rebalance_returns_member_list(d):
    ids = completing_group(d)
    reply = d.join("g", ids["a"], ticket="rejoin-a", client_id="a")
    assert reply["error_code"] == E.none
    assert reply["generation_id"] == 1
    assert [m["member_id"] for m in reply["members"]] == [ids["a"], ids["b"]]
    assert d.group().state is COMPLETING_REBALANCE


def test_join_of_known_member_with_other_protocols_in_completing_rebalance_starts_a_rebalance(d):
    ids = completing_group(d)
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b", protocols=OTHER_PROTOCOLS)
    assert d.group().state is PREPARING_REBALANCE
    assert "rejoin-b" not in d.replies


def test_join_of_leader_in_stable_starts_a_rebalance_even_with_same_protocols(d):
    ids = stable_group(d)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a")
    assert d.group().state is PREPARING_REBALANCE
    assert "rejoin-a" not in d.replies


def test_join_of_follower_with_same_protocols_in_stable_returns_current_generation_without_members(d):
    ids = stable_group(d)
    reply = d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert reply["error_code"] == E.none
    assert (reply["generation_id"], reply["leader"], reply["members"]) == (1, ids["a"], [])
    assert d.group().state is STABLE


def test_join_of_follower_with_other_protocols_in_stable_starts_a_rebalance(d):
    ids = stable_group(d)
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b", protocols=OTHER_PROTOCOLS)
    assert d.group().state is PREPARING_REBALANCE


# -- SyncGroup ------------------------------------------------------------------------------------

def test_sync_in_empty_group_is_unknown_member_id(d):
    ids = empty_group(d)
    assert d.sync("g", ids["a"], 2, ticket="sync-a")["error_code"] == E.unknown_member_id


def test_sync_in_preparing_rebalance_is_rebalance_in_progress(d):
    ids = preparing_group(d)
    assert d.sync("g", ids["b"], 1, ticket="sync-b")["error_code"] == E.rebalance_in_progress


def test_sync_of_follower_in_completing_rebalance_is_parked(d):
    ids = completing_group(d)
    assert d.sync("g", ids["b"], 1, ticket="sync-b") is None
    assert d.group().members[ids["b"]].awaiting_sync == "sync-b"


def test_sync_in_stable_returns_the_stored_assignment(d):
    ids = stable_group(d)
    reply = d.sync("g", ids["b"], 1, ticket="sync-b-again")
    assert reply == {"error_code": E.none, "protocol_type": "consumer", "protocol_name": "range",
                     "assignment": assignment_of("b")}


# -- Heartbeat ------------------------------------------------------------------------------------

def test_heartbeat_in_empty_group_is_unknown_member_id(d):
    ids = empty_group(d)
    assert d.heartbeat("g", ids["a"], 2) == E.unknown_member_id


def test_heartbeat_in_preparing_rebalance_is_rebalance_in_progress_and_resets_session(d):
    ids = preparing_group(d)
    d.advance(4000)
    assert d.heartbeat("g", ids["b"], 1) == E.rebalance_in_progress
    assert d.group().members[ids["b"]].deadline == d.now + 10_000


def test_heartbeat_in_completing_rebalance_is_none_and_resets_session(d):
    ids = completing_group(d)
    d.advance(4000)
    assert d.heartbeat("g", ids["b"], 1) == E.none
    assert d.group().members[ids["b"]].deadline == d.now + 10_000


def test_heartbeat_in_stable_is_none_and_resets_session(d):
    ids = stable_group(d)
    d.advance(4000)
    assert d.heartbeat("g", ids["b"], 1) == E.none
    assert d.group().members[ids["b"]].deadline == d.now + 10_000


# -- OffsetCommit by a member ---------------------------------------------------------------------

def test_member_commit_in_empty_group_is_unknown_member_id(d):
    ids = empty_group(d)
    reply = d.commit("g", [("t", 0, 5)], generation=2, member_id=ids["a"])
    assert reply == {("t", 0): E.unknown_member_id}
    assert d.fetch("g") == []


def test_member_commit_in_preparing_rebalance_is_accepted_and_resets_session(d):
    ids = preparing_group(d)
    d.advance(4000)
    reply = d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["b"])
    assert reply == {("t", 0): E.none}
    assert d.fetch("g")[0][2].offset == 5
    assert d.group().members[ids["b"]].deadline == d.now + 10_000


def test_member_commit_in_completing_rebalance_is_rebalance_in_progress(d):
    ids = completing_group(d)
    reply = d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["b"])
    assert reply == {("t", 0): E.rebalance_in_progress}
    assert not any(isinstance(r.key, OffsetCommitKey) for r in d.written)


def test_member_commit_in_stable_is_accepted_and_resets_session(d):
    ids = stable_group(d)
    d.advance(4000)
    reply = d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["b"])
    assert reply == {("t", 0): E.none}
    assert d.group().members[ids["b"]].deadline == d.now + 10_000
    d.assert_replay_matches()


# -- OffsetCommit without a member (generation < 0) ------------------------------------------------

def test_memberless_commit_in_empty_group_is_accepted(d):
    empty_group(d)
    assert d.commit("g", [("t", 0, 5)]) == {("t", 0): E.none}
    assert d.fetch("g", [("t", [0])])[0][2].offset == 5
    d.assert_replay_matches()


@pytest.mark.parametrize("build", [preparing_group, completing_group, stable_group],
                         ids=["PreparingRebalance", "CompletingRebalance", "Stable"])
def test_memberless_commit_in_non_empty_group_is_unknown_member_id(d, build):
    build(d)
    assert d.commit("g", [("t", 0, 5)]) == {("t", 0): E.unknown_member_id}
    assert d.fetch("g") == []


# -- OffsetFetch ----------------------------------------------------------------------------------

def _to_empty(d, ids):
    d.leave("g", ids["a"], ids["b"])


def _to_preparing(d, ids):
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a")


def _to_completing(d, ids):
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a")
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")


@pytest.mark.parametrize("move, state", [(_to_empty, EMPTY), (_to_preparing, PREPARING_REBALANCE),
                                         (_to_completing, COMPLETING_REBALANCE), (lambda d, ids: None, STABLE)],
                         ids=["Empty", "PreparingRebalance", "CompletingRebalance", "Stable"])
def test_offset_fetch_answers_in_every_live_state(d, move, state):
    ids = stable_group(d)
    d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["b"])
    move(d, ids)
    assert d.group().state is state
    [(topic, partition, value)] = d.fetch("g", [("t", [0])])
    assert (topic, partition, value.offset) == ("t", 0, 5)

