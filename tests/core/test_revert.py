"""One mutation path (design.md): records are applied when appended, so the next request sees them;
a failed write reverts what they applied, and every later in-flight write of the partition with it;
a write that times out stays applied. The conftest checks after each scenario that a replay of the
log equals memory."""

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from groupd.protocol import ErrorCode

from .driver import completing_group, empty_group, stable_group

E = ErrorCode


def offsets_of(d, group_id="g"):
    return {tp: v.offset for tp, v in d.shard.offsets.get(group_id, {}).items()}


def test_commit_is_applied_when_appended_and_visible_to_the_next_write(d):
    d.commit("g", [("t", 0, 1)])
    d.hold_writes()
    d.commit("g", [("t", 0, 2)])
    assert offsets_of(d) == {("t", 0): 2}  # memory has it; OffsetFetch still reads the durable 1
    assert d.fetch("g")[0][2].offset == 1
    d.finish_writes()
    assert d.fetch("g")[0][2].offset == 2


def test_failed_commit_reverts_the_previous_offset_and_removes_a_new_one(d):
    d.commit("g", [("t", 0, 1)])
    d.fail_next_write(E.not_coordinator)
    assert d.commit("g", [("t", 0, 2), ("t", 1, 7)]) == {("t", 0): E.not_coordinator, ("t", 1): E.not_coordinator}
    assert offsets_of(d) == {("t", 0): 1}


def test_failed_write_reverts_every_later_write_in_flight(d):
    d.commit("g", [("t", 0, 1)])
    d.hold_writes()
    d.commit("g", [("t", 0, 2)])
    d.commit("g", [("t", 0, 3)])
    d.commit("other", [("t", 0, 9)])
    assert offsets_of(d) == {("t", 0): 3}
    d.finish_writes(E.not_coordinator)
    assert offsets_of(d) == {("t", 0): 1}
    assert "other" not in d.shard.groups and "other" not in d.shard.offsets
    assert [reply for _, reply in d.answers[-3:]] == [{("t", 0): E.not_coordinator}] * 2 + [
        {("t", 0): E.not_coordinator}]


def test_failed_write_of_a_new_group_removes_it_and_answers_every_parked_join(d):
    d.hold_writes()
    d.join("g", ticket="a", client_id="a", version=3)  # creates the group: its record is in flight
    d.join("g", ticket="b", client_id="b", version=3)  # joins the group the first write created
    assert len(d.group().members) == 2
    d.finish_writes(E.coordinator_not_available)
    assert "g" not in d.shard.groups
    assert d.replies["a"]["error_code"] == E.coordinator_not_available
    assert d.replies["b"]["error_code"] == E.coordinator_not_available


def test_failed_assignment_write_reverts_the_assignments_and_rebalances(d):
    ids = completing_group(d)
    d.hold_writes()
    d.sync("g", ids["a"], 1, ticket="sync-a", assignments={ids["a"]: b"A", ids["b"]: b"B"})
    g = d.group()
    assert g.members[ids["b"]].assignment == b"B"  # applied when appended
    assert g.state is COMPLETING_REBALANCE
    d.finish_writes(E.not_coordinator)
    assert g.state is PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in g.members.values())
    assert g.durable is not None and g.durable.generation == 0  # the group's record before the failed one


def test_failed_delete_restores_the_group_and_its_offsets(d):
    empty_group(d)
    d.commit("g", [("t", 0, 1), ("t", 1, 2)])
    d.hold_writes()
    d.delete_group("g")
    assert "g" not in d.shard.groups and "g" not in d.shard.offsets  # applied when appended
    d.finish_writes(E.not_coordinator)
    assert d.answers[-1][1] == E.not_coordinator
    g = d.group()
    assert (g.state, g.generation, g.protocol_type) == (EMPTY, 2, "consumer")
    assert offsets_of(d) == {("t", 0): 1, ("t", 1): 2}


def test_failed_expiry_restores_the_simple_group(d):
    d.commit("s", [("t", 0, 1)])
    d.advance(7 * 24 * 3_600_000)
    d.hold_writes()
    d._op(None, lambda ticket: d.shard.expire(d.clock.read(), 7 * 24 * 3_600_000))
    assert "s" not in d.shard.groups
    d.finish_writes(E.not_coordinator)
    assert "s" in d.shard.groups and offsets_of(d, "s") == {("t", 0): 1}


def test_failed_static_replacement_gives_the_instance_its_old_member_back(d):
    ids = stable_group(d, static=True)
    d.fail_next_write(E.not_coordinator)
    d.join("g", ticket="restart-b", client_id="b", instance_id="b-instance")
    g = d.group()
    assert g.static_members["b-instance"] == ids["b"] and list(g.members) == [ids["a"], ids["b"]]
    assert g.state is STABLE


def test_write_that_times_out_is_answered_with_the_error_but_stays_applied(d):
    d.commit("g", [("t", 0, 1)])
    d.hold_writes()
    d.commit("g", [("t", 0, 2)])
    d.time_out_writes()
    assert d.answers[-1][1] == {("t", 0): E.coordinator_not_available}
    d.finish_writes()  # it lands after all
    assert offsets_of(d) == {("t", 0): 2} and d.fetch("g")[0][2].offset == 2


def test_commit_too_large_for_the_log_is_invalid_commit_offset_size_and_reverted(d):
    d.commit("g", [("t", 0, 1)])
    d.fail_next_write(E.record_list_too_large)
    assert d.commit("g", [("t", 0, 2)]) == {("t", 0): E.invalid_commit_offset_size}
    assert offsets_of(d) == {("t", 0): 1}


def test_group_metadata_too_large_for_the_log_is_unknown_server_error(d):
    d.fail_next_write(E.record_list_too_large)
    d.join("g", ticket="j", client_id="a", version=3)
    assert d.replies["j"]["error_code"] == E.unknown_server_error
    assert "g" not in d.shard.groups


def test_static_replacement_that_times_out_is_answered_and_kept(d):
    ids = stable_group(d, static=True)
    d.hold_writes()
    d.join("g", ticket="restart-b", client_id="b", instance_id="b-instance")
    d.time_out_writes()
    assert d.replies["restart-b"]["error_code"] == E.coordinator_not_available
    new_id = d.group().static_members["b-instance"]
    assert new_id != ids["b"] and d.group().members[new_id].awaiting_join is None
    d.finish_writes()  # it lands after all: memory already has it
    assert d.group().state is STABLE


def test_static_replacement_overtaken_by_a_rebalance_is_answered_by_the_rebalance_only(d):
    ids = stable_group(d, static=True)
    d.hold_writes()
    d.join("g", ticket="restart-b", client_id="b", instance_id="b-instance")
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", instance_id="a-instance")  # the leader re-joins
    assert d.group().state is COMPLETING_REBALANCE  # both joined: the new generation answered both joins
    assert d.replies["restart-b"]["error_code"] == E.none and d.replies["restart-b"]["generation_id"] == 2
    d.finish_writes(E.not_coordinator)
    assert len(d.answers_to("restart-b")) == 1  # the failed write does not answer it again
