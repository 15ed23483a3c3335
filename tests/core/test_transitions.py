"""Spec §2.1–§2.2: which transitions exist and what triggers each."""

import itertools

import pytest

from groupd.coordinator.core.classic.group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    GroupState,
)
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue

from .driver import E, assignment_of, completing_group, new_member, stable_group, static_member

ALLOWED = {
    (PREPARING_REBALANCE, EMPTY),
    (EMPTY, PREPARING_REBALANCE), (STABLE, PREPARING_REBALANCE), (COMPLETING_REBALANCE, PREPARING_REBALANCE),
    (PREPARING_REBALANCE, COMPLETING_REBALANCE),
    (COMPLETING_REBALANCE, STABLE),
}


@pytest.mark.parametrize("source, target", list(itertools.product(GroupState, GroupState)),
                         ids=lambda s: s.value)
def test_only_the_transitions_of_the_table_are_allowed(source, target):
    group = ClassicGroup("g", source, 0)
    if (source, target) in ALLOWED:
        group.transition_to(target, 5)
        assert (group.previous_state, group.state, group.state_timestamp) == (source, target, 5)
    else:
        with pytest.raises(AssertionError):
            group.transition_to(target, 5)


# -- Empty → PreparingRebalance: a member is added --------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_dynamic_member_joining_with_v0_to_v3_is_added_and_starts_initial_rebalance(d, version):
    reply = d.join("g", ticket="join-a", client_id="a", version=version)
    g = d.group()
    assert reply is None
    assert list(g.members) == ["a-1"]
    assert (g.state, g.previous_state) == (PREPARING_REBALANCE, EMPTY)


def test_rejoin_with_the_id_from_member_id_required_starts_initial_rebalance(d):
    first = d.join("g", ticket="join-a:member-id", client_id="a")
    assert d.group().state is EMPTY
    d.join("g", first["member_id"], ticket="join-a", client_id="a")
    assert (d.group().state, d.group().previous_state) == (PREPARING_REBALANCE, EMPTY)


def test_new_static_member_starts_initial_rebalance(d):
    a = static_member(d, "g", "a")
    assert a == "a-instance-1"
    assert (d.group().state, d.group().previous_state) == (PREPARING_REBALANCE, EMPTY)


# -- PreparingRebalance → CompletingRebalance / Empty: the join phase completes ----------------------

def test_join_phase_completing_with_members_starts_next_generation_and_sync_timer(d):
    a = new_member(d, "g", "a", rebalance_timeout_ms=25_000)
    d.advance(3000)
    g = d.group()
    assert (g.state, g.generation, g.protocol_name) == (COMPLETING_REBALANCE, 1, "range")
    reply = d.replies["join-a"]
    assert (reply["error_code"], reply["generation_id"], reply["member_id"], reply["leader"]) == (E.none, 1, a, a)
    assert d.timers[("sync", "g")] == d.now + 25_000
    assert g.pending_sync == {a}


def test_join_phase_completing_with_no_members_makes_group_empty_and_writes_memberless_record(d):
    ids = stable_group(d, session_timeout_ms=30_000)  # sessions outlast the rebalance timeout
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a")
    d.leave("g", ids["a"])
    assert d.group().state is PREPARING_REBALANCE  # b has not re-joined yet
    d.advance(20_000)  # rebalance timeout: b never re-joined and is dropped
    g = d.group()
    assert (g.state, g.generation, g.protocol_name, g.members) == (EMPTY, 2, None, {})
    assert d.written[-1].key == GroupMetadataKey("g")
    value = d.written[-1].value
    assert (value.generation, value.protocol, value.leader, value.members) == (2, None, None, ())
    d.assert_replay_matches()


# -- CompletingRebalance → PreparingRebalance ------------------------------------------------------

def completing_with_parked_follower(d, **join):
    """Generation 1 is Stable with assignments; all three re-join → CompletingRebalance at
    generation 2 (the stored assignments are those of generation 1); follower b's SyncGroup is
    parked as "sync-b-2"."""
    ids = stable_group(d, names=("a", "b", "c"), **join)
    for name in ("a", "b", "c"):
        d.join("g", ids[name], ticket=f"rejoin-{name}", client_id=name, **join)
    assert (d.group().state, d.group().generation) == (COMPLETING_REBALANCE, 2)
    assert d.sync("g", ids["b"], 2, ticket="sync-b-2") is None
    return ids


def assert_rebalance_from_completing(d):
    g = d.group()
    assert g.state is PREPARING_REBALANCE
    assert d.replies["sync-b-2"]["error_code"] == E.rebalance_in_progress
    assert all(m.assignment == b"" for m in g.members.values())


