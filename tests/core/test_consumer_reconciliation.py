"""Reconciliation towards the target (spec §4.3, the worked example of §4.4) and the epoch check of a
regular heartbeat (spec §2.6)."""

import uuid

import pytest

from groupd.coordinator.core.consumer.assignors import MemberSubscription, TopicMetadata, uniform
from groupd.coordinator.core.consumer.reconciliation import (
    NEW_MEMBER,
    FencedMemberEpoch,
    MemberAssignment,
    MemberState,
    reconcile,
    validate_member_epoch,
)

X, Y = uuid.UUID(int=10), uuid.UUID(int=11)
STABLE, UNREVOKED, UNRELEASED, UNKNOWN = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                                          MemberState.UNRELEASED_PARTITIONS, MemberState.UNKNOWN)


def xs(*partitions):
    return {X: frozenset(partitions)} if partitions else {}


def member(epoch, state=STABLE, assigned=None, pending=None, previous=None):
    return MemberAssignment(epoch, epoch - 1 if previous is None else previous, state, assigned or {}, pending or {})


def free(topic_id, partition):
    return -1


def held_by(epoch, **partitions_by_topic):
    """A partition-epoch index in which the given partitions of X are held at `epoch`."""
    held = set(partitions_by_topic.get("x", ()))
    return lambda topic_id, p: epoch if topic_id == X and p in held else -1


def owned(*partitions):
    return [(X, list(partitions))]


# ---------------------------------------------------------------------------------------------
# STABLE


def test_stable_at_the_target_epoch_is_left_alone():
    m = member(3, assigned=xs(0, 1))
    assert reconcile(m, 3, xs(0, 1, 2), None, free) is m


def test_stable_behind_the_target_with_free_partitions_takes_them_and_the_target_epoch():
    m = member(3, assigned=xs(0), previous=2)
    assert reconcile(m, 5, xs(0, 1), None, free) == MemberAssignment(5, 3, STABLE, xs(0, 1), {})


def test_partitions_still_held_by_another_member_are_unreleased():
    m = member(3, assigned=xs(0))
    out = reconcile(m, 4, xs(0, 1, 2), None, held_by(3, x={2}))
    assert out == MemberAssignment(4, 3, UNRELEASED, xs(0, 1), {})


def test_nothing_to_add_but_something_unreleased_still_moves_to_the_target_epoch():
    m = member(3, assigned=xs(0))
    out = reconcile(m, 4, xs(0, 1), None, held_by(3, x={1}))
    assert out == MemberAssignment(4, 3, UNRELEASED, xs(0), {})


def test_revocation_comes_first_and_holds_the_epoch_back():
    m = member(3, assigned=xs(0, 1, 2))
    out = reconcile(m, 4, {Y: frozenset({0}), X: frozenset({0})}, None, free)
    # Y-0 is free, but nothing is added while are still to be revoked
    assert out == MemberAssignment(3, 3, UNREVOKED, xs(0), xs(1, 2))


def test_revocation_the_client_already_did_needs_no_wait():
    m = member(3, assigned=xs(0, 1, 2))
    out = reconcile(m, 4, xs(0), owned(0), free)
    assert out == MemberAssignment(4, 3, STABLE, xs(0), {})


def test_revocation_is_awaited_when_the_client_reports_owning_a_revoked_partition():
    m = member(3, assigned=xs(0, 1))
    assert reconcile(m, 4, xs(0), owned(0, 1), free).state is UNREVOKED


def test_a_topic_dropped_from_the_target_is_revoked_whole():
    m = member(2, assigned={X: frozenset({0}), Y: frozenset({0, 1})})
    out = reconcile(m, 3, xs(0), None, free)
    assert out == MemberAssignment(2, 2, UNREVOKED, xs(0), {Y: frozenset({0, 1})})


# ---------------------------------------------------------------------------------------------
# UNREVOKED_PARTITIONS


def test_unrevoked_waits_while_ownership_is_unknown():
    m = member(3, UNREVOKED, assigned=xs(0), pending=xs(1))
    assert reconcile(m, 4, xs(0), None, free) is m


def test_unrevoked_waits_while_the_client_still_owns_a_pending_partition():
    m = member(3, UNREVOKED, assigned=xs(0), pending=xs(1, 2))
    assert reconcile(m, 4, xs(0), owned(0, 2), free) is m


def test_unrevoked_moves_on_once_the_client_released_everything_pending():
    m = member(3, UNREVOKED, assigned=xs(0), pending=xs(1), previous=3)
    assert reconcile(m, 4, xs(0), owned(0), free) == MemberAssignment(4, 3, STABLE, xs(0), {})


