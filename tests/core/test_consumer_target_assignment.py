"""The target assignment of a group epoch (spec §3.2): the assignor's input per member, which target
records are written, the target assignment epoch, static replacement and regex subscriptions."""

import uuid

import pytest

from groupd.coordinator.core.consumer.assignors import PartitionAssignorError, TopicMetadata, range_assignor, uniform
from groupd.coordinator.core.consumer.target_assignment import (
    TargetMember,
    build_target_assignment,
    preferred_assignor,
)
from groupd.storage.consumer_records import (
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)
from groupd.storage.records import Record

FOO, BAR = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {FOO: TopicMetadata(FOO, "foo", 4), BAR: TopicMetadata(BAR, "bar", 2)}


def member(*names, regex=None, instance_id=None, assignor=None):
    return TargetMember(frozenset(names), regex, instance_id, None, assignor)


def epoch_record(epoch):
    return Record(ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(epoch))


def target_record(member_id, *entries):
    return Record(ConsumerGroupTargetAssignmentMemberKey("g", member_id),
                  ConsumerGroupTargetAssignmentMemberValue(tuple(TopicPartitions(t, ps) for t, ps in entries)))


def test_the_first_member_gets_everything_and_the_epoch_record_comes_last():
    out = build_target_assignment("g", 1, uniform, {}, {}, TOPICS, updated_members={"a": member("foo")})
    assert out.records == [target_record("a", (FOO, (0, 1, 2, 3))), epoch_record(1)]
    assert out.target_assignment == {"a": {FOO: frozenset(range(4))}}
    assert out.changed == {"a"}


def test_a_joining_member_rewrites_only_the_targets_that_change():
    members = {"a": member("foo"), "c": member("bar")}
    targets = {"a": {FOO: frozenset(range(4))}, "c": {BAR: frozenset({0, 1})}}
    out = build_target_assignment("g", 3, uniform, members, targets, TOPICS, updated_members={"b": member("foo")})
    assert out.changed == {"a", "b"}  # c's target is untouched: no record for it
    assert out.records == [target_record("a", (FOO, (0, 1))), target_record("b", (FOO, (2, 3))), epoch_record(3)]


def test_a_new_member_with_an_empty_target_still_gets_its_record():
    members = {"a": member("bar")}
    targets = {"a": {BAR: frozenset({0, 1})}}
    out = build_target_assignment("g", 2, uniform, members, targets, TOPICS, updated_members={"b": member("missing")})
    assert out.records == [target_record("b"), epoch_record(2)]
    assert out.target_assignment["b"] == {}


def test_an_unchanged_group_writes_only_the_epoch():
    members = {"a": member("foo")}
    targets = {"a": {FOO: frozenset(range(4))}}
    out = build_target_assignment("g", 5, uniform, members, targets, TOPICS)
    assert out.records == [epoch_record(5)] and out.changed == frozenset()


def test_a_removed_member_is_left_out_and_its_partitions_move():
    members = {"a": member("foo"), "b": member("foo")}
    targets = {"a": {FOO: frozenset({0, 1})}, "b": {FOO: frozenset({2, 3})}}
    out = build_target_assignment("g", 4, uniform, members, targets, TOPICS, updated_members={"b": None})
    assert out.target_assignment == {"a": {FOO: frozenset(range(4))}}
    assert out.records == [target_record("a", (FOO, (0, 1, 2, 3))), epoch_record(4)]


def test_a_static_replacement_inherits_the_departed_members_target():
    members = {"old": member("foo", instance_id="i1"), "b": member("foo")}
    targets = {"old": {FOO: frozenset({2, 3})}, "b": {FOO: frozenset({0, 1})}}
    out = build_target_assignment("g", 2, range_assignor, members, targets, TOPICS,
                                  updated_members={"old": None, "new": member("foo", instance_id="i1")},
                                  static_members={"i1": "old"})
    # range orders the static member first, yet it keeps the partitions its instance had
    assert out.target_assignment == {"new": {FOO: frozenset({2, 3})}, "b": {FOO: frozenset({0, 1})}}
    assert out.changed == {"new"}


def test_a_regex_subscription_counts_once_resolved():
    members = {"a": member(regex="f.*")}
    unresolved = build_target_assignment("g", 1, uniform, members, {}, TOPICS)
    assert unresolved.target_assignment == {"a": {}}
    resolved = build_target_assignment("g", 2, uniform, members, {}, TOPICS, resolved_regexes={"f.*": frozenset({"foo"})})
    assert resolved.target_assignment == {"a": {FOO: frozenset(range(4))}}


def test_names_and_regex_together():
    members = {"a": member("bar", regex="f.*")}
    out = build_target_assignment("g", 1, uniform, members, {}, TOPICS, resolved_regexes={"f.*": frozenset({"foo"})})
    assert out.target_assignment == {"a": {FOO: frozenset(range(4)), BAR: frozenset({0, 1})}}


def test_an_assignor_failure_propagates():
    def broken(members, topics):
        raise PartitionAssignorError("boom")

    with pytest.raises(PartitionAssignorError):
        build_target_assignment("g", 1, broken, {"a": member("foo")}, {}, TOPICS)


def test_the_assignor_most_members_name_wins():
    members = {"a": member(assignor="range"), "b": member(assignor="range"), "c": member(assignor="uniform")}
    assert preferred_assignor(members, ["uniform", "range"]) == "range"


def test_without_a_named_assignor_the_first_configured_is_used():
    assert preferred_assignor({"a": member(), "b": member()}, ["uniform", "range"]) == "uniform"


def test_a_tie_goes_to_the_assignor_configured_first():
    members = {"a": member(assignor="range"), "b": member(assignor="uniform")}
    assert preferred_assignor(members, ["uniform", "range"]) == "uniform"
    assert preferred_assignor(members, ["range", "uniform"]) == "range"


def test_members_joining_one_by_one_stay_balanced_and_sticky_and_only_changed_targets_are_written():
    # the 1,000-member join of bench/consumers.py in small: one epoch bump per join, targets applied
    # from the records as the runtime does; the assignor hands unchanged targets back as they were
    members: dict = {}
    targets: dict = {}
    for epoch in range(1, 16):
        joining = f"m{epoch:02d}"
        out = build_target_assignment("g", epoch, uniform, members, targets, TOPICS,
                                      updated_members={joining: member("foo", "bar")})
        members[joining] = member("foo", "bar")
        new = out.target_assignment
        owned = [(t, p) for a in new.values() for t, ps in a.items() for p in ps]
        assert sorted(owned) == sorted((t, p) for t in (FOO, BAR) for p in range(TOPICS[t].num_partitions))
        sizes = [sum(map(len, a.values())) for a in new.values()]
        assert max(sizes) - min(sizes) <= 1
        for m, before in targets.items():
            had = {(t, p) for t, ps in before.items() for p in ps}
            has = {(t, p) for t, ps in new[m].items() for p in ps}
            assert len(had & has) == min(len(had), len(has))  # partitions move only as the quota shrinks
            assert (m in out.changed) == (had != has)
        assert out.records[-1] == epoch_record(epoch) and len(out.records) == len(out.changed) + 1
        targets.update({m: new[m] for m in out.changed})