def test_new_member_in_completing_rebalance_answers_parked_syncs_and_clears_assignments(d):
    ids = completing_with_parked_follower(d)
    assert d.group().members[ids["b"]].assignment == assignment_of("b")  # still generation 1's
    new_member(d, "g", "d")
    assert_rebalance_from_completing(d)


def test_member_changing_protocols_in_completing_rebalance_rebalances(d):
    ids = completing_with_parked_follower(d)
    d.join("g", ids["c"], ticket="rejoin-c-2", client_id="c", protocols=(("roundrobin", b""), ("range", b"")))
    assert_rebalance_from_completing(d)


def test_member_leaving_in_completing_rebalance_rebalances(d):
    ids = completing_with_parked_follower(d)
    d.leave("g", ids["c"])
    assert_rebalance_from_completing(d)


def test_member_session_expiring_in_completing_rebalance_rebalances(d):
    ids = completing_with_parked_follower(d)
    d.advance(9000)
    assert d.heartbeat("g", ids["a"], 2) == E.none
    d.advance(1000)  # c neither synced nor heartbeated for a whole session
    assert ids["c"] not in d.group().members
    assert_rebalance_from_completing(d)


def test_sync_timer_expiring_in_completing_rebalance_removes_unsynced_members_and_rebalances(d):
    ids = completing_with_parked_follower(d, session_timeout_ms=30_000)
    d.advance(20_000)  # rebalance timeout: neither the leader a nor c sent SyncGroup
    assert set(d.group().members) == {ids["b"]}
    assert_rebalance_from_completing(d)


def test_failed_assignment_write_in_completing_rebalance_rebalances(d):
    ids = completing_with_parked_follower(d)
    d.fail_next_write(E.not_coordinator)
    d.sync("g", ids["a"], 2, ticket="sync-a-2", assignments={ids["a"]: b"x"})
    g = d.group()
    assert g.state is PREPARING_REBALANCE
    assert d.replies["sync-b-2"]["error_code"] == E.not_coordinator
    assert all(m.assignment == b"" for m in g.members.values())


# -- Stable → PreparingRebalance -------------------------------------------------------------------

def test_leader_join_in_stable_rebalances(d):
    ids = stable_group(d)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a")
    assert d.group().state is PREPARING_REBALANCE


def test_follower_changing_protocols_in_stable_rebalances(d):
    ids = stable_group(d)
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b", protocols=(("range", b"other-metadata"),))
    assert d.group().state is PREPARING_REBALANCE


def test_new_member_in_stable_rebalances(d):
    stable_group(d)
    d.join("g", ticket="join-c", client_id="c", version=3)
    assert d.group().state is PREPARING_REBALANCE


def test_member_leaving_in_stable_rebalances(d):
    ids = stable_group(d)
    d.leave("g", ids["b"])
    assert d.group().state is PREPARING_REBALANCE
    assert list(d.group().members) == [ids["a"]]


def test_member_session_expiring_in_stable_rebalances(d):
    ids = stable_group(d)
    d.advance(9000)
    d.heartbeat("g", ids["a"], 1)
    d.advance(1000)
    assert d.group().state is PREPARING_REBALANCE
    assert list(d.group().members) == [ids["a"]]


def test_sync_timer_expiring_in_stable_removes_members_that_never_synced(d):
    ids = completing_group(d, session_timeout_ms=30_000)
    d.sync("g", ids["a"], 1, ticket="sync-a-1", assignments={ids["a"]: b"x", ids["b"]: b"y"})
    assert d.group().state is STABLE  # b got its join reply but never sends SyncGroup
    d.advance(19_999)
    assert d.group().state is STABLE
    d.advance(1)
    assert d.group().state is PREPARING_REBALANCE
    assert list(d.group().members) == [ids["a"]]


# -- removal ---------------------------------------------------------------------------------------

def test_delete_groups_removes_an_empty_group(d):
    d.commit("g", [("t", 0, 1)])
    assert d.delete_group("g") == E.none
    assert "g" not in d.shard.groups
    d.assert_replay_matches()


def test_completing_the_assignment_write_moves_completing_rebalance_to_stable(d):
    ids = completing_group(d)
    d.sync("g", ids["a"], 1, ticket="sync-a-1", assignments={ids["a"]: b"x"})
    g = d.group()
    assert (g.state, g.previous_state) == (STABLE, COMPLETING_REBALANCE)
    assert isinstance(d.written[-1].value, GroupMetadataValue)
    d.assert_replay_matches()
