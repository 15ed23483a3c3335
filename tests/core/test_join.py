"""Spec §3: JoinGroup — pre-checks, group creation, group.max.size, new and pending members, the
initial-rebalance delay, join completion, protocol vote and leader election."""

import pytest

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from groupd.coordinator.core.partition import GroupSettings
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue

from .driver import (
    Driver,
    E,
    completing_group,
    new_member,
    preparing_group,
    stable_group,
)

# -- §3.2 pre-checks ---------------------------------------------------------------------------------


def test_empty_group_id_is_invalid_group_id(d):
    assert d.join("", ticket="j")["error_code"] == E.invalid_group_id


@pytest.mark.parametrize("session_timeout_ms", [5999, 1_800_001])
def test_session_timeout_outside_the_bounds_is_invalid_session_timeout(d, session_timeout_ms):
    reply = d.join("g", "m-1", ticket="j", session_timeout_ms=session_timeout_ms)
    assert (reply["error_code"], reply["member_id"]) == (E.invalid_session_timeout, "m-1")
    assert "g" not in d.shard.groups


@pytest.mark.parametrize("session_timeout_ms", [6000, 1_800_000])
def test_session_timeout_bounds_are_inclusive(d, session_timeout_ms):
    reply = d.join("g", ticket="j", session_timeout_ms=session_timeout_ms)
    assert reply["error_code"] == E.member_id_required


def test_session_timeout_bounds_follow_the_settings(clock):
    d = Driver(GroupSettings(min_session_timeout_ms=1000, max_session_timeout_ms=2000), clock)
    assert d.join("g", ticket="j1", session_timeout_ms=999)["error_code"] == E.invalid_session_timeout
    assert d.join("g", ticket="j2", session_timeout_ms=2000)["error_code"] == E.member_id_required


def test_rebalance_timeout_is_not_validated(d):
    assert d.join("g", ticket="j", rebalance_timeout_ms=0)["error_code"] == E.member_id_required


# -- §3.3 group lookup and creation -----------------------------------------------------------------

def test_join_with_member_id_for_unknown_group_is_unknown_member_id(d):
    reply = d.join("g", "a-1", ticket="j")
    assert (reply["error_code"], reply["member_id"]) == (E.unknown_member_id, "a-1")
    assert "g" not in d.shard.groups


def test_join_creating_a_group_writes_the_new_empty_group_record(d):
    d.join("g", ticket="j", client_id="a")
    [record] = d.written
    assert record.key == GroupMetadataKey("g")
    assert record.value == GroupMetadataValue("", 0, None, None, d.now, ())


@pytest.mark.parametrize("join", [dict(version=3), dict(instance_id="a-instance")], ids=["v3", "static"])
def test_join_creating_a_group_and_adding_a_member_still_writes_a_memberless_record(d, join):
    d.join("g", ticket="j", client_id="a", **join)
    [record] = d.written
    assert record.value == GroupMetadataValue("", 0, None, None, d.now, ())
    assert d.replay().groups["g"].state is EMPTY


def test_failed_write_of_a_new_group_answers_the_parked_join_and_drops_the_group(d):
    d.fail_next_write(E.coordinator_not_available)
    d.join("g", ticket="j", client_id="a", version=3)
    reply = d.replies["j"]
    assert (reply["error_code"], reply["member_id"]) == (E.coordinator_not_available, "")
    assert "g" not in d.shard.groups


def test_member_id_required_of_a_new_group_does_not_wait_for_its_record(d):
    """Kafka's classicGroupJoinToClassicGroup completes the answer inside the write operation and
    only then appends the new group's record: the reply leaves before that record is durable."""
    d.hold_writes()
    reply = d.join("g", ticket="j", client_id="a")
    assert reply is not None and reply["error_code"] == E.member_id_required
    assert d.writes_in_flight == 1
    d.join("g", reply["member_id"], ticket="again", client_id="a")  # the re-join needs no fsync either
    assert d.group().state is PREPARING_REBALANCE
    d.finish_writes()
    assert d.answers_to("j") == [reply]


def test_failed_record_of_a_new_group_drops_it_after_member_id_required_was_answered(d):
    d.hold_writes()
    reply = d.join("g", ticket="j", client_id="a")
    assert reply["error_code"] == E.member_id_required
    d.finish_writes(E.coordinator_not_available)
    assert "g" not in d.shard.groups
    assert d.answers_to("j") == [reply]  # answered once: Kafka's later error finds the answer sent
    again = d.join("g", reply["member_id"], ticket="again", client_id="a")
    assert (again["error_code"], again["member_id"]) == (E.unknown_member_id, reply["member_id"])


