"""Spec §4: SyncGroup — validation order, the leader's assignment persisted before anyone is
answered, followers parked, and the sync timer."""

import pytest

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE
from groupd.storage.records import GroupMetadataKey

from .driver import E, completing_group, stable_group

# -- §4.2 validation ---------------------------------------------------------------------------------

def test_sync_for_unknown_group_is_unknown_member_id(d):
    assert d.sync("nope", "a-1", 1, ticket="s")["error_code"] == E.unknown_member_id


def test_sync_with_empty_group_id_is_invalid_group_id(d):
    assert d.sync("", "a-1", 1, ticket="s")["error_code"] == E.invalid_group_id


def test_sync_from_unknown_member_is_unknown_member_id(d):
    completing_group(d)
    assert d.sync("g", "stranger", 1, ticket="s")["error_code"] == E.unknown_member_id


def test_sync_with_unknown_instance_id_is_unknown_member_id(d):
    ids = completing_group(d, static=True)
    assert d.sync("g", ids["a"], 1, ticket="s", instance_id="other")["error_code"] == E.unknown_member_id


def test_sync_with_instance_id_of_another_member_is_fenced_instance_id(d):
    ids = completing_group(d, static=True)
    assert d.sync("g", ids["a"], 1, ticket="s", instance_id="b-instance")["error_code"] == E.fenced_instance_id


def test_sync_with_another_generation_is_illegal_generation(d):
    ids = completing_group(d)
    assert d.sync("g", ids["b"], 2, ticket="s")["error_code"] == E.illegal_generation


def test_member_validation_comes_before_the_generation_check(d):
    completing_group(d)
    assert d.sync("g", "stranger", 7, ticket="s")["error_code"] == E.unknown_member_id


@pytest.mark.parametrize("protocol_type, protocol_name", [("connect", None), (None, "roundrobin")])
def test_sync_naming_another_protocol_is_inconsistent_group_protocol(d, protocol_type, protocol_name):
    ids = completing_group(d)
    reply = d.sync("g", ids["b"], 1, ticket="s", protocol_type=protocol_type, protocol_name=protocol_name)
    assert reply["error_code"] == E.inconsistent_group_protocol


def test_sync_naming_the_group_protocol_is_accepted(d):
    ids = stable_group(d)
    reply = d.sync("g", ids["b"], 1, ticket="s", protocol_type="consumer", protocol_name="range")
    assert reply["error_code"] == E.none


# -- §4.3 leader assignment and persistence -------------------------------------------------------------

def test_leader_sync_writes_the_group_with_every_assignment(d):
    ids = completing_group(d, names=("a", "b", "c"))
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={ids["a"]: b"A", ids["b"]: b"B", "stranger": b"X"})
    record = d.written[-1]
    assert record.key == GroupMetadataKey("g")
    value = record.value
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", 1, "range", ids["a"])
    assert [(m.member_id, m.subscription, m.assignment) for m in value.members] == [
        (ids["a"], b"range-meta", b"A"), (ids["b"], b"range-meta", b"B"), (ids["c"], b"range-meta", b"")]


def test_no_sync_reply_is_sent_before_the_assignment_is_written(d):
    ids = completing_group(d)
    d.sync("g", ids["b"], 1, ticket="sync-b")
    d.hold_writes()
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={ids["a"]: b"A", ids["b"]: b"B"})
    assert d.writes_in_flight == 1
    assert "sync-a" not in d.replies and "sync-b" not in d.replies
    assert d.group().state is COMPLETING_REBALANCE
    d.finish_writes()
    assert d.replies["sync-a"]["assignment"] == b"A"
    assert d.replies["sync-b"] == {"error_code": E.none, "protocol_type": "consumer", "protocol_name": "range",
                                   "assignment": b"B"}
    assert d.group().state is STABLE
    d.assert_replay_matches()


def test_follower_sync_waits_for_the_leader(d):
    ids = completing_group(d)
    assert d.sync("g", ids["b"], 1, ticket="sync-b") is None
    d.advance(5000)
    assert "sync-b" not in d.replies
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={ids["b"]: b"B"})
    assert d.replies["sync-b"]["assignment"] == b"B"


