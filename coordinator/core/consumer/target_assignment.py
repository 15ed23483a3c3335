"""A new target assignment for a consumer group (Kafka's TargetAssignmentBuilder, spec §3.2): run
the group's assignor over every member and return the records that move the group to it — a
target record for each member whose target changed, then the target assignment epoch.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from groupd.storage.consumer_records import (
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    topic_partitions,
)
from groupd.storage.records import Record

from .assignors import Assignor, GroupAssignment, MemberSubscription, TopicMetadata, TopicPartitions


@dataclasses.dataclass(frozen=True, slots=True)
class TargetMember:
    """What the target computation reads of a member (its member-metadata record)."""

    subscribed_topic_names: frozenset[str]
    subscribed_topic_regex: str | None = None
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class TargetAssignmentResult:
    records: list[Record]  # changed member targets, then ConsumerGroupTargetAssignmentMetadata
    target_assignment: GroupAssignment  # every member's new target
    changed: frozenset[str]  # the members whose target record was (re)written


def preferred_assignor(members: Mapping[str, TargetMember], configured: Sequence[str]) -> str:
    """The ServerAssignor most members name; none named → the first configured one. Kafka breaks a
    tie arbitrarily; we take the tied name configured first."""
    votes = Counter(m.server_assignor for m in members.values() if m.server_assignor is not None)
    if not votes:
        return configured[0]
    rank = {name: i for i, name in enumerate(configured)}
    return min(votes, key=lambda name: (-votes[name], rank.get(name, len(rank)), name))


def subscribed_topic_ids(member: TargetMember, topic_ids_by_name: Mapping[str, uuid.UUID],
                         resolved_regexes: Mapping[str, frozenset[str]]) -> frozenset[uuid.UUID]:
    """Names ∪ the topics the member's regex resolved to, keeping the topics that exist. An
    unresolved regex matches nothing yet."""
    names = member.subscribed_topic_names
    if member.subscribed_topic_regex:
        names = names | resolved_regexes.get(member.subscribed_topic_regex, frozenset())
    return frozenset(topic_ids_by_name[n] for n in names if n in topic_ids_by_name)


_EMPTY: Mapping = MappingProxyType({})


def _normalized(assignment: TopicPartitions | None) -> dict[uuid.UUID, frozenset[int]] | None:
    return None if assignment is None else {t: frozenset(ps) for t, ps in assignment.items() if ps}


def build_target_assignment(
    group_id: str,
    group_epoch: int,
    assignor: Assignor,
    members: Mapping[str, TargetMember],
    target_assignment: Mapping[str, TopicPartitions],
    topics: Mapping[uuid.UUID, TopicMetadata],
    *,
    updated_members: Mapping[str, TargetMember | None] = _EMPTY,
    static_members: Mapping[str, str] = _EMPTY,
    resolved_regexes: Mapping[str, frozenset[str]] = _EMPTY,
) -> TargetAssignmentResult:
    """The target for `group_epoch`. `members` and `target_assignment` are the group as stored;
    `updated_members` are changes not yet applied (None = removed); `static_members` maps instance
    id → member id. A member joining with an instance id held by another member id (a static
    replacement) starts from that member's target, so it gets the same partitions back.
    Raises PartitionAssignorError when the assignor fails (the caller answers UNKNOWN_SERVER_ERROR).
    """
    effective = {**members, **updated_members}
    topic_ids_by_name = {t.name: t.topic_id for t in topics.values()}
    specs: dict[str, MemberSubscription] = {}
    # members mostly share one subscription: resolve each distinct one once, and share its frozenset
    ids_of: dict[tuple[frozenset[str], str | None], frozenset[uuid.UUID]] = {}
    for member_id, member in effective.items():
        if member is None:
            continue
        current = target_assignment.get(member_id, {})
        if member_id in updated_members and member.instance_id is not None:
            previous_id = static_members.get(member.instance_id)
            if previous_id is not None and previous_id != member_id:
                current = target_assignment.get(previous_id, {})
        subscription = (member.subscribed_topic_names, member.subscribed_topic_regex)
        topic_ids = ids_of.get(subscription)
        if topic_ids is None:
            topic_ids = ids_of[subscription] = subscribed_topic_ids(member, topic_ids_by_name, resolved_regexes)
        specs[member_id] = MemberSubscription(topic_ids, current, member.instance_id, member.rack_id)

    new_assignment = assignor(specs, topics)

    records: list[Record] = []
    changed = []
    for member_id in sorted(specs):
        new = new_assignment.get(member_id, {})
        old = target_assignment.get(member_id)
        if new is not old and _normalized(old) != new:  # `is`: the assignor hands back an unchanged target
            changed.append(member_id)
            records.append(Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                                  ConsumerGroupTargetAssignmentMemberValue(topic_partitions(new))))
    records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group_id),
                          ConsumerGroupTargetAssignmentMetadataValue(group_epoch)))
    return TargetAssignmentResult(records, {m: new_assignment.get(m, {}) for m in specs}, frozenset(changed))