def test_new_group_with_an_unsupported_protocol_answers_at_once(d):
    d.hold_writes()
    reply = d.join("g", ticket="j", client_id="a", protocol_type="")
    assert reply["error_code"] == E.inconsistent_group_protocol


# -- §3.4 group.max.size -----------------------------------------------------------------------------

@pytest.fixture
def d2(clock):
    return Driver(GroupSettings(max_size=2), clock)


def test_max_size_does_not_limit_an_empty_group(clock):
    d = Driver(GroupSettings(max_size=1), clock)
    assert d.join("g", ticket="j", client_id="a", version=3) is None
    assert len(d.group().members) == 1


@pytest.mark.parametrize("build", [stable_group, completing_group], ids=["Stable", "CompletingRebalance"])
def test_new_member_beyond_max_size_is_rejected_in_stable_and_completing(d2, build):
    build(d2)
    state = d2.group().state
    reply = d2.join("g", ticket="join-c", client_id="c")
    assert (reply["error_code"], reply["member_id"]) == (E.group_max_size_reached, "")
    assert d2.group().state is state
    assert not d2.group().pending_join


@pytest.mark.parametrize("build", [stable_group, completing_group], ids=["Stable", "CompletingRebalance"])
def test_existing_member_at_max_size_is_accepted_in_stable_and_completing(d2, build):
    ids = build(d2)
    reply = d2.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert reply["error_code"] == E.none


def test_pending_member_rejoining_beyond_max_size_is_rejected(d2):
    ids = stable_group(d2, names=("a",))
    b = d2.join("g", ticket="join-b:id", client_id="b")["member_id"]  # room for b when it asks
    c = new_member(d2, "g", "c")  # c takes the room: PreparingRebalance, one joined
    d2.join("g", ids["a"], ticket="rejoin-a", client_id="a")  # two joined: full
    reply = d2.join("g", b, ticket="join-b", client_id="b")
    assert (reply["error_code"], reply["member_id"]) == (E.group_max_size_reached, "")
    assert set(d2.group().members) == {ids["a"], c}


def test_new_member_in_preparing_rebalance_is_accepted_while_fewer_than_max_have_joined(d2):
    preparing_group(d2)  # a re-joined, b has not: one awaiting join
    assert d2.join("g", ticket="join-c", client_id="c", version=3) is None
    assert len(d2.group().members) == 3


def test_new_member_in_preparing_rebalance_is_rejected_once_max_have_joined(d2):
    preparing_group(d2)
    d2.join("g", ticket="join-c", client_id="c", version=3)
    reply = d2.join("g", ticket="join-d", client_id="d", version=3)
    assert (reply["error_code"], reply["member_id"]) == (E.group_max_size_reached, "")
    assert len(d2.group().members) == 3


def test_member_not_awaiting_join_is_removed_when_preparing_rebalance_is_full(d2):
    ids = preparing_group(d2)
    d2.join("g", ticket="join-c", client_id="c", version=3)
    reply = d2.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert (reply["error_code"], reply["member_id"]) == (E.group_max_size_reached, "")
    assert ids["b"] not in d2.group().members


def test_member_already_awaiting_join_is_accepted_when_preparing_rebalance_is_full(d2):
    ids = preparing_group(d2)
    d2.join("g", ticket="join-c", client_id="c", version=3)
    assert d2.join("g", ids["a"], ticket="rejoin-a-again", client_id="a") is None
    assert d2.answers_to("rejoin-a")[0]["error_code"] == E.rebalance_in_progress  # superseded
    assert ids["a"] in d2.group().members


def test_group_over_max_size_after_loading_is_forced_to_rebalance(clock):
    big = Driver(GroupSettings(), clock)
    stable_group(big, names=("a", "b", "c"))
    small = Driver(GroupSettings(max_size=2), clock)
    small.written = big.written
    loaded = small.replay()
    assert loaded.groups["g"].state is PREPARING_REBALANCE


