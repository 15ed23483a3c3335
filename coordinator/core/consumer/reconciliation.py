"""Reconciliation of a consumer-group member towards its target (Kafka's CurrentAssignmentBuilder,
spec §4), and the member-epoch check of a regular heartbeat (spec §2.6).

Revocation always comes before assignment: a member that must give partitions up stays at its
epoch in UNREVOKED_PARTITIONS until a heartbeat shows it no longer owns them, and a partition moves
to a new member only once its previous holder released it (the `partition_epoch` lookup says -1).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence

from ..modern_records import PersistedMemberState
from .assignors import TopicPartitions

# The owned partitions a heartbeat reported: (topic id, partitions) pairs, or None when omitted.
OwnedTopicPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]] | None
# Epoch of the member currently holding (topic id, partition), assigned or pending revocation; -1 = free.
PartitionEpoch = Callable[[uuid.UUID, int], int]


class MemberState(PersistedMemberState):
    """Persisted as int8 in ConsumerGroupCurrentMemberAssignmentValue (spec §4.1)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127  # a state from a newer record format: the member must rejoin


@dataclasses.dataclass(frozen=True, slots=True)
class MemberAssignment:
    """What reconciliation reads and writes of a member: its current-assignment record."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: TopicPartitions
    partitions_pending_revocation: TopicPartitions


NEW_MEMBER = MemberAssignment(0, -1, MemberState.STABLE, {}, {})


class FencedMemberEpoch(Exception):
    """Answer FENCED_MEMBER_EPOCH: the member must drop its partitions and rejoin with epoch 0."""


def validate_member_epoch(member: MemberAssignment, received_epoch: int, owned: OwnedTopicPartitions) -> None:
    """The epoch check of a heartbeat with epoch > 0 (spec §2.6). An older epoch is accepted only when
    it is the previous one and the member reports owning a subset of its assigned partitions: the
    response that bumped its epoch was lost, and it has not taken anything it no longer may own."""
    if received_epoch > member.member_epoch:
        raise FencedMemberEpoch(f"the member epoch {received_epoch} is newer than the group's "
                                f"{member.member_epoch}")
    if received_epoch < member.member_epoch:
        if received_epoch != member.previous_member_epoch or not _subset(owned, member.assigned_partitions):
            raise FencedMemberEpoch(f"the member epoch {received_epoch} is stale; the group's is "
                                    f"{member.member_epoch}")


def _subset(owned: OwnedTopicPartitions, assigned: TopicPartitions) -> bool:
    if owned is None:
        return False
    return all(set(partitions) <= assigned.get(topic_id, frozenset()) for topic_id, partitions in owned)


def _owns_any(owned: OwnedTopicPartitions, partitions: TopicPartitions) -> bool:
    """Whether the client may still own any of `partitions`: unknown (None) counts as yes."""
    if owned is None:
        return True
    return any(not partitions.get(topic_id, frozenset()).isdisjoint(ps) for topic_id, ps in owned)


def reconcile(member: MemberAssignment, target_assignment_epoch: int, target: TopicPartitions,
              owned: OwnedTopicPartitions, partition_epoch: PartitionEpoch) -> MemberAssignment:
    """The member's next state (`member` itself when nothing changes). Raises FencedMemberEpoch for a
    member in UNKNOWN state that does not report an empty ownership.
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_assignment_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_assignment_epoch, target, owned, partition_epoch)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        # 4.0 moves to epoch + 1 and later releases cap it at the target epoch (an UNREVOKED member
        # is held below it, so the cap never bites); Kafka's trunk (KIP-1251) keeps the epoch here.
        epoch = min(member.member_epoch + 1, target_assignment_epoch)
        return _next_assignment(member, epoch, target_assignment_epoch, target, owned, partition_epoch)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_assignment_epoch, target, owned, partition_epoch)
    if owned is None or len(owned) > 0:  # as Kafka: even a topic entry without partitions fences
        raise FencedMemberEpoch("the member is in an unknown state; it must abandon its partitions and rejoin")
    return _next_assignment(member, target_assignment_epoch, target_assignment_epoch, target, owned, partition_epoch)


def _next_assignment(member: MemberAssignment, epoch: int, target_assignment_epoch: int,
                     target: TopicPartitions, owned: OwnedTopicPartitions,
                     partition_epoch: PartitionEpoch) -> MemberAssignment:
    """compute(E) of spec §4.3: keep = assigned ∩ target, revoke = assigned − keep, add = target − keep
    minus what another member still holds."""
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    adding: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in target.keys() | member.assigned_partitions.keys():
        current = member.assigned_partitions.get(topic_id, frozenset())
        wanted = target.get(topic_id, frozenset())
        keep = current & wanted
        # A partition this member itself has pending revocation is not held by someone else
        # (Kafka after 4.0: saves a round trip when a revoked partition comes back to it).
        pending = member.partitions_pending_revocation.get(topic_id, frozenset())
        add = frozenset(p for p in wanted - keep if p in pending or partition_epoch(topic_id, p) == -1)
        unreleased = unreleased or len(add) < len(wanted - keep)
        if keep:
            assigned[topic_id] = keep
        if current - keep:
            revoking[topic_id] = current - keep
        if add:
            adding[topic_id] = add

    if revoking and _owns_any(owned, revoking):
        return _update(member, MemberState.UNREVOKED_PARTITIONS, epoch, assigned, revoking)
    if adding:
        for topic_id, add in adding.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | add
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _update(member, state, target_assignment_epoch, assigned, {})


def _update(member: MemberAssignment, state: MemberState, epoch: int, assigned: Mapping[uuid.UUID, frozenset[int]],
            pending: Mapping[uuid.UUID, frozenset[int]]) -> MemberAssignment:
    # Kafka's updateMemberEpoch: the previous epoch is the one before this step, even when equal
    updated = MemberAssignment(epoch, member.member_epoch, state, assigned, pending)
    return member if updated == member else updated
