"""A streams group (KIP-1071) and its members, and the replay of the streams-group records (types
17, 19–23) into them: the one path by which their durable state changes, for log loading, live
writes and reverts alike. Each apply returns the records that undo it. What is not in the records
lives here too, rebuilt after a load: the configured topology (topology.py, recomputed from the
topics), the endpoint-information epoch, a requested application shutdown. Sans-IO."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

from groupd.protocol import ErrorCode
from groupd.storage.records import Record
from groupd.storage.streams_records import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
)

from ..modern_records import ModernGroup, ModernRecords, PersistedMemberState
from .tasks import EMPTY, Tasks, task_ids
from .topology import ConfiguredTopology

E = ErrorCode
# Kafka's StreamsGroupState names (ListGroups, DescribeGroups, StreamsGroupDescribe)
EMPTY_STATE, NOT_READY, ASSIGNING, RECONCILING, STABLE = "Empty", "NotReady", "Assigning", "Reconciling", "Stable"


class MemberState(PersistedMemberState):
    """Persisted as int8 in StreamsGroupCurrentMemberAssignmentValue (Kafka's streams MemberState)."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127


@dataclasses.dataclass(eq=False, slots=True)
class StreamsMember:
    member_id: str
    metadata: StreamsGroupMemberMetadataValue | None = None
    current: StreamsGroupCurrentMemberAssignmentValue | None = None
    assigned: Tasks = EMPTY  # `current`, decoded
    pending: Tasks = EMPTY  # tasks pending revocation, decoded

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch if self.current is not None else 0

    @property
    def previous_member_epoch(self) -> int:
        return self.current.previous_member_epoch if self.current is not None else -1

    @property
    def state(self) -> MemberState:
        return MemberState.from_value(self.current.state) if self.current is not None else MemberState.STABLE

    @property
    def process_id(self) -> str:
        return self.metadata.process_id if self.metadata is not None else ""

    def active_epochs(self) -> dict[tuple[str, int], int]:
        """The epoch each active task (assigned or pending revocation) was assigned to the member at,
        from the record's AssignmentEpochs; the member epoch where a record has none."""
        return active_epochs(self.current)

    @property
    def topology_epoch(self) -> int:
        return self.metadata.topology_epoch if self.metadata is not None else -1


@dataclasses.dataclass(eq=False)
class StreamsGroup(ModernGroup):
    group_id: str
    type = "streams"
    protocol_type = "streams"  # what ListGroups shows, as Kafka's StreamsGroup.protocolType()
    metadata: StreamsGroupMetadataValue | None = None
    topology: StreamsGroupTopologyValue | None = None
    target_epoch: StreamsGroupTargetAssignmentMetadataValue | None = None
    members: dict[str, StreamsMember] = dataclasses.field(default_factory=dict)
    targets: dict[str, Tasks] = dataclasses.field(default_factory=dict)
    # memory only
    configured: ConfiguredTopology | None = None
    endpoint_epoch: int = 0  # bumped whenever an assignment changes: clients refetch PartitionsByUserEndpoint
    shutdown_member: str | None = None  # a member asked the whole application to shut down

    @property
    def state_name(self) -> str:
        """Kafka's StreamsGroup.maybeUpdateGroupState."""
        if not self.members:
            return EMPTY_STATE
        if self.topology is None or self.configured is None or not self.configured.ready:
            return NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
               for m in self.members.values()):
            return RECONCILING
        return STABLE

    # -- the Group interface (coordinator/core/group.py) ---------------------------------------------

    def unreconciled(self) -> int:
        return sum(1 for m in self.members.values()
                   if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE)

    def tasks_assigned(self) -> dict[str, int]:
        """The tasks members hold now (their current assignment), by kind: the tasks-assigned gauge."""
        out = {"active": 0, "standby": 0, "warmup": 0}
        for m in self.members.values():
            for kind, tasks in (("active", m.assigned.active), ("standby", m.assigned.standby),
                                ("warmup", m.assigned.warmup)):
                out[kind] += sum(len(ps) for ps in tasks.values())
        return out

    def partition_owners(self) -> list[tuple[Any, int, str, str, str]]:
        """The source partitions of each member's active tasks (a task reads partition p of every
        source topic of its subtopology)."""
        out = []
        subs = self.configured.subtopologies if self.configured is not None and self.configured.subtopologies else {}
        for m in self.members.values():
            client_id, host = (m.metadata.client_id, m.metadata.client_host) if m.metadata is not None else ("", "")
            for s, ps in sorted(m.assigned.active.items()):
                for topic in subs[s].source_topics if s in subs else ():
                    out.extend((topic, p, m.member_id, client_id, host) for p in sorted(ps))
        return out

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               version: int = 9, partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        """Kafka 4.3's StreamsGroup.validateOffsetCommit: the member's current epoch, or an older one
        when every committed partition's task was assigned to the member at that epoch or before
        (per-task assignment epochs: a member that has not heard of its new epoch yet still commits
        what it kept; a zombie's commit of a task it lost is fenced)."""
        if generation < 0 and not self.members:
            return None  # admin tools (kafka-streams-application-reset)
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if version < 9:
            return E.unsupported_version
        return None if self._epoch_covers(member, generation, partitions) else E.stale_member_epoch

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                                   partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        if generation < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        return None if self._epoch_covers(member, generation, partitions) else E.illegal_generation

    def _epoch_covers(self, member: StreamsMember, epoch: int, partitions: Collection[tuple[str, int]]) -> bool:
        """Kafka's createAssignmentEpochValidator: each partition's subtopology (the one that reads its
        topic), its task assigned (or pending revocation) to the member at `epoch` or before."""
        if epoch == member.member_epoch:
            return True
        if epoch > member.member_epoch or self.topology is None:
            return False
        reads = {t: s.subtopology_id for s in self.topology.subtopologies
                 for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))}
        epochs = member.active_epochs()
        for topic, partition in partitions:
            assigned_at = epochs.get((reads.get(topic), partition))
            if assigned_at is None or epoch < assigned_at:
                return False
        return True

    def offset_expiry_base(self, topic: str, commit_timestamp: int) -> int | None:
        return None if self.is_subscribed_to(topic) else commit_timestamp

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's StreamsGroup.isSubscribedToTopic: a source topic of the topology, while the group
        has members (an Empty group's offsets may be deleted and expire)."""
        if self.topology is None or not self.members:
            return False
        return any(topic in s.source_topics or any(t.name == topic for t in s.repartition_source_topics)
                   for s in self.topology.subtopologies)

    def expirable(self) -> bool:
        return not self.members

    def validate_offset_delete(self) -> ErrorCode | None:
        return None  # per topic: GROUP_SUBSCRIBED_TO_TOPIC for a topic the topology reads

    def delete_records(self) -> list[Record]:
        """Every tombstone that removes the group: each member's, the target epoch, the topology,
        then the group epoch (which removes the group on replay)."""
        g = self.group_id
        out = []
        for member_id in self.members:
            out += member_tombstones(g, member_id)
        out.append(Record(StreamsGroupTargetAssignmentMetadataKey(g), None))
        if self.topology is not None:
            out.append(Record(StreamsGroupTopologyKey(g), None))
        out.append(Record(StreamsGroupMetadataKey(g), None))
        return out


def active_epochs(current: StreamsGroupCurrentMemberAssignmentValue | None) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    if current is None:
        return out
    for entries in (current.active_tasks, current.active_tasks_pending_revocation):
        for t in entries or ():
            epochs = t.assignment_epochs or ()
            if len(epochs) != len(t.partitions):  # absent (an older record) or malformed: Kafka's default
                epochs = (current.member_epoch,) * len(t.partitions)
            out.update(((t.subtopology_id, p), e) for p, e in zip(t.partitions, epochs))
    return out


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Removal of a member (Kafka's order): current assignment, target assignment, member metadata."""
    return [Record(StreamsGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            Record(StreamsGroupTargetAssignmentMemberKey(group_id, member_id), None),
            Record(StreamsGroupMemberMetadataKey(group_id, member_id), None)]


def target_value(tasks: Tasks) -> StreamsGroupTargetAssignmentMemberValue:
    return StreamsGroupTargetAssignmentMemberValue(task_ids(tasks.active), task_ids(tasks.standby),
                                                   task_ids(tasks.warmup))


# =============================================================================================
# replay: one apply per record type, returning the undo records


class StreamsRecords(ModernRecords):
    """The appliers of the streams-group records over a partition's group registry."""

    group_type = StreamsGroup
    member_type = StreamsMember

    def appliers(self) -> dict[type, Callable[[Any, Any], list[Record]]]:
        return {
            StreamsGroupMetadataKey: self._group_metadata,
            StreamsGroupTopologyKey: self._topology,
            StreamsGroupMemberMetadataKey: self._member_metadata,
            StreamsGroupTargetAssignmentMetadataKey: self._field("target_epoch"),
            StreamsGroupTargetAssignmentMemberKey: self._targets(Tasks.of, target_value),
            StreamsGroupCurrentMemberAssignmentKey: self._current_assignment,
        }

    def _topology(self, key: StreamsGroupTopologyKey, value) -> list[Record]:
        group = self._group(key.group_id, value is not None)
        if group is None:
            return [Record(key, None)]
        undo = [Record(key, group.topology)]
        group.topology = value
        group.configured = None  # configured again from the topics at the next heartbeat
        return undo

    def _member_metadata(self, key: StreamsGroupMemberMetadataKey, value) -> list[Record]:
        def change(group: StreamsGroup, member: StreamsMember) -> None:
            member.metadata = value
        return self._member_field(key, value, "metadata", change)

    def _current_assignment(self, key: StreamsGroupCurrentMemberAssignmentKey, value) -> list[Record]:
        def change(group: StreamsGroup, member: StreamsMember) -> None:
            before = member.assigned
            member.current = value
            member.assigned = Tasks.of(value)
            member.pending = Tasks.pending_of(value)
            if member.assigned != before:
                group.endpoint_epoch += 1
        return self._member_field(key, value, "current", change)
