"""Spec §5: Heartbeat validation, session timers (§5.2) and member expiry (§5.3). Timers are lazy:
a heartbeat only moves the member's deadline; the armed timer fires, sees the later deadline and
re-arms."""

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

from .driver import E, completing_group, preparing_group, stable_group

# -- §5.1 validation ---------------------------------------------------------------------------------


def test_heartbeat_for_unknown_group_is_unknown_member_id(d):
    assert d.heartbeat("nope", "a-1", 1) == E.unknown_member_id


def test_heartbeat_with_empty_group_id_is_invalid_group_id(d):
    assert d.heartbeat("", "a-1", 1) == E.invalid_group_id


def test_heartbeat_from_unknown_member_is_unknown_member_id(d):
    stable_group(d)
    assert d.heartbeat("g", "stranger", 1) == E.unknown_member_id


def test_heartbeat_with_another_generation_is_illegal_generation(d):
    ids = stable_group(d)
    assert d.heartbeat("g", ids["b"], 0) == E.illegal_generation


def test_heartbeat_with_instance_id_of_another_member_is_fenced_instance_id(d):
    ids = stable_group(d, static=True)
    assert d.heartbeat("g", ids["a"], 1, "b-instance") == E.fenced_instance_id


def test_heartbeat_with_unknown_instance_id_is_unknown_member_id(d):
    ids = stable_group(d, static=True)
    assert d.heartbeat("g", ids["a"], 1, "c-instance") == E.unknown_member_id


def test_heartbeat_with_a_pending_member_id_is_unknown_member_id(d):
    stable_group(d)
    pending = d.join("g", ticket="join-c:id", client_id="c")["member_id"]
    assert d.heartbeat("g", pending, -1) == E.unknown_member_id


# -- §5.2 / §5.3 liveness --------------------------------------------------------------------------

def test_member_expires_one_session_timeout_after_its_last_heartbeat(d):
    ids = stable_group(d)
    d.advance(7000)
    d.heartbeat("g", ids["b"], 1)
    d.heartbeat("g", ids["a"], 1)
    last = d.now
    d.advance(9000)
    d.heartbeat("g", ids["a"], 1)
    d.advance(last + 9999 - d.now)
    assert ids["b"] in d.group().members
    d.advance(1)
    assert ids["b"] not in d.group().members
    assert d.group().state is PREPARING_REBALANCE


def test_heartbeats_keep_a_member_alive_across_many_session_timeouts(d):
    ids = stable_group(d)
    for _ in range(40):  # 40 × 5 s = 20 session timeouts
        d.advance(5000)
        assert d.heartbeat("g", ids["a"], 1) == E.none
        assert d.heartbeat("g", ids["b"], 1) == E.none
    g = d.group()
    assert (g.state, g.generation, len(g.members)) == (STABLE, 1, 2)


def test_early_session_timer_rearms_for_the_moved_deadline(d):
    ids = stable_group(d)
    key = ("session", "g", ids["b"])
    first = d.timers[key]
    d.advance(first - d.now - 1)
    d.heartbeat("g", ids["b"], 1)
    d.heartbeat("g", ids["a"], 1)
    d.advance(1)
    assert d.timers[key] == d.group().members[ids["b"]].deadline == first + 9999


def test_expiry_of_member_with_parked_join_is_ignored(d):
    ids = preparing_group(d, session_timeout_ms=10_000)  # a's JoinGroup is parked
    a = d.group().members[ids["a"]]
    for _ in range(3):  # b stays alive; a sends nothing while its join is parked
        d.advance(5000)
        d.heartbeat("g", ids["b"], 1)
    assert d.now > a.deadline
    assert ids["a"] in d.group().members
    assert d.group().state is PREPARING_REBALANCE


def test_session_is_rearmed_at_join_completion_after_an_ignored_expiry(d):
    ids = preparing_group(d, session_timeout_ms=10_000)
    for _ in range(3):
        d.advance(5000)
        d.heartbeat("g", ids["b"], 1)
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    assert d.group().state is COMPLETING_REBALANCE
    assert d.timers[("session", "g", ids["a"])] == d.now + 10_000


def test_expiry_of_member_with_parked_sync_is_ignored(d):
    ids = completing_group(d)
    d.sync("g", ids["b"], 1, ticket="sync-b")
    for _ in range(3):
        d.advance(5000)
        d.heartbeat("g", ids["a"], 1)
    g = d.group()
    assert ids["b"] in g.members
    assert g.state is COMPLETING_REBALANCE
    assert "sync-b" not in d.replies


def test_new_member_with_parked_join_expires_after_the_new_member_join_timeout(d):
    ids = preparing_group(d, session_timeout_ms=30_000, rebalance_timeout_ms=600_000)
    d.join("g", ticket="join-c", client_id="c", version=3, rebalance_timeout_ms=600_000)
    for _ in range(59):
        d.advance(5000)
        d.heartbeat("g", ids["b"], 1)
    assert "c-3" in d.group().members
    d.advance(5000)  # 300 s after c joined
    assert "c-3" not in d.group().members
    reply = d.replies["join-c"]
    assert (reply["error_code"], reply["member_id"]) == (E.unknown_member_id, "")
    assert d.group().state is PREPARING_REBALANCE


def test_member_expiring_in_preparing_rebalance_completes_the_join_if_everyone_else_joined(d):
    ids = preparing_group(d, names=("a", "b", "c"))
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    d.advance(10_000)  # c never re-joins nor heartbeats
    g = d.group()
    assert (g.state, g.generation) == (COMPLETING_REBALANCE, 2)
    assert ids["c"] not in g.members


def test_static_member_is_removed_by_session_expiry(d):
    ids = stable_group(d, static=True)
    d.advance(9000)
    d.heartbeat("g", ids["a"], 1, "a-instance")
    d.advance(1000)
    g = d.group()
    assert ids["b"] not in g.members
    assert "b-instance" not in g.static_members
    assert g.state is PREPARING_REBALANCE


def test_last_member_expiring_makes_the_group_empty(d):
    stable_group(d, names=("a",))
    d.advance(10_000)
    g = d.group()
    assert (g.state, g.generation, g.members) == (EMPTY, 2, {})
    d.assert_replay_matches()
