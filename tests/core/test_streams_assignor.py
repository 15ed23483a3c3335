"""The sticky task assignor of streams groups, by its properties over many random groups: every task
active exactly once, active counts balanced within one, standbys never on the active's process nor
twice on one process (as many as the processes allow), and stickiness: a member that stays keeps
its tasks when balance allows."""

import random

import pytest

from groupd.coordinator.core.streams.assignor import MemberSpec, assign
from groupd.coordinator.core.streams.tasks import EMPTY, Tasks, as_set


def random_group(rng):
    processes = [f"p{i}" for i in range(rng.randint(1, 5))]
    members = {f"m{i}": rng.choice(processes) for i in range(rng.randint(1, 9))}
    subtopologies = {str(s): rng.randint(0, 12) for s in range(rng.randint(1, 4))}
    return members, subtopologies


def specs(members, previous=None):
    return {m: MemberSpec(p, (previous or {}).get(m, EMPTY)) for m, p in members.items()}


@pytest.mark.parametrize("seed", range(200))
def test_every_task_once_balanced_and_standbys_apart(seed):
    rng = random.Random(seed)
    members, subs = random_group(rng)
    standbys = rng.randint(0, 2)
    out = assign(specs(members), subs, standbys)
    all_tasks = {(s, p) for s, n in subs.items() for p in range(n)}
    active = [t for a in out.values() for t in as_set(a.active)]
    assert sorted(active) == sorted(all_tasks)
    counts = [len(as_set(a.active)) for a in out.values()]
    assert max(counts) - min(counts) <= 1
    processes = set(members.values())
    for task in all_tasks:
        owner = next(m for m, a in out.items() if task in as_set(a.active))
        holders = [members[m] for m, a in out.items() if task in as_set(a.standby)]
        assert members[owner] not in holders
        assert len(holders) == len(set(holders))
        assert len(holders) == min(standbys, len(processes) - 1)


@pytest.mark.parametrize("seed", range(100))
def test_a_member_that_stays_keeps_its_tasks(seed):
    rng = random.Random(seed)
    members, subs = random_group(rng)
    first = assign(specs(members), subs, 0)
    # one member leaves: everyone else keeps what they had
    gone = rng.choice(sorted(members))
    rest = {m: p for m, p in members.items() if m != gone}
    if not rest:
        return
    second = assign(specs(rest, first), subs, 0)
    for m in rest:
        assert as_set(first[m].active) <= as_set(second[m].active)


def test_a_new_member_takes_only_what_balance_needs():
    members = {"a": "p1", "b": "p2"}
    first = assign(specs(members), {"0": 4}, 0)
    second = assign(specs({**members, "c": "p3"}, first), {"0": 4}, 0)
    moved = sum(1 for m in members if as_set(first[m].active) - as_set(second[m].active))
    assert len(as_set(second["c"].active)) == 1 and moved == 1


def test_a_task_whose_member_left_goes_to_a_member_of_its_process():
    first = {"a": Tasks({"0": frozenset({0, 1})}), "b": Tasks({"0": frozenset({2})}),
             "c": Tasks({"0": frozenset({3})})}
    out = assign({"a2": MemberSpec("p1", EMPTY), "b": MemberSpec("p1", first["b"]),
                  "c": MemberSpec("p2", first["c"])}, {"0": 4}, 0)
    assert as_set(out["a2"].active) == {("0", 0), ("0", 1)}  # a's tasks stay on a's process
    assert as_set(out["b"].active) == {("0", 2)} and as_set(out["c"].active) == {("0", 3)}


def test_each_subtopology_spreads_over_the_members():
    out = assign(specs({"a": "p1", "b": "p2"}), {"0": 2, "1": 2}, 1)
    for m in ("a", "b"):
        assert {s for s, _ in as_set(out[m].active)} == {"0", "1"}
        assert {s for s, _ in as_set(out[m].standby)} == {"0", "1"}


def test_a_previous_standby_stays_only_while_its_member_is_below_the_quota():
    # streams_standby_replica_test.py's third instance: 6 tasks, 1 standby each; a and b held 3 active and the
    # other 3 as standbys. Kafka keeps a standby on its previous holder only while the holder's active plus
    # standby count is below ceil(12 / 3) = 4, so c, new, gets standbys too: 2 active and 2 standbys each.
    first = {"a": Tasks({"0": frozenset({0, 1, 2})}, {"0": frozenset({3, 4, 5})}),
             "b": Tasks({"0": frozenset({3, 4, 5})}, {"0": frozenset({0, 1, 2})})}
    out = assign({"a": MemberSpec("p1", first["a"]), "b": MemberSpec("p2", first["b"]),
                  "c": MemberSpec("p3", EMPTY)}, {"0": 6}, 1)
    assert {m: (len(as_set(t.active)), len(as_set(t.standby))) for m, t in out.items()} == \
        {"a": (2, 2), "b": (2, 2), "c": (2, 2)}
