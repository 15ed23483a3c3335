"""Spec §6: LeaveGroup — one result per identity, removal by instance id, pending ids, and what
the departures do to the group. (The v0–v2 single-error collapse is the API module's concern.)"""

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue

from .driver import E, preparing_group, stable_group


def test_leave_with_empty_group_id_is_invalid_group_id(d):
    assert d.leave("", "a-1")["error_code"] == E.invalid_group_id


def test_leave_from_unknown_group_answers_every_member_unknown_member_id(d):
    reply = d.leave("nope", "a-1", ("b-2", "b-instance"))
    assert reply == {"error_code": E.none, "members": [("a-1", None, E.unknown_member_id),
                                                       ("b-2", "b-instance", E.unknown_member_id)]}


def test_leave_batch_answers_each_identity_on_its_own(d):
    ids = stable_group(d, names=("a", "b", "c"), static=True)
    reply = d.leave("g", (ids["a"], "a-instance"), ("stranger", None), (ids["b"], "c-instance"),
                    (ids["c"], "unknown-instance"))
    assert reply == {"error_code": E.none, "members": [
        (ids["a"], "a-instance", E.none),
        ("stranger", None, E.unknown_member_id),
        (ids["b"], "c-instance", E.fenced_instance_id),
        (ids["c"], "unknown-instance", E.unknown_member_id)]}
    g = d.group()
    assert set(g.members) == {ids["b"], ids["c"]}
    assert g.state is PREPARING_REBALANCE


def test_leave_with_empty_member_id_removes_the_static_member_of_the_instance_id(d):
    ids = stable_group(d, static=True)
    reply = d.leave("g", ("", "b-instance"))
    assert reply["members"] == [("", "b-instance", E.none)]
    assert list(d.group().members) == [ids["a"]]
    assert "b-instance" not in d.group().static_members


def test_leave_with_empty_member_id_and_unknown_instance_id_is_unknown_member_id(d):
    stable_group(d, static=True)
    reply = d.leave("g", ("", "x-instance"), ("", None))
    assert reply["members"] == [("", "x-instance", E.unknown_member_id), ("", None, E.unknown_member_id)]
    assert d.group().state is STABLE


def test_leave_with_a_pending_member_id_drops_it(d):
    ids = preparing_group(d)
    pending = d.join("g", ticket="join-c:id", client_id="c")["member_id"]
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert d.group().state is PREPARING_REBALANCE  # waiting for the pending id
    reply = d.leave("g", pending)
    assert reply["members"] == [(pending, None, E.none)]
    assert not d.group().pending_join
    assert d.group().state is COMPLETING_REBALANCE


def test_leave_with_a_pending_member_id_counts_as_a_departure_in_stable(d):
    stable_group(d)
    pending = d.join("g", ticket="join-c:id", client_id="c")["member_id"]
    d.leave("g", pending)
    assert d.group().state is PREPARING_REBALANCE


def test_failed_leave_changes_nothing(d):
    stable_group(d)
    d.leave("g", "stranger")
    assert d.group().state is STABLE


def test_leaving_member_with_parked_join_gets_unknown_member_id(d):
    ids = preparing_group(d, names=("a", "b", "c"))
    d.leave("g", ids["a"])
    reply = d.replies["rejoin-a"]
    assert (reply["error_code"], reply["member_id"]) == (E.unknown_member_id, "")


def test_leave_in_preparing_rebalance_completes_the_join_when_everyone_left_has_joined(d):
    ids = preparing_group(d)
    d.leave("g", ids["b"])
    g = d.group()
    assert (g.state, g.generation, list(g.members)) == (COMPLETING_REBALANCE, 2, [ids["a"]])


def test_last_members_leaving_make_the_group_empty_with_a_memberless_record(d):
    ids = stable_group(d)
    d.hold_writes()
    assert d.leave("g", ids["a"], ids["b"]) is None  # the reply waits for the record
    g = d.group()
    assert (g.state, g.generation, g.protocol_name, g.leader_id) == (EMPTY, 2, None, None)
    d.finish_writes()
    assert [m[2] for m in d.answers[-1][1]["members"]] == [E.none, E.none]
    record = d.written[-1]
    assert record.key == GroupMetadataKey("g")
    assert record.value == GroupMetadataValue("consumer", 2, None, None, d.now, ())
    d.assert_replay_matches()


def test_leave_of_unknown_member_in_empty_group_does_nothing(d):
    d.commit("g", [("t", 0, 1)])
    written = len(d.written)
    assert d.leave("g", "stranger")["members"] == [("stranger", None, E.unknown_member_id)]
    assert len(d.written) == written