# -- §3.5 new members --------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [4, 5, 9])
def test_dynamic_member_joining_with_v4_plus_gets_member_id_required(d, version):
    stable_group(d)
    reply = d.join("g", ticket="join-c", client_id="consumer-1", version=version)
    assert reply == {"error_code": E.member_id_required, "generation_id": -1, "protocol_type": None,
                     "protocol_name": None, "leader": "", "skip_assignment": False,
                     "member_id": "consumer-1-3", "members": []}
    assert d.group().state is STABLE
    assert "consumer-1-3" not in d.group().members
    assert "consumer-1-3" in d.group().pending_join


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_dynamic_member_joining_with_v0_to_v3_is_added_at_once(d, version):
    ids = stable_group(d)
    assert d.join("g", ticket="join-c", client_id="c", version=version) is None
    assert "c-3" in d.group().members
    assert d.group().state is PREPARING_REBALANCE


@pytest.mark.parametrize("version", [5, 6, 9])
def test_static_member_never_gets_member_id_required(d, version):
    assert d.join("g", ticket="join-a", client_id="a", instance_id="i", version=version) is None
    assert d.group().static_members == {"i": "i-1"}
    assert d.group().members["i-1"].awaiting_join == "join-a"


def test_member_id_prefix_is_the_client_id_for_dynamic_members(d):
    assert d.join("g", ticket="j", client_id="consumer-g-7")["member_id"] == "consumer-g-7-1"


def test_new_member_session_timer_is_the_new_member_join_timeout(d):
    stable_group(d)
    d.join("g", ticket="join-c", client_id="c", version=3)
    assert d.group().members["c-3"].deadline == d.now + 300_000


def test_pending_member_is_dropped_after_its_session_timeout(d):
    stable_group(d)
    first = d.join("g", ticket="join-c:id", client_id="c", session_timeout_ms=7000)
    pending = first["member_id"]
    d.advance(6999)
    assert pending in d.group().pending_join
    d.advance(1)
    assert pending not in d.group().pending_join
    reply = d.join("g", pending, ticket="join-c", client_id="c")
    assert reply["error_code"] == E.unknown_member_id


def test_pending_member_rejoining_in_time_becomes_a_member(d):
    stable_group(d)
    first = d.join("g", ticket="join-c:id", client_id="c", session_timeout_ms=7000)
    d.advance(6000)
    d.join("g", first["member_id"], ticket="join-c", client_id="c")
    d.advance(1000)
    assert first["member_id"] in d.group().members
    assert not d.group().pending_join


def test_pending_member_expiry_completes_the_join_when_everyone_else_has_joined(d):
    ids = preparing_group(d)
    pending = d.join("g", ticket="join-c:id", client_id="c", session_timeout_ms=7000)["member_id"]
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert d.group().state is PREPARING_REBALANCE  # the pending id still counts as not joined
    d.advance(7000)
    g = d.group()
    assert (g.state, g.generation) == (COMPLETING_REBALANCE, 2)
    assert pending not in g.members
    assert d.replies["rejoin-b"]["generation_id"] == 2


@pytest.mark.parametrize("protocol_type, protocols", [("", (("range", b""),)), ("consumer", ())],
                         ids=["no-protocol-type", "no-protocols"])
def test_first_member_needs_a_protocol_type_and_protocols(d, protocol_type, protocols):
    reply = d.join("g", ticket="j", protocol_type=protocol_type, protocols=protocols)
    assert (reply["error_code"], reply["member_id"]) == (E.inconsistent_group_protocol, "")


def test_new_member_with_another_protocol_type_is_inconsistent_group_protocol(d):
    stable_group(d)
    reply = d.join("g", ticket="j", protocol_type="connect")
    assert reply["error_code"] == E.inconsistent_group_protocol


def test_new_member_sharing_no_protocol_with_every_member_is_inconsistent_group_protocol(d):
    stable_group(d)
    reply = d.join("g", ticket="j", protocols=(("roundrobin", b""),))
    assert reply["error_code"] == E.inconsistent_group_protocol


def test_known_member_dropping_the_common_protocol_is_inconsistent_group_protocol(d):
    ids = stable_group(d)
    reply = d.join("g", ids["b"], ticket="j", client_id="b", protocols=(("roundrobin", b""),))
    assert (reply["error_code"], reply["member_id"]) == (E.inconsistent_group_protocol, ids["b"])
    assert d.group().state is STABLE


# -- §3.6 initial-rebalance delay ----------------------------------------------------------------------

