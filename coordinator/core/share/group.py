"""A share group (KIP-932, spec §2.1) and its members, and the replay of the share-group records
(types 10–15) into them: the one path by which their durable state changes, for log loading, live
writes and reverts alike. Each apply returns the records that undo it. Sans-IO."""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from groupd.protocol import ErrorCode
from groupd.storage.consumer_records import assignment_of, topic_partitions
from groupd.storage.records import Record
from groupd.storage.share_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)

from ..modern_records import ModernGroup, ModernRecords

E = ErrorCode
EMPTY, STABLE = "Empty", "Stable"
STABLE_MEMBER = 0  # MemberState.STABLE: share members never revoke, so never leave it
Partitions = dict[uuid.UUID, frozenset[int]]


@dataclasses.dataclass(eq=False, slots=True)
class ShareMember:
    member_id: str
    metadata: ShareGroupMemberMetadataValue | None = None
    current: ShareGroupCurrentMemberAssignmentValue | None = None
    assigned: Partitions = dataclasses.field(default_factory=dict)  # `current`, decoded

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch if self.current is not None else 0

    @property
    def previous_member_epoch(self) -> int:
        return self.current.previous_member_epoch if self.current is not None else 0

    @property
    def subscribed_topic_names(self) -> tuple[str, ...]:
        return self.metadata.subscribed_topic_names if self.metadata is not None else ()


