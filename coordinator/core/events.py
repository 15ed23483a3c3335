"""What happened in the core, as typed events: the partition appends them to its `events` list and
the shell (coordinator/observability/observe.py) turns each into its log line and metrics, dispatching by type."""

from __future__ import annotations

from groupd.storage.record_class import frozen_on_first_use

# @dataclasses.dataclass(frozen=True, slots=True), its methods made when the event first happens:
# most of these never do in a given process, and making them all at import was ~20 ms of start-up
_event = frozen_on_first_use


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
    reason: str = "session-timeout"  # or "forced" (fault injection)


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


# -- consumer groups (KIP-848, coordinator/core/consumer/machine.py) ----------------------------------

@_event
class ConsumerGroupEpochBumped:
    group_id: str
    epoch: int
    reason: str  # one of consumer.machine.EPOCH_BUMP_REASONS (a metrics label)


@_event
class ConsumerRegexResolutionFailed:
    group_id: str
    error: str  # the resolution's exception; the group keeps its last resolution and retries later


@_event
class ConsumerMemberJoined:
    group_id: str
    member_id: str
    instance_id: str | None
    group_epoch: int


@_event
class ConsumerMemberLeft:
    group_id: str
    member_id: str
    instance_id: str | None
    temporary: bool  # a static member's -2 leave: it keeps its partitions


@_event
class ConsumerMemberFenced:
    group_id: str
    member_id: str
    instance_id: str | None
    reason: str  # "session-expired" or "rebalance-timeout"


@_event
class ConsumerStaticMemberReplaced:
    group_id: str
    instance_id: str
    old_member_id: str
    new_member_id: str


@_event
class ConsumerTargetAssignmentComputed:
    group_id: str
    epoch: int
    members: int
    assignor: str
    ms: float


@_event
class ConsumerAssignmentChanged:
    group_id: str
    member_id: str
    member_epoch: int
    partitions: int


@_event
class GroupConverted:
    """Online migration (spec §7.4): a live group changed protocol with its members."""

    group_id: str
    direction: str  # "upgrade" (classic → consumer) or "downgrade" (consumer → classic)
    members: int


@_event
class UpgradeRefused:
    """A consumer-protocol member's join found a live classic group that cannot be upgraded (spec
    §7.4; Kafka's validateOnlineUpgrade and convertToConsumerGroup): the group stays classic and
    the joining member gets GROUP_ID_NOT_FOUND with `message`."""

    group_id: str
    reason: str  # one of consumer.migration.REFUSALS
    message: str  # the heartbeat's error message, Kafka's
    detail: str = ""  # what Kafka's log line adds (the parse error of a malformed protocol)


@_event
class ShareGroupEpochBumped:
    group_id: str
    epoch: int
    reason: str  # "subscription-changed", "metadata-changed", "member-left", "session-expired", "forced"


@_event
class ShareMemberJoined:
    group_id: str
    member_id: str
    group_epoch: int


@_event
class ShareMemberLeft:
    group_id: str
    member_id: str


@_event
class ShareMemberFenced:
    group_id: str
    member_id: str
    reason: str  # "session-expired" or "forced"


@_event
class StreamsGroupEpochBumped:
    group_id: str
    epoch: int
    reason: str  # "member-joined", "member-changed", "topology", "metadata-changed", "member-left", …


@_event
class StreamsMemberJoined:
    group_id: str
    member_id: str
    group_epoch: int


@_event
class StreamsMemberLeft:
    group_id: str
    member_id: str


@_event
class StreamsMemberFenced:
    group_id: str
    member_id: str
    reason: str  # "session-expired", "rebalance-timeout" or "forced"


@_event
class StreamsTopologyConfigured:
    group_id: str
    topology_epoch: int
    status: str  # "ready", "missing-internal-topics", or the refusal's status name
    detail: str


@_event
class StreamsShutdownRequested:
    group_id: str
    member_id: str