def test_unrevoked_with_a_further_revocation_advances_one_epoch_only():
    m = member(3, UNREVOKED, assigned=xs(0, 1), pending=xs(2), previous=3)
    # target moved on to epoch 6, which also takes X-1 away
    out = reconcile(m, 6, xs(0), [(X, [1])], free)
    assert out == MemberAssignment(4, 3, UNREVOKED, xs(0), xs(1))


def test_unrevoked_epoch_never_passes_the_target_epoch():
    m = member(4, UNREVOKED, assigned=xs(0, 1), pending=xs(2), previous=4)
    out = reconcile(m, 4, xs(0), owned(1), free)
    assert out.member_epoch == 4 and out.state is UNREVOKED


def test_a_partition_pending_revocation_that_comes_back_is_not_unreleased():
    # the index still shows the member's own epoch on X-1 (it held it pending revocation)
    m = member(3, UNREVOKED, assigned=xs(0), pending=xs(1), previous=3)
    out = reconcile(m, 4, xs(0, 1), owned(0), held_by(3, x={0, 1}))
    assert out == MemberAssignment(4, 3, STABLE, xs(0, 1), {})


# ---------------------------------------------------------------------------------------------
# UNRELEASED_PARTITIONS and UNKNOWN


def test_unreleased_picks_up_partitions_released_meanwhile():
    m = member(4, UNRELEASED, assigned=xs(0), previous=3)
    assert reconcile(m, 4, xs(0, 1), None, free) == MemberAssignment(4, 4, STABLE, xs(0, 1), {})


def test_unreleased_stays_while_the_partition_is_still_held():
    m = member(4, UNRELEASED, assigned=xs(0), previous=4)
    assert reconcile(m, 4, xs(0, 1), None, held_by(3, x={1})) is m


def test_unreleased_behind_a_newer_target_revokes_first():
    m = member(4, UNRELEASED, assigned=xs(0, 1), previous=3)
    out = reconcile(m, 5, xs(0, 2), None, free)
    assert out == MemberAssignment(4, 4, UNREVOKED, xs(0), xs(1))


@pytest.mark.parametrize("reported", [None, owned(0), [(X, [])]])
def test_unknown_state_is_fenced_unless_the_member_reports_owning_nothing(reported):
    m = member(4, UNKNOWN, assigned=xs(0))
    with pytest.raises(FencedMemberEpoch):
        reconcile(m, 5, xs(0), reported, free)


def test_unknown_state_reporting_nothing_reconciles_at_the_target_epoch():
    m = member(4, UNKNOWN, assigned=xs(0))
    assert reconcile(m, 5, xs(0, 1), [], free) == MemberAssignment(5, 4, STABLE, xs(0, 1), {})


def test_a_state_value_from_a_newer_format_reads_as_unknown():
    assert MemberState.from_value(1) is UNREVOKED
    assert MemberState.from_value(9) is UNKNOWN


# ---------------------------------------------------------------------------------------------
# The epoch check of a regular heartbeat (§2.6)


def test_the_current_epoch_is_accepted():
    validate_member_epoch(member(5, assigned=xs(0)), 5, None)


def test_a_newer_epoch_is_fenced():
    with pytest.raises(FencedMemberEpoch):
        validate_member_epoch(member(5), 6, owned())


def test_the_previous_epoch_with_a_subset_of_the_assignment_is_accepted():
    validate_member_epoch(member(5, assigned=xs(0, 1), previous=4), 4, owned(1))
    validate_member_epoch(member(5, assigned=xs(0, 1), previous=4), 4, [])


@pytest.mark.parametrize("reported", [None, owned(2), [(Y, [0])]])
def test_the_previous_epoch_owning_more_or_unknown_is_fenced(reported):
    with pytest.raises(FencedMemberEpoch):
        validate_member_epoch(member(5, assigned=xs(0, 1), previous=4), 4, reported)


def test_an_epoch_older_than_the_previous_one_is_fenced():
    with pytest.raises(FencedMemberEpoch):
        validate_member_epoch(member(5, assigned=xs(0), previous=4), 3, owned(0))


# ---------------------------------------------------------------------------------------------
# The worked example (§4.4): uniform, topic X with 4 partitions, members A then B


