"""The server-side assignors (spec §3.3–3.4): properties over random groups, then examples in the
shape of Kafka's UniformHomogeneous/UniformHeterogeneous/RangeAssignor unit tests."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.coordinator.core.consumer.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    MemberSubscription,
    PartitionAssignorError,
    TopicMetadata,
    is_homogeneous,
    range_assignor,
    uniform,
)

T1, T2, T3, T4 = (uuid.UUID(int=i) for i in range(1, 5))


def topics_of(**counts_by_name):
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[name]: TopicMetadata(ids[name], name, n) for name, n in counts_by_name.items()}


def sub(*topic_ids, target=None, instance_id=None):
    return MemberSubscription(frozenset(topic_ids), target or {}, instance_id)


def tp(**partitions_by_topic):
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[name]: frozenset(ps) for name, ps in partitions_by_topic.items()}


def size(assignment):
    return sum(len(ps) for ps in assignment.values())


def includes(assignment, partitions):
    return all(ps <= assignment.get(t, frozenset()) for t, ps in partitions.items())


def owners(result):
    return {(t, p): m for m, a in result.items() for t, ps in a.items() for p in ps}


def with_targets(members, result):
    return {m: MemberSubscription(s.subscribed_topic_ids, result.get(m, {}), s.instance_id)
            for m, s in members.items()}


# ---------------------------------------------------------------------------------------------
# Random groups


@st.composite
def groups(draw, homogeneous=None, valid_targets=False):
    n_topics = draw(st.integers(1, 4))
    topic_ids = [uuid.UUID(int=i + 1) for i in range(n_topics)]
    topics = {t: TopicMetadata(t, f"t{i}", draw(st.integers(1, 9))) for i, t in enumerate(topic_ids)}
    n_members = draw(st.integers(1, 7))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    subset = st.frozensets(st.sampled_from(topic_ids))
    shared = draw(subset)
    members = {}
    taken = set()
    for i in range(n_members):
        subscribed = shared if homogeneous else draw(subset)
        target = {}
        for t in sorted(draw(st.frozensets(st.sampled_from(topic_ids)))):
            # random current targets: may overlap, name unsubscribed topics or vanished partitions
            # unless valid_targets asks for what a previous assignment could have produced
            ps = draw(st.frozensets(st.integers(0, 11), max_size=6))
            if valid_targets:
                ps = frozenset(p for p in ps if p < topics[t].num_partitions and (t, p) not in taken
                               and t in subscribed)
                taken |= {(t, p) for p in ps}
            if ps:
                target[t] = ps
        members[f"m{i}"] = MemberSubscription(subscribed, target)
    return members, topics


def assert_valid(members, topics, result):
    assert set(result) == set(members)
    seen = set()
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert topic_id in members[member_id].subscribed_topic_ids, "unsubscribed topic assigned"
            assert partitions, "empty partition sets are omitted"
            for p in partitions:
                assert 0 <= p < topics[topic_id].num_partitions
                assert (topic_id, p) not in seen, "partition assigned twice"
                seen.add((topic_id, p))
    subscribed = set().union(*(m.subscribed_topic_ids for m in members.values()))
    expected = {(t, p) for t in subscribed for p in range(topics[t].num_partitions)}
    assert seen == expected, "every subscribed partition is assigned"


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_every_subscribed_partition_is_assigned_exactly_once(name, group):
    members, topics = group
    assert_valid(members, topics, ASSIGNORS[name](members, topics))


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=100, deadline=None)
@given(group=groups(), data=st.data())
def test_the_target_does_not_depend_on_member_order(name, group, data):
    members, topics = group
    shuffled = dict(data.draw(st.permutations(list(members.items()))))
    assert ASSIGNORS[name](shuffled, topics) == ASSIGNORS[name](members, topics)


@settings(max_examples=150, deadline=None)
@given(group=groups(homogeneous=True))
def test_uniform_balances_homogeneous_groups_within_one(group):
    members, topics = group
    sizes = [size(a) for a in uniform(members, topics).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(group=groups(homogeneous=False))
def test_uniform_balances_members_with_identical_subscriptions_within_one(group):
    members, topics = group
    result = uniform(members, topics)
    by_subscription = {}
    for member_id, s in members.items():
        by_subscription.setdefault(s.subscribed_topic_ids, []).append(size(result[member_id]))
    for sizes in by_subscription.values():
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_range_balances_each_topic_within_one(group):
    members, topics = group
    result = range_assignor(members, topics)
    for topic_id in topics:
        sizes = [len(result[m].get(topic_id, ())) for m, s in members.items() if topic_id in s.subscribed_topic_ids]
        if sizes:
            assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=200, deadline=None)
@given(group=groups())
def test_a_settled_target_is_a_fixed_point(name, group):
    members, topics = group
    first = ASSIGNORS[name](members, topics)
    assert ASSIGNORS[name](with_targets(members, first), topics) == first


@st.composite
def balanced_groups(draw, per_topic):
    """A homogeneous group whose current targets are already balanced but dealt at random: all
    partitions shuffled and dealt round robin over the members in random order (per topic for
    range, whose balance is per topic; over the whole subscription for uniform)."""
    n_topics = draw(st.integers(1, 4))
    topic_ids = [uuid.UUID(int=i + 1) for i in range(n_topics)]
    topics = {t: TopicMetadata(t, f"t{i}", draw(st.integers(1, 9))) for i, t in enumerate(topic_ids)}
    member_ids = [f"m{i}" for i in range(draw(st.integers(2, 7)))]
    targets = {m: {} for m in member_ids}
    piles = ([[(t, p) for p in range(topics[t].num_partitions)] for t in topic_ids] if per_topic
             else [[(t, p) for t in topic_ids for p in range(topics[t].num_partitions)]])
    for pile in piles:
        dealers = draw(st.permutations(member_ids))
        for i, (t, p) in enumerate(draw(st.permutations(pile))):
            targets[dealers[i % len(dealers)]].setdefault(t, set()).add(p)
    members = {m: sub(*topic_ids, target={t: frozenset(ps) for t, ps in targets[m].items()}) for m in member_ids}
    return members, topics


@pytest.mark.parametrize("name,per_topic", [("uniform", False), ("range", True)])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_balanced_target_is_kept_as_it_is(name, per_topic, data):
    members, topics = data.draw(balanced_groups(per_topic))
    assert ASSIGNORS[name](members, topics) == {m: dict(s.target) for m, s in members.items()}


@pytest.mark.parametrize("name,per_topic", [("uniform", False), ("range", True)])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_member_leaving_moves_only_its_partitions(name, per_topic, data):
    members, topics = data.draw(balanced_groups(per_topic))
    leaver = data.draw(st.sampled_from(sorted(members)))
    stay = {m: s for m, s in members.items() if m != leaver}
    after = ASSIGNORS[name](stay, topics)
    for member_id, s in stay.items():
        assert includes(after[member_id], s.target), f"{member_id} lost a partition it could keep"


@settings(max_examples=200, deadline=None)
@given(group=groups(homogeneous=False, valid_targets=True), data=st.data())
def test_range_member_leaving_a_heterogeneous_group_moves_only_its_partitions(group, data):
    members, topics = group
    if len(members) < 2:
        return
    before = range_assignor(members, topics)
    leaver = data.draw(st.sampled_from(sorted(members)))
    stay = {m: s for m, s in with_targets(members, before).items() if m != leaver}
    after = range_assignor(stay, topics)
    for member_id in stay:
        assert includes(after[member_id], before[member_id])


@settings(max_examples=200, deadline=None)
@given(group=groups(homogeneous=True, valid_targets=True))
def test_uniform_keeps_what_balance_allows_when_a_member_joins(group):
    members, topics = group
    before = uniform(members, topics)
    joined = {**with_targets(members, before),
              "zz-new": sub(*next(iter(members.values())).subscribed_topic_ids)}
    after = uniform(joined, topics)
    total = sum(size(a) for a in before.values())
    floor = total // len(joined)
    for member_id in members:
        kept = sum(len(ps & after[member_id].get(t, frozenset())) for t, ps in before[member_id].items())
        assert kept >= min(size(before[member_id]), floor)


@settings(max_examples=200, deadline=None)
@given(group=groups(homogeneous=True, valid_targets=True))
def test_uniform_keeps_a_valid_current_target_up_to_the_quota(group):
    members, topics = group
    result = uniform(members, topics)
    total = sum(topics[t].num_partitions for t in next(iter(members.values())).subscribed_topic_ids)
    floor = total // len(members)
    for member_id, s in members.items():
        kept = sum(len(ps & result[member_id].get(t, frozenset())) for t, ps in s.target.items())
        assert kept >= min(size(s.target), floor)


# ---------------------------------------------------------------------------------------------
# Examples (after Kafka's assignor unit tests)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_one_member_with_no_subscription_gets_nothing(name):
    assert ASSIGNORS[name]({"a": sub()}, topics_of(t1=3)) == {"a": {}}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_no_members_no_assignment(name):
    assert ASSIGNORS[name]({}, topics_of(t1=3)) == {}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_subscription_to_a_topic_missing_from_metadata_is_an_error(name):
    with pytest.raises(PartitionAssignorError):
        ASSIGNORS[name]({"a": sub(T4)}, topics_of(t1=3))


def test_uniform_is_the_default_and_range_is_configured():
    assert DEFAULT_ASSIGNOR == "uniform"
    assert set(ASSIGNORS) == {"uniform", "range"}


def test_subscription_type():
    assert is_homogeneous({"a": sub(T1, T2), "b": sub(T2, T1)})
    assert not is_homogeneous({"a": sub(T1, T2), "b": sub(T1)})


def test_uniform_first_assignment_two_members_two_topics():
    topics = topics_of(t1=3, t3=2)
    result = uniform({"a": sub(T1, T3), "b": sub(T1, T3)}, topics)
    # 5 partitions over two members: walked in topic-id order, the first quota (3) goes to "a"
    assert result == {"a": tp(t1={0, 1, 2}), "b": tp(t3={0, 1})}


def test_uniform_first_assignment_one_member_gets_everything():
    result = uniform({"a": sub(T1, T3)}, topics_of(t1=3, t3=2))
    assert result == {"a": tp(t1={0, 1, 2}, t3={0, 1})}


def test_uniform_reassignment_of_an_unbalanced_previous_target():
    topics = topics_of(t1=3, t2=3)
    members = {"a": sub(T1, T2, target=tp(t1={0, 1, 2}, t2={0, 1})), "b": sub(T1, T2, target=tp(t2={2}))}
    result = uniform(members, topics)
    # a keeps its lowest three, gives up t2-1; b keeps t2-2 and takes the freed t2-0, t2-1
    assert result == {"a": tp(t1={0, 1, 2}), "b": tp(t2={0, 1, 2})}


def test_uniform_partitions_added_go_to_the_member_below_quota():
    topics = topics_of(t1=4, t2=4)  # both topics grew from 2 to 4 partitions
    members = {"a": sub(T1, T2, target=tp(t1={0}, t2={0})), "b": sub(T1, T2, target=tp(t1={1}, t2={1}))}
    result = uniform(members, topics)
    assert includes(result["a"], tp(t1={0}, t2={0}))
    assert includes(result["b"], tp(t1={1}, t2={1}))
    assert size(result["a"]) == size(result["b"]) == 4


def test_uniform_one_member_added_takes_only_the_surplus():
    topics = topics_of(t1=3, t2=3)
    members = {"a": sub(T1, T2, target=tp(t1={0, 1, 2})), "b": sub(T1, T2, target=tp(t2={0, 1, 2})),
               "c": sub(T1, T2)}
    result = uniform(members, topics)
    assert result == {"a": tp(t1={0, 1}), "b": tp(t2={0, 1}), "c": tp(t1={2}, t2={2})}


def test_uniform_one_member_removed_hands_its_partitions_to_the_others():
    topics = topics_of(t1=3, t2=3)
    members = {"a": sub(T1, T2, target=tp(t1={0, 1})), "b": sub(T1, T2, target=tp(t2={0, 1}))}
    # c, which held t1-2 and t2-2, left
    result = uniform(members, topics)
    assert result == {"a": tp(t1={0, 1, 2}), "b": tp(t2={0, 1, 2})}


def test_uniform_extra_slot_goes_to_the_member_that_already_holds_it():
    topics = topics_of(t1=5)
    # Kafka would give the +1 to whichever member its map yields first; we keep it where it is
    members = {"a": sub(T1, target=tp(t1={0, 1})), "b": sub(T1, target=tp(t1={2, 3, 4}))}
    assert uniform(members, topics) == {"a": tp(t1={0, 1}), "b": tp(t1={2, 3, 4})}


def test_uniform_unsubscribed_topic_is_dropped_from_the_target():
    topics = topics_of(t1=2, t2=2)
    members = {"a": sub(T1, target=tp(t1={0}, t2={0})), "b": sub(T1, target=tp(t1={1}, t2={1}))}
    assert uniform(members, topics) == {"a": tp(t1={0}), "b": tp(t1={1})}


def test_uniform_heterogeneous_first_assignment():
    topics = topics_of(t1=3, t2=3, t3=2)
    members = {"a": sub(T1, T2), "b": sub(T2), "c": sub(T3)}
    result = uniform(members, topics)
    assert result["c"] == tp(t3={0, 1})
    assert size(result["a"]) == size(result["b"]) == 3
    assert result["a"].keys() <= {T1, T2} and result["b"].keys() == {T2}


def test_uniform_heterogeneous_sticky_previous_target_is_balanced_by_moving_the_highest():
    topics = topics_of(t1=4)
    members = {"a": sub(T1, T2, target=tp(t1={0, 1, 2, 3})), "b": sub(T1)}
    result = uniform({**members, "c": sub(T2)}, {**topics, **topics_of(t2=1)})
    # a keeps t1-0, t1-1; its highest partitions move to b, which subscribes to t1 only
    assert result["c"] == tp(t2={0})
    assert result == {"a": tp(t1={0, 1}), "b": tp(t1={2, 3}), "c": tp(t2={0})}


def test_range_first_assignment_is_co_partitioned():
    topics = topics_of(t1=3, t2=3)
    result = range_assignor({"a": sub(T1, T2), "b": sub(T1, T2)}, topics)
    assert result == {"a": tp(t1={0, 1}, t2={0, 1}), "b": tp(t1={2}, t2={2})}


def test_range_three_members_different_subscriptions():
    topics = topics_of(t1=3, t2=3, t3=2)
    members = {"a": sub(T1, T2), "b": sub(T3), "c": sub(T2, T3)}
    result = range_assignor(members, topics)
    assert result == {"a": tp(t1={0, 1, 2}, t2={0, 1}), "b": tp(t3={0}), "c": tp(t2={2}, t3={1})}


def test_range_orders_static_members_by_instance_id_first():
    topics = topics_of(t1=3)
    members = {"a": sub(T1), "b": sub(T1, instance_id="i2"), "c": sub(T1, instance_id="i1")}
    assert range_assignor(members, topics) == {"c": tp(t1={0}), "b": tp(t1={1}), "a": tp(t1={2})}


def test_range_member_added_keeps_the_lowest_of_each_current_range():
    topics = topics_of(t1=4, t2=4)
    members = {"a": sub(T1, T2, target=tp(t1={0, 1}, t2={0, 1})), "b": sub(T1, T2, target=tp(t1={2, 3}, t2={2, 3})),
               "c": sub(T1, T2)}
    result = range_assignor(members, topics)
    # quota 1 each plus one extra per topic: a (first, holding two) keeps both, b keeps 2, c gets 3
    assert result == {"a": tp(t1={0, 1}, t2={0, 1}), "b": tp(t1={2}, t2={2}), "c": tp(t1={3}, t2={3})}


def test_range_member_removed_partitions_fill_the_others():
    topics = topics_of(t1=3, t2=3)
    members = {"a": sub(T1, T2, target=tp(t1={0}, t2={0})), "c": sub(T1, T2, target=tp(t1={2}, t2={2}))}
    result = range_assignor(members, topics)
    assert result == {"a": tp(t1={0, 1}, t2={0, 1}), "c": tp(t1={2}, t2={2})}


def test_range_subscription_removed_releases_that_topic():
    topics = topics_of(t1=2, t2=2)
    members = {"a": sub(T1, target=tp(t1={0}, t2={0})), "b": sub(T1, T2, target=tp(t1={1}, t2={1}))}
    assert range_assignor(members, topics) == {"a": tp(t1={0}), "b": tp(t1={1}, t2={0, 1})}


# Kafka's RangeAssignorTest cases (members in a TreeMap there, so in our sorted order too), with
# Kafka's expected targets; Kafka leaves a member with nothing out of the result, we map it to {}.
KAFKA_RANGE_CASES = {
    "more_members_than_partitions_when_one_added": (
        dict(t1=2, t2=2),
        {"A": (("t1", "t2"), tp(t1={0}, t2={0})), "B": (("t1", "t2"), tp(t1={1}, t2={1})), "C": (("t1", "t2"), {})},
        {"A": tp(t1={0}, t2={0}), "B": tp(t1={1}, t2={1}), "C": {}}),
    "one_partition_added_two_members_two_topics": (
        dict(t1=4, t2=4),
        {"A": (("t1", "t2"), tp(t1={0, 1}, t2={0, 1})), "B": (("t1", "t2"), tp(t1={2}, t2={2}))},
        {"A": tp(t1={0, 1}, t2={0, 1}), "B": tp(t1={2, 3}, t2={2, 3})}),
    "one_member_added_after_initial_assignment": (
        dict(t1=3, t2=3),
        {"A": (("t1", "t2"), tp(t1={0, 1}, t2={0, 1})), "B": (("t1", "t2"), tp(t1={2}, t2={2})),
         "C": (("t1", "t2"), {})},
        {"A": tp(t1={0}, t2={0}), "B": tp(t1={2}, t2={2}), "C": tp(t1={1}, t2={1})}),
    "one_member_and_one_partition_added": (
        dict(t1=4, t2=3),
        {"A": (("t1", "t2"), tp(t1={0, 1}, t2={0, 1})), "B": (("t1", "t2"), tp(t1={2}, t2={2})),
         "C": (("t1",), {})},
        {"A": tp(t1={0, 1}, t2={0, 1}), "B": tp(t1={2}, t2={2}), "C": tp(t1={3})}),
    "one_member_removed": (
        dict(t1=3, t2=3),
        {"B": (("t1", "t2"), tp(t1={2}, t2={2}))},
        {"B": tp(t1={0, 1, 2}, t2={0, 1, 2})}),
    "multiple_subscriptions_changed_three_members": (
        dict(t1=3, t2=3, t3=2),
        {"A": (("t1",), tp(t1={0, 1, 2}, t2={0})), "B": (("t1", "t2", "t3"), tp(t2={1})),
         "C": (("t2",), tp(t2={2}, t3={0, 1}))},
        {"A": tp(t1={0, 1}), "B": tp(t1={2}, t2={0, 1}, t3={0, 1}), "C": tp(t2={2})}),
}


@pytest.mark.parametrize("case", sorted(KAFKA_RANGE_CASES))
def test_range_matches_kafkas_range_assignor_tests(case):
    counts, spec, expected = KAFKA_RANGE_CASES[case]
    ids = {"t1": T1, "t2": T2, "t3": T3}
    members = {m: sub(*(ids[t] for t in topics), target=target) for m, (topics, target) in spec.items()}
    assert range_assignor(members, topics_of(**counts)) == expected
