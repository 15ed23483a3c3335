"""Fault injection's two core operations (coordinator/core/partition.py): an operator's rebalance and session
expiry take the transitions a join and a session timer take, write through the one mutation path, and
leave a log that replays to the same state."""

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE
from groupd.coordinator.core.partition import GroupSettings

from .driver import Driver, E, empty_group, stable_group
from .test_consumer_heartbeat import TOPICS, assert_replay_matches, group, hb, join, owned

# -- classic ------------------------------------------------------------------------------------


def test_forced_rebalance_of_a_stable_group_answers_heartbeats_rebalance_in_progress(d):
    ids = stable_group(d)
    assert d.force_rebalance("g") is E.none
    assert d.group().state is PREPARING_REBALANCE
    assert d.heartbeat("g", ids["a"], 1) == E.rebalance_in_progress
    started = [e for e in d.events if type(e).__name__ == "RebalanceStarted"]
    assert started[-1].reason == "forced"


def test_forced_rebalance_completes_with_a_new_generation_once_members_rejoin(d):
    ids = stable_group(d)
    d.force_rebalance("g")
    d.join("g", ids["a"], ticket="ja", client_id="a")
    d.join("g", ids["b"], ticket="jb", client_id="b")
    assert d.group().state is COMPLETING_REBALANCE and d.group().generation == 2
    assert d.replies["ja"]["generation_id"] == 2


def test_forced_rebalance_of_an_unknown_or_memberless_group(d):
    assert d.force_rebalance("nope") is E.group_id_not_found
    empty_group(d)
    assert d.force_rebalance("g") is E.none
    assert d.group().state is EMPTY


def test_forced_expiry_removes_the_member_and_rebalances(d):
    ids = stable_group(d)
    assert d.expire_members("g", [ids["b"]]) is E.none
    assert ids["b"] not in d.group().members
    assert d.group().state is PREPARING_REBALANCE
    assert d.heartbeat("g", ids["b"], 1) == E.unknown_member_id
    expired = [e for e in d.events if type(e).__name__ == "MemberExpired"]
    assert [(e.member_id, e.reason) for e in expired] == [(ids["b"], "forced")]


def test_forced_expiry_of_all_members_empties_the_group_durably(d):
    stable_group(d)
    assert d.expire_members("g") is E.none
    assert d.group().state is EMPTY and not d.group().members and d.group().generation == 2
    fresh = d.replay()
    assert fresh.groups["g"].generation == 2 and not fresh.groups["g"].members


def test_forced_expiry_of_an_unknown_member_changes_nothing(d):
    ids = stable_group(d)
    assert d.expire_members("g", [ids["a"], "stranger"]) is E.unknown_member_id
    assert set(d.group().members) == set(ids.values())
    assert d.expire_members("nope", None) is E.group_id_not_found


# -- consumer (KIP-848) -------------------------------------------------------------------------


def test_forced_rebalance_of_a_consumer_group_bumps_the_epoch():
    d = Driver(GroupSettings())  # not the classic fixture: its teardown compares classic groups only
    d.consumer_heartbeat(join("a"), TOPICS)
    epoch = group(d).group_epoch
    assert d.force_rebalance("g") is E.none
    assert group(d).group_epoch == epoch + 1
    r = d.consumer_heartbeat(hb("a", epoch, owned(0, 1, 2, 3)), TOPICS)
    assert (r["error_code"], r["member_epoch"]) == (E.none, epoch + 1)
    assert_replay_matches(d)


def test_forced_expiry_fences_a_consumer_member():
    d = Driver(GroupSettings())
    d.consumer_heartbeat(join("a"), TOPICS)
    d.consumer_heartbeat(join("b"), TOPICS)
    assert d.expire_members("g", ["b"]) is E.none
    assert set(group(d).members) == {"a"}
    assert d.consumer_heartbeat(hb("b", 2), TOPICS)["error_code"] == E.unknown_member_id
    fenced = [e for e in d.events if type(e).__name__ == "ConsumerMemberFenced"]
    assert [(e.member_id, e.reason) for e in fenced] == [("b", "forced")]
    assert_replay_matches(d)
