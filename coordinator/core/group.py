"""The one small interface every group type (classic, consumer/KIP-848, later share and streams)
offers the partition, the offsets store, admin operations and metrics, so that they never know a
type's machine; and the one its machine offers the partition (`GroupMachine`), registered by type."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

from groupd.protocol import ErrorCode


def static_member_error(static_members: dict[str, str], instance_id: str | None, member_id: str) -> ErrorCode | None:
    """The error of a request naming `instance_id` (if any) for `member_id`, in any group type:
    an unknown instance, or one held by another member (Kafka's static-member check)."""
    if instance_id is None:
        return None
    holder = static_members.get(instance_id)
    if holder is None:
        return ErrorCode.unknown_member_id
    return ErrorCode.fenced_instance_id if holder != member_id else None


class Group(Protocol):
    group_id: str
    type: str  # "classic", "consumer", …
    protocol_type: str | None
    durable: Any  # the last group record applied (None: the group has no record in the log)

    @property
    def state_name(self) -> str:
        """Kafka's name of its state (DescribeGroups, ListGroups, metrics)."""

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               version: int, partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        """The error of an OffsetCommit (of that API version) by this member at this generation
        (or member epoch) of these (topic, partition)s (one error for them all, as Kafka's)."""

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                                   partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        """The error of a TxnOffsetCommit by this member at this generation (KIP-447)."""

    def offset_committed_by(self, member_id: str, now_mono: int) -> None:
        """A valid commit was accepted from `member_id` (classic: it counts as a heartbeat)."""

    def offset_expiry_base(self, topic: str, commit_timestamp: int) -> int | None:
        """The timestamp an offset of `topic` ages from, or None while it cannot expire."""

    def is_subscribed_to(self, topic: str) -> bool: ...

    def expirable(self) -> bool:
        """Whether the group goes once its last offset has expired."""

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+'s member check (Kafka's Group.validateOffsetFetch)."""

    def validate_offset_delete(self) -> ErrorCode | None: ...

    def validate_delete(self) -> ErrorCode | None: ...

    def delete_records(self) -> list:
        """The tombstones that remove the group from the log (DeleteGroups, expiry)."""

    def describe(self) -> dict:
        """DescribeGroups' entry; a group of another type says only its `type` (spec §7.2)."""

    def release_parked(self, error: ErrorCode) -> list[tuple[Any, Any]]:
        """The group was removed by a revert: (ticket, reply) for every request parked on it."""

    # -- a read view for metrics
    members: dict

    def epochs(self) -> dict[str, int]:
        """Its generation (`{"generation": n}`) or epochs (`{"group": n, "assignment": m}`)."""

    def unreconciled(self) -> int:
        """Members whose assignment is not yet their target (0 where the broker sets no target)."""

    def partition_owners(self) -> list[tuple[Any, int, str, str, str]]:
        """(topic, partition, member id, client id, client host) of every partition a member holds
        now; the topic is a name (classic) or a topic id (consumer groups, uuid.UUID)."""


class GroupMachine(Protocol):
    """A group type's state machine as the partition routes to it (coordinator/core/partition.py
    `GroupShard.machines`); each type's own requests go to it directly."""

    def on_loaded(self, out: Any, group: Any, now: Any) -> None:
        """The partition has replayed its log: arm the group's timers."""

    def owns_timer(self, key: tuple) -> bool: ...

    def on_timer(self, key: tuple, now: Any) -> Any: ...

    def force_rebalance(self, out: Any, group: Any, now: Any) -> None:
        """An operator's rebalance (fault injection)."""

    def expire_members(self, out: Any, group: Any, member_ids: list[str], now: Any) -> None:
        """An operator's expiry of these (known) members (fault injection)."""