def test_initial_rebalance_waits_the_delay_even_when_everyone_has_joined(d):
    new_member(d, "g", "a")
    d.advance(2999)
    assert d.group().state is PREPARING_REBALANCE
    d.advance(1)
    assert d.group().state is COMPLETING_REBALANCE


def test_member_arriving_within_a_window_extends_the_delay_by_another_window(d):
    start = d.now
    new_member(d, "g", "a")
    d.advance(1000)
    new_member(d, "g", "b")
    d.advance(2000)  # t=3000: the first window ends, b arrived in it
    assert d.group().state is PREPARING_REBALANCE
    d.advance(2999)
    assert d.group().state is PREPARING_REBALANCE
    d.advance(1)
    assert d.group().state is COMPLETING_REBALANCE
    assert d.now - start == 6000


def test_initial_delay_chain_is_bounded_by_the_rebalance_timeout(d):
    start = d.now
    new_member(d, "g", "m0", rebalance_timeout_ms=10_000)  # windows: 3000, 3000, 3000, then the rest (1000)
    for name, at in (("m1", 1000), ("m2", 5000), ("m3", 8000), ("m4", 9500)):
        d.advance(start + at - d.now)
        new_member(d, "g", name, rebalance_timeout_ms=10_000)
        assert d.group().state is PREPARING_REBALANCE
    d.advance(start + 9999 - d.now)
    assert d.group().state is PREPARING_REBALANCE
    d.advance(1)
    assert d.group().state is COMPLETING_REBALANCE
    assert len(d.group().members) == 5


def test_initial_delay_with_rebalance_timeout_below_the_delay_ends_after_one_window(d):
    new_member(d, "g", "a", rebalance_timeout_ms=2000)
    d.advance(1000)
    new_member(d, "g", "b", rebalance_timeout_ms=2000)
    d.advance(2000)
    assert d.group().state is COMPLETING_REBALANCE


def test_initial_delay_follows_the_setting(clock):
    d = Driver(GroupSettings(initial_rebalance_delay_ms=500), clock)
    new_member(d, "g", "a")
    d.advance(500)
    assert d.group().state is COMPLETING_REBALANCE


def test_initial_rebalance_does_not_complete_early_when_a_member_leaves(d):
    a = new_member(d, "g", "a")
    b = new_member(d, "g", "b")
    d.advance(1000)
    d.leave("g", b)
    assert d.group().state is PREPARING_REBALANCE
    assert "join-a" not in d.replies


def test_later_rebalance_completes_as_soon_as_everyone_has_joined(d):
    ids = preparing_group(d)
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert d.group().state is COMPLETING_REBALANCE
    assert d.replies["rejoin-a"]["generation_id"] == 2


# -- §3.7 join completion --------------------------------------------------------------------------------

def test_later_rebalance_waits_at_most_the_rebalance_timeout_for_members_to_rejoin(d):
    ids = preparing_group(d, session_timeout_ms=30_000)
    d.advance(19_999)
    assert d.group().state is PREPARING_REBALANCE
    d.advance(1)
    g = d.group()
    assert (g.state, g.generation, list(g.members)) == (COMPLETING_REBALANCE, 2, [ids["a"]])


def test_dynamic_member_that_did_not_rejoin_is_removed_at_join_completion(d):
    ids = preparing_group(d, session_timeout_ms=30_000)
    d.advance(20_000)
    assert ids["b"] not in d.group().members


def test_static_member_that_did_not_rejoin_is_kept_at_join_completion(d):
    ids = stable_group(d, static=True, session_timeout_ms=30_000)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", instance_id="a-instance")
    d.advance(20_000)
    g = d.group()
    assert (g.state, g.generation) == (COMPLETING_REBALANCE, 2)
    assert set(g.members) == {ids["a"], ids["b"]}
    assert g.members[ids["b"]].protocols == (("range", b"range-meta"),)
    assert g.pending_sync == {ids["a"], ids["b"]}


def test_join_completion_waits_while_only_static_members_that_did_not_rejoin_remain(d):
    ids = stable_group(d, static=True, session_timeout_ms=60_000)
    d.join("g", ids["a"], ticket="rejoin-a", client_id="a", instance_id="a-instance")
    d.leave("g", ids["a"])  # (rebalance already in progress; b alone has not re-joined)
    d.advance(20_000)
    g = d.group()
    assert (g.state, g.generation) == (PREPARING_REBALANCE, 1)
    assert d.timers[("join", "g")] == d.now + 20_000