@dataclasses.dataclass(eq=False)
class ShareGroup(ModernGroup):
    group_id: str
    type = "share"
    protocol_type = "share"  # what ListGroups shows, as Kafka's ShareGroup.protocolType()
    metadata: ShareGroupMetadataValue | None = None
    target_epoch: ShareGroupTargetAssignmentMetadataValue | None = None
    state_partitions: ShareGroupStatePartitionMetadataValue | None = None
    members: dict[str, ShareMember] = dataclasses.field(default_factory=dict)
    targets: dict[str, Partitions] = dataclasses.field(default_factory=dict)
    subscribed_names: Counter = dataclasses.field(default_factory=Counter)  # topic name → subscribers
    # the inverted target assignment (Kafka's invertedTargetAssignment; share groups share partitions, so
    # a count): topic id → partition → how many members' targets hold it; kept by the target applier, so
    # a heartbeat finds initialized partitions no target holds without walking every member's target
    held: dict[uuid.UUID, dict[int, int]] = dataclasses.field(default_factory=dict)
    # (the state-partitions record, its initialized partitions decoded): decoded again only when it changes
    _initialized: tuple = dataclasses.field(default=(None, {}), repr=False)

    @property
    def state_name(self) -> str:
        return STABLE if self.members else EMPTY

    def initialized(self) -> dict[uuid.UUID, frozenset[int]]:
        """The share-partitions whose state is initialized (topic id → partitions)."""
        value, decoded = self._initialized
        if value is not self.state_partitions:
            value = self.state_partitions
            decoded = {} if value is None else {t.topic_id: frozenset(t.partitions) for t in value.initialized_topics}
            self._initialized = (value, decoded)
        return dict(decoded)  # the caller's to change

    def hold(self, target: Partitions | None, count: int) -> None:
        """Count `target`'s partitions in `held` once more (`count` 1) or once less (-1)."""
        for t, ps in (target or {}).items():
            holders = self.held.setdefault(t, {})
            for p in ps:
                n = holders.get(p, 0) + count
                if n:
                    holders[p] = n
                else:
                    del holders[p]
            if not holders:
                del self.held[t]

    # -- the Group interface (coordinator/core/group.py) ---------------------------------------------

    def unreconciled(self) -> int:
        return sum(1 for m in self.members.values() if m.member_epoch != self.assignment_epoch)

    def partition_owners(self) -> list[tuple[Any, int, str, str, str]]:
        out = []
        for m in self.members.values():
            client_id, host = (m.metadata.client_id, m.metadata.client_host) if m.metadata is not None else ("", "")
            out.extend((t, p, m.member_id, client_id, host) for t, ps in m.assigned.items() for p in sorted(ps))
        return out

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               version: int = 9, partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        return E.group_id_not_found  # share groups commit no offsets (spec §1.10)

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                                   partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        return E.group_id_not_found  # nor in a transaction (Kafka checks both with validateOffsetCommit)

    def offset_expiry_base(self, topic: str, commit_timestamp: int) -> int | None:
        return commit_timestamp

    def is_subscribed_to(self, topic: str) -> bool:
        return bool(self.subscribed_names.get(topic))

    def expirable(self) -> bool:
        return False  # share groups never expire on their own (spec §2.5)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        return None  # no committed offsets: every partition answers -1 (spec §1.10)

    def validate_offset_delete(self) -> ErrorCode | None:
        return E.group_id_not_found

    def delete_records(self) -> list[Record]:
        """Every tombstone that removes the group: each member's, the target epoch, the
        share-partition metadata, then the group epoch (which removes the group on replay)."""
        g = self.group_id
        out = []
        for member_id in self.members:
            out += member_tombstones(g, member_id)
        out.append(Record(ShareGroupTargetAssignmentMetadataKey(g), None))
        if self.state_partitions is not None:
            out.append(Record(ShareGroupStatePartitionMetadataKey(g), None))
        out.append(Record(ShareGroupMetadataKey(g), None))
        return out


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Removal of a member (Kafka's order): current assignment, target assignment, subscription."""
    return [Record(ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            Record(ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
            Record(ShareGroupMemberMetadataKey(group_id, member_id), None)]


# =============================================================================================
# replay: one apply per record type, returning the undo records


class ShareRecords(ModernRecords):
    """The appliers of the share-group records over a partition's group registry."""

    group_type = ShareGroup
    member_type = ShareMember

    def appliers(self) -> dict[type, Callable[[Any, Any], list[Record]]]:
        return {
            ShareGroupMetadataKey: self._group_metadata,
            ShareGroupMemberMetadataKey: self._member_metadata,
            ShareGroupTargetAssignmentMetadataKey: self._field("target_epoch"),
            ShareGroupTargetAssignmentMemberKey: self._indexed(self._targets(
                lambda value: assignment_of(value.topic_partitions),
                lambda old: ShareGroupTargetAssignmentMemberValue(topic_partitions(old)))),
            ShareGroupCurrentMemberAssignmentKey: self._current_assignment,
            ShareGroupStatePartitionMetadataKey: self._field("state_partitions"),
        }

    def _indexed(self, apply_target: Callable[[Any, Any], list[Record]]) -> Callable[[Any, Any], list[Record]]:
        """The target applier, keeping the group's inverted index (`held`) in step."""
        def apply(key: ShareGroupTargetAssignmentMemberKey, value) -> list[Record]:
            group = self.groups.get(key.group_id)
            before = group.targets.get(key.member_id) if isinstance(group, ShareGroup) else None
            undo = apply_target(key, value)
            group = self.groups.get(key.group_id)
            if isinstance(group, ShareGroup):
                group.hold(before, -1)
                group.hold(group.targets.get(key.member_id), 1)
            return undo
        return apply

    def _member_metadata(self, key: ShareGroupMemberMetadataKey, value) -> list[Record]:
        def change(group: ShareGroup, member: ShareMember) -> None:
            if member.metadata is not None:
                group.subscribed_names.subtract(member.metadata.subscribed_topic_names)
            member.metadata = value
            if value is not None:
                group.subscribed_names.update(value.subscribed_topic_names)
            group.subscribed_names = +group.subscribed_names  # drop zero counts
        return self._member_field(key, value, "metadata", change)

    def _current_assignment(self, key: ShareGroupCurrentMemberAssignmentKey, value) -> list[Record]:
        def change(group: ShareGroup, member: ShareMember) -> None:
            member.current = value
            member.assigned = assignment_of(value.assigned_partitions) if value is not None else {}
        return self._member_field(key, value, "current", change)