class Group:
    """Just enough of a group to drive the example: targets from the assignor, the partition-epoch
    index read from the members' current assignments (assigned and pending revocation)."""

    def __init__(self):
        self.topics = {X: TopicMetadata(X, "x", 4)}
        self.members: dict[str, MemberAssignment] = {}
        self.targets: dict[str, dict] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0

    def join(self, member_id):
        self.members[member_id] = NEW_MEMBER
        self.group_epoch += 1
        subs = {m: MemberSubscription(frozenset({X}), self.targets.get(m, {})) for m in self.members}
        self.targets = uniform(subs, self.topics)
        self.assignment_epoch = self.group_epoch

    def partition_epoch(self, topic_id, p):
        for m in self.members.values():
            for ps in (m.assigned_partitions, m.partitions_pending_revocation):
                if p in ps.get(topic_id, ()):
                    return m.member_epoch
        return -1

    def heartbeat(self, member_id, owned_partitions):
        self.members[member_id] = reconcile(self.members[member_id], self.assignment_epoch,
                                            self.targets[member_id], owned_partitions, self.partition_epoch)
        return self.members[member_id]


def test_worked_example_two_members_share_four_partitions():
    g = Group()
    # 1. A joins: everything is free
    g.join("A")
    assert g.heartbeat("A", []) == MemberAssignment(1, 0, STABLE, xs(0, 1, 2, 3), {})
    # 2. B joins: its target {2,3} is still held by A
    g.join("B")
    assert g.targets == {"A": xs(0, 1), "B": xs(2, 3)}
    assert g.heartbeat("B", []) == MemberAssignment(2, 0, UNRELEASED, {}, {})
    # 3. A heartbeats without reporting ownership: it must revoke {2,3} first, held at epoch 1
    a = g.heartbeat("A", None)
    assert (a.state, a.member_epoch, a.assigned_partitions, a.partitions_pending_revocation) == (
        UNREVOKED, 1, xs(0, 1), xs(2, 3))
    # 4. A revoked and says so: it reaches epoch 2 and 2, 3 are free
    assert g.heartbeat("A", owned(0, 1)) == MemberAssignment(2, 1, STABLE, xs(0, 1), {})
    assert g.partition_epoch(X, 2) == -1
    # 5. B picks them up; the group is stable at epoch 2
    assert g.heartbeat("B", None) == MemberAssignment(2, 2, STABLE, xs(2, 3), {})


# ---------------------------------------------------------------------------------------------
# Random runs: targets change under the members' feet, heartbeats come in any order


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

MEMBERS = ["A", "B", "C"]


def random_target(data, n_partitions):
    owner = data.draw(st.lists(st.sampled_from(MEMBERS + [None]), min_size=n_partitions, max_size=n_partitions))
    return {m: xs(*(p for p, o in enumerate(owner) if o == m)) for m in MEMBERS}


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_no_partition_is_ever_owned_by_two_clients_and_every_member_converges(data):
    n = data.draw(st.integers(1, 6))
    epoch, targets = 1, random_target(data, n)
    server = dict.fromkeys(MEMBERS, NEW_MEMBER)
    owns = {m: frozenset() for m in MEMBERS}  # what each consumer really owns right now
    received = {m: frozenset() for m in MEMBERS}  # the last assignment it was sent, not yet applied

    def partition_epoch(topic_id, p):
        holders = [s.member_epoch for s in server.values()
                   if p in s.assigned_partitions.get(topic_id, ()) or p in s.partitions_pending_revocation.get(topic_id, ())]
        assert len(holders) <= 1, "a partition is held by two members"
        return holders[0] if holders else -1

    def heartbeat(m, report):
        owned_now = [(X, sorted(owns[m]))] if report else None
        server[m] = reconcile(server[m], epoch, targets[m], owned_now, partition_epoch)
        received[m] = server[m].assigned_partitions.get(X, frozenset())  # the response is the full set
        assert server[m].member_epoch <= epoch

    def apply(m):  # the consumer revokes and takes what it was sent (its callbacks ran)
        owns[m] = received[m]
        owners = [p for c in owns.values() for p in c]
        assert len(owners) == len(set(owners)), "two consumers own the same partition"

    for _ in range(data.draw(st.integers(0, 40))):
        action = data.draw(st.sampled_from(["new target", "heartbeat", "apply"]))
        if action == "new target":
            epoch, targets = epoch + 1, random_target(data, n)
        elif action == "heartbeat":
            heartbeat(data.draw(st.sampled_from(MEMBERS)), data.draw(st.booleans()))
        else:
            apply(data.draw(st.sampled_from(MEMBERS)))
    for _ in range(3):  # then everyone applies what it got and heartbeats, reporting what it owns
        for m in MEMBERS:
            apply(m)
            heartbeat(m, True)
    for m in MEMBERS:
        assert (server[m].state, server[m].member_epoch) == (STABLE, epoch)
        assert server[m].assigned_partitions == targets[m]