def test_join_replies_carry_the_new_generation_and_the_member_list_only_for_the_leader(d):
    ids = completing_group(d, names=("a", "b"))
    leader, follower = d.replies["join-a"], d.replies["join-b"]
    assert (leader["generation_id"], leader["leader"], leader["protocol_type"], leader["protocol_name"]) == (
        1, ids["a"], "consumer", "range")
    assert leader["members"] == [
        {"member_id": ids["a"], "group_instance_id": None, "metadata": b"range-meta"},
        {"member_id": ids["b"], "group_instance_id": None, "metadata": b"range-meta"}]
    assert (follower["leader"], follower["members"], follower["skip_assignment"]) == (ids["a"], [], False)


def test_join_completion_restarts_every_session_with_its_session_timeout(d):
    ids = completing_group(d, session_timeout_ms=12_000)
    g = d.group()
    assert all(m.deadline == d.now + 12_000 and not m.is_new for m in g.members.values())


# -- §3.8 protocol vote and leader election ---------------------------------------------------------

def test_protocol_with_most_votes_among_common_protocols_is_selected(d):
    new_member(d, "g", "a", protocols=(("range", b""), ("roundrobin", b"")))
    new_member(d, "g", "b", protocols=(("roundrobin", b""), ("range", b"")))
    new_member(d, "g", "c", protocols=(("roundrobin", b""), ("range", b"")))
    d.advance_until(lambda: d.group().state is COMPLETING_REBALANCE)
    assert d.group().protocol_name == "roundrobin"


def test_protocol_not_listed_by_every_member_is_not_a_candidate(d):
    new_member(d, "g", "a", protocols=(("sticky", b""), ("range", b"")))
    new_member(d, "g", "b", protocols=(("sticky", b""), ("range", b"")))
    new_member(d, "g", "c", protocols=(("range", b""),))
    d.advance_until(lambda: d.group().state is COMPLETING_REBALANCE)
    assert d.group().protocol_name == "range"


@pytest.mark.parametrize("first, expected", [("range", "range"), ("roundrobin", "roundrobin")])
def test_tied_vote_goes_to_the_protocol_voted_first_in_join_order(d, first, expected):
    other = "roundrobin" if first == "range" else "range"
    new_member(d, "g", "a", protocols=((first, b""), (other, b"")))
    new_member(d, "g", "b", protocols=((other, b""), (first, b"")))
    d.advance_until(lambda: d.group().state is COMPLETING_REBALANCE)
    assert d.group().protocol_name == expected


def test_first_member_added_is_the_leader(d):
    ids = completing_group(d, names=("b", "a"))
    assert d.group().leader_id == ids["b"]


def test_leader_leaving_hands_leadership_to_the_first_remaining_member_in_join_order(d):
    ids = stable_group(d, names=("a", "b", "c"))
    d.leave("g", ids["a"])
    assert d.group().leader_id == ids["b"]


def test_leader_that_did_not_rejoin_is_replaced_at_join_completion_by_a_member_that_did(d):
    ids = stable_group(d, names=("a", "b", "c"), static=True, session_timeout_ms=30_000)
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b", instance_id="b-instance",
           protocols=(("range", b"new"),))
    d.join("g", ids["c"], ticket="rejoin-c", client_id="c", instance_id="c-instance")
    d.advance(20_000)  # a (static, the leader) never re-joins and is kept
    g = d.group()
    assert ids["a"] in g.members
    assert g.leader_id == ids["b"]
    assert [m["member_id"] for m in d.replies["rejoin-b"]["members"]] == [ids["a"], ids["b"], ids["c"]]
    assert d.replies["rejoin-c"]["leader"] == ids["b"]


def test_current_leader_that_rejoined_stays_leader(d):
    ids = preparing_group(d, names=("a", "b"))
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert d.replies["rejoin-b"]["leader"] == ids["a"]


# -- parked joins answered on removal (§3.12) ----------------------------------------------------------

def test_parked_join_of_a_member_that_leaves_is_answered_unknown_member_id(d):
    ids = preparing_group(d, names=("a", "b", "c"))
    d.leave("g", ids["a"])
    reply = d.replies["rejoin-a"]
    assert (reply["error_code"], reply["member_id"], reply["generation_id"]) == (E.unknown_member_id, "", -1)
