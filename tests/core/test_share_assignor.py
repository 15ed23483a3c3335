"""The `simple` share-group assignor (spec §2.4, Kafka's SimpleAssignor), property style over many
member and partition counts: every subscribed partition is assigned, the sharing and the quotas are
Kafka's, and previous targets are kept where they fit as members join and leave."""

import math
import random
import uuid

import pytest

from groupd.coordinator.core.share.assignor import assign

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def homogeneous(members: int, topics=(T1,)):
    return {f"member-{i:02d}": frozenset(topics) for i in range(members)}


def holders(target, topic, partition):
    return {m for m, a in target.items() if partition in a.get(topic, ())}


def sizes(target):
    return sorted(sum(len(ps) for ps in a.values()) for a in target.values())


CASES = [(m, p) for m in range(1, 13) for p in range(1, 13)]


@pytest.mark.parametrize("members, partitions", CASES)
def test_homogeneous_every_partition_shared_as_kafka(members, partitions):
    target = assign(homogeneous(members), {T1: partitions}, {})
    sharing = math.ceil(members / partitions)
    for p in range(partitions):
        assert len(holders(target, T1, p)) == sharing  # ceil(M/P) members each (1 when P ≥ M)
    # the quotas differ by at most one and sum to S·P
    assert sizes(target)[-1] - sizes(target)[0] <= 1
    assert sum(sizes(target)) == sharing * partitions
    assert all(sizes(target))  # nobody idles


@pytest.mark.parametrize("members, partitions, expected", [
    (2, 1, [1, 1]), (5, 1, [1, 1, 1, 1, 1]), (1, 4, [4]), (2, 3, [1, 2]), (3, 2, [1, 1, 2])])
def test_spec_worked_cases(members, partitions, expected):
    assert sizes(assign(homogeneous(members), {T1: partitions}, {})) == expected


@pytest.mark.parametrize("seed", range(60))
def test_sticky_across_a_join_and_a_leave(seed):
    """Each member that stays keeps what it had, up to its new quota, but for at most one partition
    (the builders' order of revocation)."""
    rng = random.Random(seed)
    members, partitions = rng.randint(1, 8), rng.randint(1, 16)
    subs = homogeneous(members)
    before = assign(subs, {T1: partitions}, {})
    gone = rng.choice(sorted(subs))
    for changed in ({**subs, "member-zz": frozenset({T1})}, {m: s for m, s in subs.items() if m != gone}):
        if not changed:
            continue
        after = assign(changed, {T1: partitions}, before)
        sharing = math.ceil(len(changed) / partitions)
        # never over-shared, never unassigned; one short of S is Kafka's tolerated case (no unfilled
        # member may take a partition it already has)
        assert all(1 <= len(holders(after, T1, p)) <= sharing for p in range(partitions))
        for m in set(changed) & set(subs):
            had, has = before[m].get(T1, frozenset()), after[m].get(T1, frozenset())
            assert len(had & has) >= min(len(had), len(has)) - 1


def test_same_inputs_same_target():
    a = assign(homogeneous(5), {T1: 7}, {})
    assert assign(homogeneous(5), {T1: 7}, {}) == a
    assert assign(homogeneous(5), {T1: 7}, a) == a  # a stable target stays


def test_heterogeneous_balances_each_topic_over_its_subscribers():
    subs = {"m1": frozenset({T1}), "m2": frozenset({T2}), "m3": frozenset({T1, T2})}
    target = assign(subs, {T1: 4, T2: 4}, {})
    assert {m: len(a.get(T1, ())) for m, a in target.items()} == {"m1": 2, "m2": 0, "m3": 2}
    assert {m: len(a.get(T2, ())) for m, a in target.items()} == {"m1": 0, "m2": 2, "m3": 2}
    for t in (T1, T2):
        assert all(len(holders(target, t, p)) == 1 for p in range(4))


@pytest.mark.parametrize("seed", range(30))
def test_every_subscribed_partition_assigned_to_subscribers_only(seed):
    rng = random.Random(seed)
    topics = {T1: rng.randint(1, 6), T2: rng.randint(1, 6), T3: rng.randint(1, 6)}
    subs = {f"m{i}": frozenset(rng.sample(sorted(topics), rng.randint(1, 3))) for i in range(rng.randint(1, 9))}
    target = assign(subs, topics, {})
    same = len(set(subs.values())) == 1  # the homogeneous builder shares over all partitions at once
    for t, n in topics.items():
        subscribers = [m for m, s in subs.items() if t in s]
        if not subscribers:
            continue
        total = sum(n for t, n in topics.items() if t in next(iter(subs.values()))) if same else n
        sharing = math.ceil(len(subscribers) / total)
        for p in range(n):
            assert holders(target, t, p) <= set(subscribers)
            assert len(holders(target, t, p)) == sharing
    # an unsubscribe takes the topic away from that member on the next computation
    member = sorted(subs)[0]
    if len(subs[member]) > 1:
        dropped = sorted(subs[member])[0]
        again = assign({**subs, member: subs[member] - {dropped}}, topics, target)
        assert dropped not in again[member]


def test_no_partitions_no_assignment():
    assert assign(homogeneous(3), {T1: 0}, {}) == {f"member-{i:02d}": {} for i in range(3)}
    assert assign({}, {T1: 3}, {}) == {}
