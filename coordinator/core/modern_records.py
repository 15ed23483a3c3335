"""What the modern group types (consumer groups, KIP-848; share groups, KIP-932; streams groups,
KIP-1071) have in common. Their groups (`ModernGroup`): the epochs read from the group's metadata and
target-epoch records, and the parts of the Group interface that do not depend on the type. Their
record appliers (`ModernRecords`): the group a record belongs to (made by its first record), the
group's metadata record (whose tombstone is the group's last), records that set one field of the
group, a member's target assignment, and members made by their first record and forgotten with
their last. Each apply returns the records that undo it. Sans-IO."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Self

from groupd.protocol import ErrorCode
from groupd.storage.records import Record

Applier = Callable[[Any, Any], list[Record]]


class PersistedMemberState(enum.IntEnum):
    """A base of the member states a current-assignment record persists as int8 (each type names its
    own states; every one has UNKNOWN = 127): a state from a newer record format reads as UNKNOWN,
    and such a member must rejoin."""

    @classmethod
    def from_value(cls, value: int) -> Self:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ModernGroup:
    """A base of the modern group dataclasses: `metadata` holds the group-epoch record, `target_epoch`
    the target-assignment-epoch one, `members` the members by id (none of them a field here)."""

    group_id: str
    type: str
    metadata: Any
    target_epoch: Any
    members: dict

    @property
    def group_epoch(self) -> int:
        return self.metadata.epoch if self.metadata is not None else 0

    @property
    def metadata_hash(self) -> int:
        return self.metadata.metadata_hash if self.metadata is not None else 0

    @property
    def assignment_epoch(self) -> int:
        return self.target_epoch.assignment_epoch if self.target_epoch is not None else 0

    @property
    def durable(self) -> Any:
        return self.metadata

    # -- the Group interface (coordinator/core/group.py), where it does not depend on the type ------

    def epochs(self) -> dict[str, int]:
        return {"group": self.group_epoch, "assignment": self.assignment_epoch}

    def offset_committed_by(self, member_id: str, now_mono: int) -> None:
        pass  # a commit is no heartbeat in these protocols

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+'s member check of a consumer or streams group (a share group has its own):
        none without a member and epoch, else the member's current epoch."""
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        return ErrorCode.stale_member_epoch if member_epoch != member.member_epoch else None

    def validate_delete(self) -> ErrorCode | None:
        return ErrorCode.non_empty_group if self.members else None

    def describe(self) -> dict:
        """DescribeGroups (the classic API) answers a modern group as not a classic one (spec §7.2;
        a share group as not found, spec §1.10)."""
        return {"group_id": self.group_id, "type": self.type}

    def release_parked(self, error: ErrorCode) -> list[tuple[Any, Any]]:
        return []  # nothing is ever parked: every heartbeat is answered when its records are durable


class ModernRecords:
    group_type: type  # ConsumerGroup or ShareGroup: made with the group id
    member_type: type  # their member: made with the member id

    def __init__(self, groups: dict) -> None:
        self.groups = groups

    def _group(self, group_id: str, create: bool) -> Any:
        """The group of this type, or one made in place of whatever the id named (`create`: the record
        is not a tombstone); None when there is none and the record deletes."""
        group = self.groups.get(group_id)
        if isinstance(group, self.group_type):
            return group
        if not create:
            return None
        group = self.groups[group_id] = self.group_type(group_id)
        return group

    def _group_metadata(self, key, value) -> list[Record]:
        group = self._group(key.group_id, value is not None)
        undo = [Record(key, group.metadata if group is not None else None)]
        if group is None:
            return undo
        if value is None:
            del self.groups[key.group_id]  # the group's last tombstone (its others come first)
        else:
            group.metadata = value
        return undo

    def _field(self, name: str) -> Applier:
        """The applier of a record that holds one field of the group (`name`), a tombstone clearing it."""
        def apply(key, value) -> list[Record]:
            group = self._group(key.group_id, value is not None)
            if group is None:
                return [Record(key, None)]
            undo = [Record(key, getattr(group, name))]
            setattr(group, name, value)
            return undo
        return apply

    def _targets(self, decode: Callable[[Any], Any], encode: Callable[[Any], Any]) -> Applier:
        """The applier of a member's target-assignment record into `group.targets`, decoded
        (`decode(value)`); `encode` makes the record of a decoded target again, for the undo."""
        def apply(key, value) -> list[Record]:
            group = self._group(key.group_id, value is not None)
            if group is None:
                return [Record(key, None)]
            old = group.targets.get(key.member_id)
            undo = [Record(key, None if old is None else encode(old))]
            if value is None:
                group.targets.pop(key.member_id, None)
            else:
                group.targets[key.member_id] = decode(value)
            return undo
        return apply

    def _member_field(self, key, value, name: str, change: Callable[[Any, Any], None]) -> list[Record]:
        """A record that holds one field (`name`) of a member: the member is made by its first record,
        `change(group, member)` sets the field from `value` (and what the group indexes of it), and a
        member left with no metadata and no assignment is forgotten."""
        group = self._group(key.group_id, value is not None)
        member = group.members.get(key.member_id) if group is not None else None
        undo = [Record(key, getattr(member, name) if member is not None else None)]
        if group is None or (value is None and member is None):
            return undo
        member = group.members.get(key.member_id)
        if member is None:
            member = group.members[key.member_id] = self.member_type(key.member_id)
        change(group, member)
        if member.metadata is None and member.current is None:
            del group.members[member.member_id]
        return undo
