"""What happened in the core, as typed events: the partition appends them to its `events` list and
the shell (coordinator/observe.py) turns each into its log line and metrics, dispatching by type."""

from __future__ import annotations

import dataclasses

_event = dataclasses.dataclass(frozen=True, slots=True)


@_event
class JoinReceived:
    group_id: str
    member_id: str
    instance_id: str | None
    version: int


@_event
class RebalanceStarted:
    group_id: str
    generation: int
    reason: str  # one of classic.machine.REBALANCE_REASONS (a metrics label)
    detail: str  # for the log only
    members: int


@_event
class JoinPhaseCompleted:
    group_id: str
    generation: int
    protocol: str | None
    leader: str | None
    members: int


@_event
class RebalanceCompleted:
    group_id: str
    generation: int
    state: str  # "Stable" or "Empty"
    protocol: str | None
    members: int
    rebalance_ms: int
    sync_ms: int | None  # None when it ended Empty


@_event
class AssignmentWriteFailed:
    group_id: str
    generation: int
    error: str


@_event
class MemberExpired:
    group_id: str
    member_id: str
    instance_id: str | None
    generation: int


@_event
class MembersSyncTimedOut:
    group_id: str
    members: tuple[str, ...]
    generation: int


@_event
class MemberDidNotRejoin:
    group_id: str
    member_id: str


@_event
class PendingMemberExpired:
    group_id: str
    member_id: str


@_event
class MembersLeft:
    group_id: str
    members: tuple[str, ...]


@_event
class StaticMemberReplaced:
    group_id: str
    instance_id: str
    old_member_id: str
    new_member_id: str
    state: str


@_event
class StaticMemberFenced:
    group_id: str


@_event
class GroupDeleted:
    group_id: str
    offsets: int


@_event
class OffsetsExpired:
    partition: int
    offsets: int
    groups: int
