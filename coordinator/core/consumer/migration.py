"""Online migration between the protocols (spec §7.4; Kafka's validateOnlineUpgrade,
convertToConsumerGroup, validateOnlineDowngradeWithFencedMembers and convertToClassicGroup): the
records that turn a live classic group into a consumer group in which every classic member keeps
its generation and its last assignment, and back. Sans-IO.
"""

from __future__ import annotations

from groupd.coordinator.core.classic.group import ClassicGroup
from groupd.protocol.consumer import (
    BadConsumerProtocol,
    Subscription,
    assignment_version,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from groupd.storage.consumer_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    topic_partitions,
)
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record

from .group import ConsumerGroup, ConsumerMember, ConsumerRecords, current_value
from .reconciliation import MemberAssignment, MemberState

UPGRADE_POLICIES = ("bidirectional", "upgrade")
DOWNGRADE_POLICIES = ("bidirectional", "downgrade")
# why an upgrade is refused (UpgradeRefused.reason); each answers GROUP_ID_NOT_FOUND, as Kafka does
REFUSALS = ("disabled", "protocol-type", "max-size", "malformed", "custom-assignor")


class CannotConvert(Exception):
    """The group stays what it is; the message is Kafka's, `reason` one of REFUSALS, `detail` what
    Kafka's log line adds to it."""

    def __init__(self, message: str, reason: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.reason, self.detail = reason, detail


def _refused(group_id: str, because: str, reason: str, detail: str = "") -> CannotConvert:
    return CannotConvert(f"Cannot upgrade classic group {group_id} to consumer group because {because}.", reason,
                         detail)


def validate_online_upgrade(classic: ClassicGroup, policy: str, max_size: int) -> None:
    """Kafka's validateOnlineUpgrade, in its order: only these three refuse a classic group before
    its conversion; its state (a rebalance under way, members not yet synced) never does."""
    g = classic.group_id
    if policy not in UPGRADE_POLICIES:
        raise _refused(g, "online upgrade is disabled", "disabled")
    if classic.protocol_type != "consumer":
        raise _refused(g, "the group does not use the consumer embedded protocol", "protocol-type")
    if len(classic.members) > max_size:
        raise _refused(g, "the group size exceeds the consumer group maximum size", "max-size")


def _member_protocols(classic: ClassicGroup, m) -> tuple[dict[str, list[int]], Subscription]:
    """A member's last assignment and its subscription, checked as Kafka's
    ConsumerGroup.fromClassicGroup does: the assignment the member was given (not a leader's one
    still being written: no member has received it), where an empty one (a member that joined and
    has not synced, or whose assignment a rebalance reset) is none; one with userData (a custom
    assignor's, or the sticky state librdkafka's leader echoes from each member's subscription)
    would be lost, which refuses; then the subscription of the group's protocol (the member's first
    one before the group's first generation chose one)."""
    g = classic.group_id
    try:
        owned, user_data = decode_assignment(m.propagated)
    except BadConsumerProtocol as e:
        raise _refused(g, "the embedded consumer protocol is malformed", "malformed", str(e)) from None
    if user_data:
        raise _refused(g, "an unsupported custom assignor is in use. Please refer to the documentation or switch "
                          "to a default assignor before re-attempting the upgrade", "custom-assignor",
                       "userData from a custom assignor would be lost")
    protocol = classic.protocol_name or (m.protocols[0][0] if m.protocols else "")
    try:
        return owned, decode_subscription(m.metadata(protocol))
    except BadConsumerProtocol as e:
        raise _refused(g, "the embedded consumer protocol is malformed", "malformed", str(e)) from None


def upgrade_records(classic: ClassicGroup, topics_by_name) -> list[Record]:
    """The classic tombstone first, then every member's metadata, the group epoch, every target
    member, the target epoch and every current assignment: epoch = assignment epoch = generation,
    each member Stable at that epoch with its last classic assignment as current and target."""
    g, epoch = classic.group_id, classic.generation
    metadata, targets, currents = [], [], []
    for m in classic.members.values():
        owned, subscription = _member_protocols(classic, m)
        assigned = {topics_by_name[t].topic_id: frozenset(ps) for t, ps in owned.items() if t in topics_by_name}
        metadata.append(Record(ConsumerGroupMemberMetadataKey(g, m.member_id), ConsumerGroupMemberMetadataValue(
            m.group_instance_id, subscription.rack_id, m.client_id, m.client_host,
            tuple(sorted(set(subscription.topics))), None, m.rebalance_timeout_ms, None,
            ClassicMemberMetadata(m.session_timeout_ms, tuple(ClassicProtocol(n, b) for n, b in m.protocols)))))
        targets.append(Record(ConsumerGroupTargetAssignmentMemberKey(g, m.member_id),
                              ConsumerGroupTargetAssignmentMemberValue(topic_partitions(assigned))))
        currents.append(Record(ConsumerGroupCurrentMemberAssignmentKey(g, m.member_id), current_value(
            MemberAssignment(epoch, epoch, MemberState.STABLE, assigned, {}))))
    return [Record(GroupMetadataKey(g), None), *metadata,
            Record(ConsumerGroupMetadataKey(g), ConsumerGroupMetadataValue(epoch)), *targets,
            Record(ConsumerGroupTargetAssignmentMetadataKey(g), ConsumerGroupTargetAssignmentMetadataValue(epoch)),
            *currents]


def converted_view(group_id: str, records: list[Record]) -> ConsumerGroup:
    """The consumer group `records` make, built aside: the request goes on against it, while the
    partition's own group changes only when the runner applies the records."""
    scratch: dict = {}
    appliers = ConsumerRecords(scratch).appliers()
    for record in records:
        if type(record.key) in appliers:
            appliers[type(record.key)](record.key, record.value)
    return scratch[group_id]


def can_downgrade(staying: list[ConsumerMember], policy: str, classic_max_size: int,
                  replacing: ConsumerMember | None = None) -> bool:
    """The members left after a leave or a fencing (or, `replacing`, a static member about to be
    replaced by a classic one) are all classic ones (at least one) that fit a classic group, and
    the policy allows the downgrade."""
    return (bool(staying) and all(m.classic is not None for m in staying if m is not replacing)
            and policy in DOWNGRADE_POLICIES and len(staying) <= classic_max_size)


def downgrade_records(group: ConsumerGroup, staying: list[ConsumerMember], now_wall: int) -> list[Record]:
    """Every consumer tombstone, then the GroupMetadata record of the classic group: generation =
    group epoch, the first member the leader, each member with its current assignment."""
    names = {t.topic_id: t.topic_name for t in (group.subscription_metadata.topics if group.subscription_metadata else ())}
    first = [p.name for p in staying[0].classic.supported_protocols]
    protocol = next((n for n in first if all(n in {p.name for p in m.classic.supported_protocols} for m in staying)),
                    first[0] if first else "")
    members = []
    for m in staying:
        meta = m.metadata
        subscription = next((p.metadata for p in m.classic.supported_protocols if p.name == protocol), b"")
        assignment = {names[t]: sorted(ps) for t, ps in sorted(m.assignment.assigned_partitions.items())
                      if ps and t in names}
        members.append(MemberMetadata(m.member_id, meta.instance_id, meta.client_id, meta.client_host,
                                      meta.rebalance_timeout_ms, m.classic.session_timeout_ms, subscription,
                                      encode_assignment(assignment, None, assignment_version(subscription))))
    value = GroupMetadataValue(protocol_type="consumer", generation=group.group_epoch, protocol=protocol,
                               leader=staying[0].member_id, current_state_timestamp=now_wall, members=tuple(members))
    return group.delete_records() + [Record(GroupMetadataKey(group.group_id), value)]