def test_follower_syncing_after_the_assignment_is_written_gets_it_from_stable(d):
    ids = completing_group(d)
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={ids["b"]: b"B"})
    assert d.sync("g", ids["b"], 1, ticket="sync-b")["assignment"] == b"B"


def test_assignment_sent_by_the_leader_in_stable_is_ignored(d):
    ids = stable_group(d)
    written = len(d.written)
    reply = d.sync("g", ids["a"], 1, ticket="sync-a-again", assignments={ids["a"]: b"other"})
    assert reply["assignment"] == b"assignment-of-a"
    assert len(d.written) == written


def test_answered_syncs_restart_the_members_sessions(d):
    ids = completing_group(d)
    d.advance(4000)
    d.sync("g", ids["b"], 1, ticket="sync-b")
    d.advance(1000)
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={})
    assert all(m.deadline == d.now + 10_000 for m in d.group().members.values())


def test_failed_assignment_write_answers_every_parked_sync_with_the_error_and_rebalances(d):
    ids = completing_group(d)
    d.sync("g", ids["b"], 1, ticket="sync-b")
    d.fail_next_write(E.coordinator_not_available)
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={ids["a"]: b"A", ids["b"]: b"B"})
    assert d.replies["sync-a"]["error_code"] == E.coordinator_not_available
    assert d.replies["sync-b"]["error_code"] == E.coordinator_not_available
    g = d.group()
    assert g.state is PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in g.members.values())
    assert not any(r.value is not None and r.value.generation == 1 for r in d.written)


def test_assignment_written_after_a_new_rebalance_changes_nothing(d):
    ids = completing_group(d)
    d.sync("g", ids["b"], 1, ticket="sync-b")
    d.hold_writes()
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={ids["a"]: b"A", ids["b"]: b"B"})
    d.join("g", ticket="join-c", client_id="c", version=3)  # rebalance while the write is in flight
    assert d.replies["sync-b"]["error_code"] == E.rebalance_in_progress
    d.finish_writes()
    g = d.group()
    assert g.state is PREPARING_REBALANCE
    assert d.answers_to("sync-b") == [d.replies["sync-b"]]
    assert all(m.assignment == b"" for m in g.members.values())


# -- §4.5 sync timer ---------------------------------------------------------------------------------

def test_sync_timer_removes_a_leader_that_never_syncs(d):
    ids = completing_group(d, session_timeout_ms=30_000)
    d.sync("g", ids["b"], 1, ticket="sync-b")
    d.advance(19_999)
    assert d.group().state is COMPLETING_REBALANCE
    d.advance(1)
    g = d.group()
    assert list(g.members) == [ids["b"]]
    assert g.leader_id == ids["b"]
    assert d.replies["sync-b"]["error_code"] == E.rebalance_in_progress
    assert g.state is PREPARING_REBALANCE


def test_sync_timer_uses_the_rebalance_timeout_at_join_completion(d):
    ids = completing_group(d, session_timeout_ms=60_000, rebalance_timeout_ms=45_000)
    assert d.timers[("sync", "g")] == d.now + 45_000
    d.advance(44_999)
    assert set(d.group().members) == set(ids.values())


def test_sync_timer_does_nothing_once_everyone_has_synced(d):
    ids = stable_group(d, session_timeout_ms=60_000)
    d.advance(30_000)
    g = d.group()
    assert (g.state, set(g.members)) == (STABLE, set(ids.values()))


def test_sync_timer_of_an_older_generation_does_nothing(d):
    ids = completing_group(d, session_timeout_ms=60_000)  # sync timer due at +20000
    d.advance(10_000)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", protocols=(("range", b"v2"),),
           session_timeout_ms=60_000)
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b", session_timeout_ms=60_000)  # generation 2
    assert d.group().generation == 2
    d.advance(10_000)
    g = d.group()
    assert (g.state, set(g.members)) == (COMPLETING_REBALANCE, set(ids.values()))
    d.advance(10_000)  # generation 2's own timer: nobody synced
    assert d.group().members == {}
