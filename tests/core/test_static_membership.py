"""Spec §3.10 (KIP-345, KIP-814): a static member re-joining with an empty member id takes a new
member id in place of its old one, in each group state."""

import pytest

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE
from groupd.storage.records import GroupMetadataKey

from .driver import E, assignment_of, completing_group, stable_group


def restart(d, name, ticket, **join):
    """The static member `name` restarts: it joins with an empty member id and its instance id."""
    return d.join("g", ticket=ticket, client_id=name, instance_id=f"{name}-instance", **join)


def test_static_member_rejoining_stable_group_is_replaced_without_rebalance(d):
    ids = stable_group(d, static=True)
    reply = restart(d, "b", "restart-b")
    g = d.group()
    new_id = g.static_members["b-instance"]
    assert new_id not in ids.values()
    assert (g.state, g.generation) == (STABLE, 1)
    assert list(g.members) == [ids["a"], new_id]
    assert g.members[new_id].assignment == assignment_of("b")
    assert reply == {"error_code": E.none, "generation_id": 1, "protocol_type": "consumer",
                     "protocol_name": "range", "leader": ids["a"], "skip_assignment": False,
                     "member_id": new_id, "members": []}


def test_static_replacement_in_stable_writes_the_group_with_the_new_member_id(d):
    stable_group(d, static=True)
    restart(d, "b", "restart-b")
    record = d.written[-1]
    new_id = d.group().static_members["b-instance"]
    assert record.key == GroupMetadataKey("g")
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in record.value.members] == [
        (d.group().leader_id, "a-instance", assignment_of("a")), (new_id, "b-instance", assignment_of("b"))]
    d.assert_replay_matches()


def test_static_replacement_reply_waits_for_the_write(d):
    stable_group(d, static=True)
    d.hold_writes()
    assert restart(d, "b", "restart-b") is None
    d.finish_writes()
    assert d.replies["restart-b"]["error_code"] == E.none


def test_static_leader_replaced_with_join_v9_gets_skip_assignment_and_the_member_list(d):
    ids = stable_group(d, static=True)
    reply = restart(d, "a", "restart-a", version=9)
    new_id = d.group().static_members["a-instance"]
    assert d.group().leader_id == new_id
    assert (reply["leader"], reply["member_id"], reply["skip_assignment"]) == (new_id, new_id, True)
    assert [(m["member_id"], m["group_instance_id"]) for m in reply["members"]] == [
        (new_id, "a-instance"), (ids["b"], "b-instance")]


@pytest.mark.parametrize("version", [5, 6, 7, 8])
def test_static_leader_replaced_with_join_v5_to_v8_is_told_the_old_leader_id(d, version):
    ids = stable_group(d, static=True)
    reply = restart(d, "a", "restart-a", version=version)
    new_id = d.group().static_members["a-instance"]
    assert d.group().leader_id == new_id
    assert (reply["leader"], reply["member_id"], reply["members"], reply["skip_assignment"]) == (
        ids["a"], new_id, [], False)


def test_requests_with_the_replaced_member_id_and_its_instance_id_are_fenced(d):
    ids = stable_group(d, static=True)
    restart(d, "b", "restart-b")
    old = ids["b"]
    assert d.heartbeat("g", old, 1, "b-instance") == E.fenced_instance_id
    assert d.sync("g", old, 1, ticket="sync-old", instance_id="b-instance")["error_code"] == E.fenced_instance_id
    assert d.join("g", old, ticket="join-old", client_id="b", instance_id="b-instance")[
        "error_code"] == E.fenced_instance_id
    assert d.commit("g", [("t", 0, 1)], generation=1, member_id=old, instance_id="b-instance") == {
        ("t", 0): E.fenced_instance_id}
    assert d.leave("g", (old, "b-instance"))["members"] == [(old, "b-instance", E.fenced_instance_id)]
    assert d.heartbeat("g", old, 1) == E.unknown_member_id
    assert d.group().state is STABLE


def test_session_timer_of_the_replaced_member_id_does_nothing(d):
    ids = stable_group(d, static=True)
    d.advance(5000)
    d.heartbeat("g", ids["a"], 1, "a-instance")
    restart(d, "b", "restart-b")
    new_id = d.group().static_members["b-instance"]
    d.advance(5000)  # the old id's deadline
    assert d.group().state is STABLE
    assert d.group().members[new_id].deadline == d.now + 5000


def test_failed_write_of_static_replacement_restores_the_old_member(d):
    ids = stable_group(d, static=True)
    d.advance(1000)
    d.fail_next_write(E.not_coordinator)
    reply = restart(d, "b", "restart-b", protocols=(("range", b"new-metadata"),), session_timeout_ms=20_000)
    g = d.group()
    assert (reply["error_code"], reply["member_id"], reply["generation_id"], reply["leader"]) == (
        E.not_coordinator, "", 1, ids["a"])
    assert list(g.members) == [ids["a"], ids["b"]]
    assert g.static_members["b-instance"] == ids["b"]
    old = g.members[ids["b"]]
    assert (old.protocols, old.session_timeout_ms) == ((("range", b"range-meta"),), 10_000)
    assert old.deadline == d.now + 10_000
    assert old.awaiting_join is None
    assert d.heartbeat("g", ids["b"], 1, "b-instance") == E.none
    assert g.state is STABLE


def test_static_replacement_in_stable_that_changes_the_selected_protocol_rebalances(d):
    both = (("range", b""), ("roundrobin", b""))
    stable_group(d, static=True, protocols=both)
    assert d.group().protocol_name == "range"
    written = len(d.written)
    assert restart(d, "b", "restart-b", protocols=(("roundrobin", b""),)) is None
    assert d.group().state is PREPARING_REBALANCE
    assert len(d.written) == written


def test_static_replacement_in_completing_rebalance_rebalances_and_fences_the_parked_sync(d):
    ids = completing_group(d, static=True)
    assert d.sync("g", ids["b"], 1, ticket="sync-b", instance_id="b-instance") is None
    assert restart(d, "b", "restart-b") is None
    g = d.group()
    assert g.state is PREPARING_REBALANCE
    assert d.replies["sync-b"]["error_code"] == E.fenced_instance_id
    assert g.members[g.static_members["b-instance"]].awaiting_join == "restart-b"


def test_static_replacement_in_preparing_rebalance_fences_the_parked_join(d):
    ids = stable_group(d, names=("a", "b", "c"), static=True)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", instance_id="a-instance")
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b", instance_id="b-instance")
    assert restart(d, "b", "restart-b") is None
    assert d.replies["rejoin-b"]["error_code"] == E.fenced_instance_id
    assert d.group().state is PREPARING_REBALANCE  # c has not re-joined


def test_static_replacement_in_preparing_rebalance_completes_the_join_when_everyone_has_joined(d):
    ids = stable_group(d, static=True)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", instance_id="a-instance")
    restart(d, "b", "restart-b")
    g = d.group()
    new_id = g.static_members["b-instance"]
    assert (g.state, g.generation) == (COMPLETING_REBALANCE, 2)
    assert (d.replies["restart-b"]["member_id"], d.replies["restart-b"]["generation_id"]) == (new_id, 2)
    assert [m["member_id"] for m in d.replies["rejoin-a"]["members"]] == [ids["a"], new_id]


def test_static_member_id_prefix_is_the_instance_id(d):
    restart(d, "a", "join-a")
    assert list(d.group().members) == ["a-instance-1"]
