"""A consumer (KIP-848) group and its members (spec §2.1, §3.5, §4.2), and the replay of the
consumer-group records (types 3–8 and 16) into them: the one path by which their durable state
changes, for log loading, live writes and reverts alike. Each apply returns the record that undoes
it (the key's previous value, or a tombstone). Sans-IO: time comes in, nothing here reads a clock.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from groupd.protocol import ErrorCode
from groupd.storage.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    assignment_of,
    topic_partitions,
)
from groupd.storage.records import GroupMetadataKey, Record

from ..modern_records import ModernGroup, ModernRecords
from .assignors import TopicPartitions
from .reconciliation import NEW_MEMBER, MemberAssignment, MemberState
from .target_assignment import TargetMember

E = ErrorCode

EMPTY, ASSIGNING, RECONCILING, STABLE = "Empty", "Assigning", "Reconciling", "Stable"
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
# A member whose current-assignment record was tombstoned (it is being removed), as Kafka's replay.
_REMOVED = MemberAssignment(LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, MemberState.STABLE, {}, {})


@dataclasses.dataclass(eq=False, slots=True)
class ConsumerMember:
    member_id: str
    metadata: ConsumerGroupMemberMetadataValue | None = None  # the last member-metadata record applied
    current: ConsumerGroupCurrentMemberAssignmentValue | None = None  # the last current-assignment record
    assignment: MemberAssignment = NEW_MEMBER  # `current`, decoded for reconciliation
    # (metadata, its TargetMember): every epoch bump reads every member's, and metadata rarely changes
    _target: tuple | None = dataclasses.field(default=None, repr=False)

    @property
    def instance_id(self) -> str | None:
        return self.metadata.instance_id if self.metadata is not None else None

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def classic(self) -> ClassicMemberMetadata | None:
        """Set for a member that speaks the classic protocol (JoinGroup/SyncGroup, spec §7.3)."""
        return self.metadata.classic_member_metadata if self.metadata is not None else None

    @property
    def subscribed_topic_names(self) -> tuple[str, ...]:
        return self.metadata.subscribed_topic_names if self.metadata is not None else ()

    @property
    def subscribed_topic_regex(self) -> str | None:
        return self.metadata.subscribed_topic_regex if self.metadata is not None else None

    def target_member(self) -> TargetMember:
        cached = self._target
        if cached is None or cached[0] is not self.metadata:
            member = target_member_of(self.metadata) if self.metadata is not None else TargetMember(frozenset())
            cached = self._target = (self.metadata, member)
        return cached[1]


def target_member_of(m: ConsumerGroupMemberMetadataValue) -> TargetMember:
    """What the target computation reads of a member-metadata record."""
    return TargetMember(frozenset(m.subscribed_topic_names), m.subscribed_topic_regex or None, m.instance_id,
                        m.rack_id, m.server_assignor)


def current_value(a: MemberAssignment) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(a.member_epoch, a.previous_member_epoch, int(a.state),
                                                     topic_partitions(a.assigned_partitions),
                                                     topic_partitions(a.partitions_pending_revocation))


@dataclasses.dataclass(eq=False)
class ConsumerGroup(ModernGroup):
    group_id: str
    type = "consumer"
    protocol_type = "consumer"
    metadata: ConsumerGroupMetadataValue | None = None  # group epoch record
    subscription_metadata: ConsumerGroupPartitionMetadataValue | None = None
    target_epoch: ConsumerGroupTargetAssignmentMetadataValue | None = None
    members: dict[str, ConsumerMember] = dataclasses.field(default_factory=dict)
    targets: dict[str, ConsumerGroupTargetAssignmentMemberValue] = dataclasses.field(default_factory=dict)
    target_assignment: dict[str, TopicPartitions] = dataclasses.field(default_factory=dict)  # decoded `targets`
    regexes: dict[str, ConsumerGroupRegularExpressionValue] = dataclasses.field(default_factory=dict)
    static_members: dict[str, str] = dataclasses.field(default_factory=dict)  # instance id → member id
    partition_epochs: dict[tuple[uuid.UUID, int], int] = dataclasses.field(default_factory=dict)
    subscribed_names: Counter = dataclasses.field(default_factory=Counter)  # topic name → subscribers
    subscribed_regexes: Counter = dataclasses.field(default_factory=Counter)  # regex → subscribers
    metadata_version: int = -1  # the topic-metadata version this group last refreshed against (memory)
    regex_version: int = -1  # the topics version its regexes were last resolved against (memory: after a
    # restart the catalog's versions start again, so the first heartbeat re-resolves)

    # -- derived state (spec §3.5) -------------------------------------------------------------

    @property
    def state_name(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        epoch = self.assignment_epoch
        for m in self.members.values():
            if m.assignment.state is not MemberState.STABLE or m.member_epoch != epoch:
                return RECONCILING
        return STABLE

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """A classic member may join when it speaks `consumer` and one of its protocols (assignor
        names) is supported by every classic member already in the group (Kafka's check)."""
        if protocol_type != "consumer" or not names:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(name in {p.name for p in c.supported_protocols} for c in classic) for name in names)

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def target_of(self, member_id: str) -> TopicPartitions:
        return self.target_assignment.get(member_id, {})

    def unreconciled(self) -> int:
        """Members whose current assignment is not (yet) their target."""
        return sum(1 for m in self.members.values()
                   if {t: ps for t, ps in m.assignment.assigned_partitions.items() if ps}
                   != {t: ps for t, ps in self.target_of(m.member_id).items() if ps})

    # -- the Group interface (coordinator/core/group.py) ---------------------------------------------

    def partition_owners(self) -> list[tuple[Any, int, str, str, str]]:
        """From each member's current assignment (topic ids), not counting partitions pending
        revocation (the member is giving them up)."""
        out = []
        for m in self.members.values():
            client_id, host = (m.metadata.client_id, m.metadata.client_host) if m.metadata is not None else ("", "")
            out.extend((topic_id, p, m.member_id, client_id, host)
                       for topic_id, partitions in m.assignment.assigned_partitions.items() for p in sorted(partitions))
        return out

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               version: int = 9, partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        """Spec §7.1 (Kafka's ConsumerGroup.validateOffsetCommit)."""
        if generation < 0 and not self.members:
            return None  # admin tools and manual assignment
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if member.classic is not None:  # a classic member commits with its generation, any version
            return E.illegal_generation if generation != member.member_epoch else None
        if version < 9:
            return E.unsupported_version
        if generation != member.member_epoch:
            return E.stale_member_epoch
        return None

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                                   partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        """KIP-447 in a consumer group (Kafka's validateOffsetCommit with isTransactional): any API
        version; the generation is the member epoch, and a stale one is ILLEGAL_GENERATION
        (TxnOffsetCommit ≤ v5 has no STALE_MEMBER_EPOCH)."""
        if generation < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        return E.illegal_generation if generation != member.member_epoch else None

    def offset_expiry_base(self, topic: str, commit_timestamp: int) -> int | None:
        # Kafka: offsets of a topic the group subscribes to never expire; others age from their commit
        return None if self.is_subscribed_to(topic) else commit_timestamp

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_names.get(topic):
            return True
        return any(topic in v.topics for r, v in self.regexes.items() if self.subscribed_regexes.get(r))

    def expirable(self) -> bool:
        return not self.members  # an Empty group goes with its last offset, as Kafka's cleanup

    def validate_offset_delete(self) -> ErrorCode | None:
        return None  # per topic: GROUP_SUBSCRIBED_TO_TOPIC for a subscribed one

    def delete_records(self) -> list[Record]:
        """Every tombstone that removes the group (spec §10: each member's, then the group's)."""
        g = self.group_id
        out = []
        for member_id in self.members:
            out += member_tombstones(g, member_id)
        out += [Record(ConsumerGroupRegularExpressionKey(g, r), None) for r in self.regexes]
        out.append(Record(ConsumerGroupTargetAssignmentMetadataKey(g), None))
        if self.subscription_metadata is not None:
            out.append(Record(ConsumerGroupPartitionMetadataKey(g), None))
        out.append(Record(ConsumerGroupMetadataKey(g), None))
        return out


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Removal of a member (spec §2.7): current assignment, target assignment, member metadata."""
    return [Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
            Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None)]


# =============================================================================================
# replay: one apply per record type, returning the undo records


class ConsumerRecords(ModernRecords):
    """The appliers of the consumer-group records over a partition's group registry."""

    group_type = ConsumerGroup
    member_type = ConsumerMember

    def appliers(self) -> dict[type, Callable[[Any, Any], list[Record]]]:
        return {key: self._keeping_replaced(apply) for key, apply in {
            ConsumerGroupMetadataKey: self._group_metadata,
            ConsumerGroupPartitionMetadataKey: self._field("subscription_metadata"),
            ConsumerGroupMemberMetadataKey: self._member_metadata,
            ConsumerGroupTargetAssignmentMetadataKey: self._field("target_epoch"),
            ConsumerGroupTargetAssignmentMemberKey: self._target_member,
            ConsumerGroupCurrentMemberAssignmentKey: self._current_assignment,
            ConsumerGroupRegularExpressionKey: self._regex,
        }.items()}

    def _keeping_replaced(self, apply: Callable[[Any, Any], list[Record]]) -> Callable[[Any, Any], list[Record]]:
        """A record that replaces a group of another type (a consumer group's first record replaces an
        empty classic group of that id, spec §7.4) undoes into that very group object (a GroupMetadata
        key whose value is the group; never written), so a failed upgrade leaves the classic group
        intact, members, timers and all."""
        def run(key, value) -> list[Record]:
            before = self.groups.get(key.group_id)
            undo = apply(key, value)
            if before is not None and not isinstance(before, ConsumerGroup) and self.groups.get(key.group_id) is not before:
                undo.insert(0, Record(GroupMetadataKey(key.group_id), before))
            return undo
        return run

    def _target_member(self, key: ConsumerGroupTargetAssignmentMemberKey, value) -> list[Record]:
        group = self._group(key.group_id, value is not None)
        if group is None:
            return [Record(key, None)]
        undo = [Record(key, group.targets.get(key.member_id))]
        if value is None:
            group.targets.pop(key.member_id, None)
            group.target_assignment.pop(key.member_id, None)
        else:
            group.targets[key.member_id] = value
            group.target_assignment[key.member_id] = assignment_of(value.topic_partitions)
        return undo

    def _regex(self, key: ConsumerGroupRegularExpressionKey, value) -> list[Record]:
        group = self._group(key.group_id, value is not None)
        if group is None:
            return [Record(key, None)]
        undo = [Record(key, group.regexes.get(key.regular_expression))]
        if value is None:
            group.regexes.pop(key.regular_expression, None)
        else:
            group.regexes[key.regular_expression] = value
        return undo

    def _member_metadata(self, key: ConsumerGroupMemberMetadataKey, value) -> list[Record]:
        def change(group: ConsumerGroup, member: ConsumerMember) -> None:
            old = member.metadata
            if old is not None:
                group.subscribed_names.subtract(old.subscribed_topic_names)
                if old.subscribed_topic_regex:
                    group.subscribed_regexes[old.subscribed_topic_regex] -= 1
                if old.instance_id is not None and group.static_members.get(old.instance_id) == member.member_id:
                    del group.static_members[old.instance_id]
            member.metadata = value
            if value is not None:
                group.subscribed_names.update(value.subscribed_topic_names)
                if value.subscribed_topic_regex:
                    group.subscribed_regexes[value.subscribed_topic_regex] += 1
                if value.instance_id is not None:
                    group.static_members[value.instance_id] = member.member_id
            group.subscribed_names = +group.subscribed_names  # drop zero counts
            group.subscribed_regexes = +group.subscribed_regexes
        return self._member_field(key, value, "metadata", change)

    def _current_assignment(self, key: ConsumerGroupCurrentMemberAssignmentKey, value) -> list[Record]:
        def change(group: ConsumerGroup, member: ConsumerMember) -> None:
            _index(group, member.assignment, remove=True)
            member.current = value
            if value is None:
                member.assignment = _REMOVED
            else:
                member.assignment = MemberAssignment(value.member_epoch, value.previous_member_epoch,
                                                     MemberState.from_value(value.state),
                                                     assignment_of(value.assigned_partitions),
                                                     assignment_of(value.partitions_pending_revocation))
            _index(group, member.assignment, remove=False)
        return self._member_field(key, value, "current", change)


def _index(group: ConsumerGroup, a: MemberAssignment, remove: bool) -> None:
    """The partition-epoch index (spec §4.2): assigned and pending-revocation partitions."""
    epochs = group.partition_epochs
    for partitions in (a.assigned_partitions, a.partitions_pending_revocation):
        for topic_id, ps in partitions.items():
            for p in ps:
                if remove:
                    if epochs.get((topic_id, p)) == a.member_epoch:
                        del epochs[(topic_id, p)]
                else:
                    epochs[(topic_id, p)] = a.member_epoch
