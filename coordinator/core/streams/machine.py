"""The streams-group (KIP-1071) machine: StreamsGroupHeartbeat — joins with client-generated member
ids and the topology, heartbeats, leaves (-1) — the session and rebalance timers, and
StreamsGroupDescribe, over the streams groups of one partition. Kafka 4.3's
GroupMetadataManager.streamsGroupHeartbeat: validate, find or create the group and member, take the
topology from the first member (a different one later is refused: "Topology updates are not
supported yet."), configure it against the topics (topology.py), bump the group epoch on any change,
compute the target with the sticky assignor once the topology is ready (and the initial rebalance
delay of a new group has passed), reconcile the member (reconciliation.py) and answer its tasks and
the group's status. Sans-IO: each operation takes the request, a topics image and `now`, and returns
an `Outcome` whose records the partition applies when the runner appends them (group.py).

Internal topics the topology needs and that do not exist are named in the reply
(`internal_topics`); the shell creates them, as Kafka's KafkaApis does after the heartbeat.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping

from groupd.coordinator.core import events as ev
from groupd.coordinator.core.clock import Now
from groupd.coordinator.core.consumer.machine import TopicsImage
from groupd.coordinator.core.group_config import (
    STREAMS_ASSIGNMENT_INTERVAL_MS,
    STREAMS_HEARTBEAT_INTERVAL_MS,
    STREAMS_INITIAL_REBALANCE_DELAY_MS,
    STREAMS_NUM_STANDBY_REPLICAS,
    STREAMS_SESSION_TIMEOUT_MS,
)
from groupd.coordinator.core.outcome import Outcome, reply_when_written
from groupd.protocol import ErrorCode
from groupd.storage.records import Record
from groupd.storage.streams_records import (
    LastAssignmentConfig,
    StreamsEndpoint,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    StreamsKeyValue,
)

from . import assignor
from . import topology as topo
from .group import MemberState, StreamsGroup, StreamsMember, member_tombstones, target_value
from .reconciliation import NEW_MEMBER, Assignment, FencedMemberEpoch, reconcile, validate_member_epoch
from .tasks import EMPTY, Tasks, as_set, task_ids

E = ErrorCode
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
ACCEPTABLE_RECOVERY_LAG = 10000  # Kafka's heartbeat answer (streams' acceptable.recovery.lag default)
TASK_OFFSET_INTERVAL_MS = 60000


@dataclasses.dataclass(slots=True)
class StreamsSettings:
    heartbeat_interval_ms: int = 5000  # group.streams.heartbeat.interval.ms
    session_timeout_ms: int = 45000  # group.streams.session.timeout.ms
    max_size: int = 2147483647  # group.streams.max.size
    num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    initial_rebalance_delay_ms: int = 3000  # group.streams.initial.rebalance.delay.ms
    assignment_interval_ms: int = 1000  # group.streams.assignment.interval.ms (Kafka 4.3)
    group_configs: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class StreamsHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsGroupTopologyValue | None = None  # only on join
    owned: Tasks | None = None  # active/standby/warm-up tasks the member reports (None: unchanged)
    owned_warmup_given: bool = False  # WarmupTasks was non-null and non-empty (not supported in 4.3)
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets_given: bool = False
    task_end_offsets_given: bool = False
    regex_given: bool = False  # a subtopology with SourceTopicRegex (not supported in 4.3)
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""


def error_reply(error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "member_id": "", "member_epoch": 0,
            "heartbeat_interval_ms": 0, "acceptable_recovery_lag": 0, "task_offset_interval_ms": 0,
            "status": None, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
            "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None, "internal_topics": ()}


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error, self.message = error, message


class StreamsMachine:
    def __init__(self, groups: dict, settings: StreamsSettings, events: list) -> None:
        self.groups = groups  # the partition's registry, shared with every group type
        self.settings = settings
        self.events = events
        self.session: dict[tuple[str, str], int] = {}  # (group, member) → deadline (monotonic ms; memory)
        self.rebalance: dict[tuple[str, str], tuple[int, int]] = {}  # (group, member) → (epoch, deadline)
        self.topics: TopicsImage | None = None  # the last image a heartbeat brought (timers have none)
        # group → monotonic ms before which no target is computed: the initial rebalance delay of a
        # group that was empty (memory; a group made by this heartbeat is only a view until applied)
        self.assign_not_before: dict[str, int] = {}

    # =========================================================================================
    # StreamsGroupHeartbeat

    def heartbeat(self, req: StreamsHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        self.topics = topics
        try:
            _validate(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                out = self._leave(req, topics)
            else:
                out = self._join_or_heartbeat(req, topics, now)
        except _Refused as e:
            return Outcome(reply=error_reply(e.error, e.message))
        except FencedMemberEpoch as e:
            return Outcome(reply=error_reply(E.fenced_member_epoch, str(e)))
        except topo.InvalidTopology as e:
            return Outcome(reply=error_reply(E.streams_invalid_topology, str(e)))
        if out.records:  # answered once durable; a failed write answers its error (the runner reverted it)
            reply_when_written(out, out.reply, error_reply)
        return out

    def _streams_group(self, group_id: str) -> StreamsGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, StreamsGroup) else None

    def _not_found(self, group_id: str) -> _Refused:
        if group_id in self.groups:
            return _Refused(E.group_id_not_found, f"Group {group_id} is not a streams group.")
        return _Refused(E.group_id_not_found, f"Streams group {group_id} not found.")

    def _join_or_heartbeat(self, req: StreamsHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        out = Outcome()
        g = req.group_id
        group = self._streams_group(g)
        if group is None:
            existing = self.groups.get(g)
            if req.member_epoch != 0 or (existing is not None and not _convertible(existing)):
                raise self._not_found(g)
            if existing is not None:  # an empty classic group (offsets only, say) becomes a streams group
                out.records += existing.delete_records()
            group = StreamsGroup(g)  # a view: the records below create the registered one
        was_empty = not group.members
        if req.member_id not in group.members and len(group.members) >= self.settings.max_size:
            raise _Refused(E.group_max_size_reached,
                           f"The streams group has reached its maximum capacity of {self.settings.max_size} members.")

        # -- the member (Kafka's getOrMaybeCreateDynamicStreamsGroupMember)
        member = group.members.get(req.member_id)
        joined = member is None
        if member is None:
            if req.member_epoch != 0:
                raise _Refused(E.unknown_member_id, f"Member {req.member_id} is not a member of group {g}.")
            member = StreamsMember(req.member_id)
        elif req.member_epoch != 0:
            validate_member_epoch(_assignment(member), req.member_epoch, req.owned)

        # -- the topology (Kafka's maybeUpdateTopology)
        bump_reasons = []
        topology = group.topology
        if req.topology is not None:
            if topology is None:
                topology = _sorted(req.topology)
                out.records.append(Record(StreamsGroupTopologyKey(g), topology))
                bump_reasons.append("topology-initialized")
            elif topology.epoch <= req.topology.epoch and _sorted(req.topology) != topology:
                raise _Refused(E.invalid_request, "Topology updates are not supported yet.")
        if topology is None:
            raise _Refused(E.invalid_request, "The topology is null and the group topology is also null.")

        # -- the member's metadata: any change bumps the group epoch
        metadata = _updated_metadata(member.metadata, req)
        if metadata != member.metadata:
            out.records.append(Record(StreamsGroupMemberMetadataKey(g, member.member_id), metadata))
            bump_reasons.append("member-joined" if joined else "member-changed")

        # -- the topics: the metadata hash and the configured topology
        metadata_hash = _metadata_hash(topology, topics)
        configured = group.configured
        if (configured is None or configured.metadata_hash != metadata_hash
                or configured.topology_epoch != topology.epoch):
            partitions = {name: t.num_partitions for name, t in topics.by_name.items()}
            configured = topo.configure(topology, partitions, metadata_hash)
            self.events.append(ev.StreamsTopologyConfigured(g, topology.epoch, _status_name(configured),
                                                            configured.detail or ", ".join(
                                                                t.name for t in configured.to_create)))
        group.configured = configured  # memory only (a view's is dropped with it)
        validated = topology.epoch if configured.ready else -1
        configs = (LastAssignmentConfig(assignor.NUM_STANDBY_REPLICAS, str(self.num_standby_replicas(g))),)
        if metadata_hash != group.metadata_hash and "topology-initialized" not in bump_reasons:
            bump_reasons.append("metadata-changed")
        if group.metadata is not None and (validated != group.metadata.validated_topology_epoch
                                           or configs != (group.metadata.last_assignment_configs or ())):
            bump_reasons.append("configured")
        group_epoch = group.group_epoch
        if bump_reasons or group.metadata is None:
            group_epoch += 1
            out.records.append(Record(StreamsGroupMetadataKey(g),
                                      StreamsGroupMetadataValue(group_epoch, metadata_hash, validated, configs)))
            reason = bump_reasons[0] if bump_reasons else "created"
            self.events.append(ev.StreamsGroupEpochBumped(g, group_epoch, reason))
            if was_empty and self.initial_rebalance_delay_ms(g) > 0:
                self.assign_not_before[g] = now.mono + self.initial_rebalance_delay_ms(g)

        # -- the target assignment
        statuses = []
        target_epoch = group.assignment_epoch
        targets = dict(group.targets)
        if group_epoch > target_epoch:
            if now.mono < self.assign_not_before.get(g, 0):
                statuses.append((topo.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial "
                                                          "rebalance delay."))
            elif not self._interval_passed(group, now):
                # Kafka 4.3 batches the changes of one interval into one target: meanwhile the member
                # reconciles towards the last one (a new member: no tasks, at the assignment epoch)
                statuses.append((topo.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment "
                                                          "interval."))
            else:
                specs = {m.member_id: assignor.MemberSpec(m.process_id, group.targets.get(m.member_id, EMPTY))
                         for m in group.members.values() if m.member_id != member.member_id}
                specs[member.member_id] = assignor.MemberSpec(metadata.process_id,
                                                              group.targets.get(member.member_id, EMPTY))
                new = assignor.assign(specs, configured.tasks(), self.num_standby_replicas(g))
                for member_id, tasks in new.items():
                    if group.targets.get(member_id) != tasks:
                        out.records.append(Record(StreamsGroupTargetAssignmentMemberKey(g, member_id),
                                                  target_value(tasks)))
                targets = new
                target_epoch = group_epoch
                out.records.append(Record(StreamsGroupTargetAssignmentMetadataKey(g),
                                          StreamsGroupTargetAssignmentMetadataValue(target_epoch, now.wall)))

        # -- reconciliation
        current = _assignment(member) if not joined else NEW_MEMBER
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        active_by_process: dict[tuple[str, int], str] = {}
        for m in others:
            for t in as_set(m.assigned.active) | as_set(m.pending.active):
                active_by_process[t] = m.process_id
        process = metadata.process_id
        reconciled = reconcile(current, target_epoch, targets.get(member.member_id, EMPTY), req.owned,
                               lambda t: t in active_by_process and active_by_process[t] != process,
                               lambda t: active_by_process.get(t) == process)
        if joined or reconciled != current:
            value = _current_value(reconciled)
            if value != member.current:
                out.records.append(Record(StreamsGroupCurrentMemberAssignmentKey(g, member.member_id), value))
        self.arm_session(out, g, member.member_id, now)
        if reconciled.state == MemberState.UNREVOKED_TASKS:
            timeout = metadata.rebalance_timeout_ms if metadata.rebalance_timeout_ms > 0 else 300000
            key = (g, member.member_id)
            if self.rebalance.get(key, (None,))[0] != reconciled.member_epoch:
                self.rebalance[key] = (reconciled.member_epoch, now.mono + timeout)
                out.timers.append((("streams-rebalance",) + key, now.mono + timeout))
        else:
            self.rebalance.pop((g, member.member_id), None)
        if joined:
            self.events.append(ev.StreamsMemberJoined(g, member.member_id, group_epoch))

        # -- the answer
        if req.shutdown_application and group.shutdown_member is None:
            group.shutdown_member = member.member_id
            self.events.append(ev.StreamsShutdownRequested(g, member.member_id))
        internal_topics: tuple = ()
        if configured.status is not None:
            statuses.append((configured.status, configured.detail))
        elif configured.to_create:
            internal_topics = configured.to_create
            statuses.append((topo.MISSING_INTERNAL_TOPICS,
                             f"Internal topics are missing: [{', '.join(t.name for t in configured.to_create)}]"))
        if metadata.topology_epoch < topology.epoch:
            statuses.append((topo.STALE_TOPOLOGY, f"The member's topology epoch {metadata.topology_epoch} is behind "
                                                  f"the group's topology epoch {topology.epoch}."))
        if group.shutdown_member is not None:
            statuses.append((topo.SHUTDOWN_APPLICATION, f"Streams group member {group.shutdown_member} encountered a "
                                                        "fatal error and requested a shutdown for the entire "
                                                        "application."))
        changed = reconciled.assigned != current.assigned
        send_tasks = req.member_epoch == 0 or changed or (req.owned is not None
                                                          and req.owned.normalized() != reconciled.assigned)
        if reconciled.member_epoch == 0 and not changed:
            # nothing assigned yet (the initial rebalance delay): no tasks, so that the client stays
            # joining and sends its topology again (an empty assignment at epoch 0 would make Kafka
            # Streams 4.3 heartbeat with epoch 0 and no topology, which is refused)
            send_tasks = False
        endpoint_epoch = group.endpoint_epoch + (1 if changed else 0)
        by_endpoint = None
        if metadata.user_endpoint is not None and req.endpoint_information_epoch < endpoint_epoch:
            by_endpoint = self._partitions_by_endpoint(group, configured, member.member_id, metadata, reconciled)
        out.reply = {"error_code": E.none, "error_message": None, "member_id": member.member_id,
                     "member_epoch": reconciled.member_epoch, "heartbeat_interval_ms": self.heartbeat_interval_ms(g),
                     "acceptable_recovery_lag": ACCEPTABLE_RECOVERY_LAG,
                     "task_offset_interval_ms": TASK_OFFSET_INTERVAL_MS,
                     "status": [{"status_code": c, "status_detail": d} for c, d in statuses],
                     "active_tasks": _wire_tasks(reconciled.assigned.active) if send_tasks else None,
                     "standby_tasks": _wire_tasks(reconciled.assigned.standby) if send_tasks else None,
                     "warmup_tasks": _wire_tasks(reconciled.assigned.warmup) if send_tasks else None,
                     "endpoint_information_epoch": endpoint_epoch, "partitions_by_user_endpoint": by_endpoint,
                     "internal_topics": internal_topics}
        return out

    @staticmethod
    def _partitions_by_endpoint(group: StreamsGroup, configured: topo.ConfiguredTopology, member_id: str,
                                metadata: StreamsGroupMemberMetadataValue, reconciled: Assignment) -> list[dict]:
        """Kafka's EndpointToPartitionsManager: per member with a user endpoint, the partitions of the
        source topics its active and standby tasks read (the answer's member with its new tasks)."""
        subs = configured.subtopologies or {}
        views = [(m.metadata, m.assigned) for m in group.members.values()
                 if m.member_id != member_id and m.metadata is not None]
        views.append((metadata, reconciled.assigned))

        def partitions(tasks) -> list[dict]:
            by_topic: dict[str, set[int]] = {}
            for s, ps in tasks.items():
                sub = subs.get(s)
                for topic in sub.source_topics if sub is not None else ():
                    by_topic.setdefault(topic, set()).update(ps)
            return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]

        return [{"user_endpoint": {"host": md.user_endpoint.host, "port": md.user_endpoint.port},
                 "active_partitions": partitions(tasks.active), "standby_partitions": partitions(tasks.standby)}
                for md, tasks in views if md.user_endpoint is not None]

    # =========================================================================================
    # leaving (-1) and fencing

    def _leave(self, req: StreamsHeartbeatRequest, topics: TopicsImage) -> Outcome:
        out = Outcome()
        group = self._streams_group(req.group_id)
        if group is None:
            raise self._not_found(req.group_id)
        member = group.members.get(req.member_id)
        if member is None:
            raise _Refused(E.unknown_member_id, f"Member {req.member_id} is not a member of group {req.group_id}.")
        self.remove_members(out, group, [member], topics, "member-left")
        self.events.append(ev.StreamsMemberLeft(group.group_id, member.member_id))
        out.reply = {**error_reply(E.none), "member_id": member.member_id, "member_epoch": LEAVE_GROUP_MEMBER_EPOCH}
        return out

    def remove_members(self, out: Outcome, group: StreamsGroup, members: list[StreamsMember],
                       topics: TopicsImage | None, reason: str) -> None:
        """Each member's tombstones and one new group epoch (the same metadata hash and configs)."""
        g = group.group_id
        for member in members:
            out.records += member_tombstones(g, member.member_id)
            self.session.pop((g, member.member_id), None)
            self.rebalance.pop((g, member.member_id), None)
        if len(members) == len(group.members):
            group.shutdown_member = None  # Kafka clears a requested shutdown once the group is empty
        self.bump_epoch(out, group, reason)

    def bump_epoch(self, out: Outcome, group: StreamsGroup, reason: str) -> None:
        """A new group epoch, with the same metadata hash and configs."""
        epoch = group.group_epoch + 1
        old = group.metadata or StreamsGroupMetadataValue(0, 0)
        out.records.append(Record(StreamsGroupMetadataKey(group.group_id), dataclasses.replace(old, epoch=epoch)))
        self.events.append(ev.StreamsGroupEpochBumped(group.group_id, epoch, reason))

    def fence(self, out: Outcome, group: StreamsGroup, members: list[StreamsMember], reason: str) -> None:
        """Remove members whose session or rebalance timeout expired (or an operator expired)."""
        self.remove_members(out, group, members, self.topics, reason)
        for member in members:
            self.events.append(ev.StreamsMemberFenced(group.group_id, member.member_id, reason))

    # =========================================================================================
    # timers

    def _config(self, group_id: str, name: str, default: int) -> int:
        return (self.settings.group_configs.get(group_id) or {}).get(name, default)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._config(group_id, STREAMS_HEARTBEAT_INTERVAL_MS, self.settings.heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._config(group_id, STREAMS_SESSION_TIMEOUT_MS, self.settings.session_timeout_ms)

    def num_standby_replicas(self, group_id: str) -> int:
        return self._config(group_id, STREAMS_NUM_STANDBY_REPLICAS, self.settings.num_standby_replicas)

    def initial_rebalance_delay_ms(self, group_id: str) -> int:
        return self._config(group_id, STREAMS_INITIAL_REBALANCE_DELAY_MS, self.settings.initial_rebalance_delay_ms)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self._config(group_id, STREAMS_ASSIGNMENT_INTERVAL_MS, self.settings.assignment_interval_ms)

    def _interval_passed(self, group: StreamsGroup, now: Now) -> bool:
        """Kafka's canComputeNextTargetAssignment: no target yet, no interval, or the interval has
        passed since the last target's timestamp (wall clock: it is the record's, and survives a
        load). A wall clock stepped back before that timestamp does not hold assignments until it
        catches up (Kafka's would)."""
        last = group.target_epoch.assignment_timestamp if group.target_epoch is not None else 0
        interval = self.assignment_interval_ms(group.group_id)
        return last == 0 or interval == 0 or not last <= now.wall < last + interval

    def arm_session(self, out: Outcome, group_id: str, member_id: str, now: Now) -> None:
        """Only the deadline moves: an armed timer that fires early re-arms itself."""
        key = (group_id, member_id)
        self.session[key] = now.mono + self.session_timeout_ms(group_id)
        out.timers.append((("streams-session",) + key, self.session[key]))

    @staticmethod
    def owns_timer(key: tuple) -> bool:
        return key[0] in ("streams-session", "streams-rebalance")

    def on_loaded(self, out: Outcome, group: StreamsGroup, now: Now) -> None:
        """After a load every member gets a full session from now (Kafka's onLoaded)."""
        for member_id in group.members:
            self.arm_session(out, group.group_id, member_id, now)

    def on_timer(self, key: tuple, now: Now) -> Outcome:
        out = Outcome()
        kind, group_id, member_id = key
        group = self._streams_group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if kind == "streams-session":
            deadline = self.session.get((group_id, member_id))
            if member is None or deadline is None:
                self.session.pop((group_id, member_id), None)
                return out
            if deadline > now.mono:  # a heartbeat moved it: fire again then
                out.timers.append((key, deadline))
                return out
            reason = "session-expired"
        else:
            epoch, deadline = self.rebalance.get((group_id, member_id), (None, 0))
            if member is None or epoch is None or member.state != MemberState.UNREVOKED_TASKS \
                    or member.member_epoch != epoch:
                self.rebalance.pop((group_id, member_id), None)
                return out
            if deadline > now.mono:
                out.timers.append((key, deadline))
                return out
            reason = "rebalance-timeout"
        self.fence(out, group, [member], reason)
        return out

    def force_rebalance(self, out: Outcome, group: StreamsGroup, now: Now) -> None:
        """An operator's rebalance (fault injection): a new group epoch."""
        self.bump_epoch(out, group, "forced")

    def expire_members(self, out: Outcome, group: StreamsGroup, member_ids: list[str], now: Now) -> None:
        """An operator's expiry of these members (fault injection): fenced as by their session timeout."""
        if member_ids:
            self.fence(out, group, [group.members[m] for m in member_ids], "forced")

    # =========================================================================================
    # StreamsGroupDescribe

    def describe(self, group_id: str, topics: TopicsImage) -> dict:
        group = self._streams_group(group_id)
        if group is None:  # Kafka's describe says "Group g not found." where its heartbeat names streams
            e = self._not_found(group_id)
            message = e.message if group_id in self.groups else f"Group {group_id} not found."
            return {"error_code": e.error, "error_message": message, "group_id": group_id, "group_state": "",
                    "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": []}
        if group.topology is not None and (group.configured is None
                                           or group.configured.metadata_hash != _metadata_hash(group.topology, topics)):
            partitions = {name: t.num_partitions for name, t in topics.by_name.items()}
            try:
                group.configured = topo.configure(group.topology, partitions, _metadata_hash(group.topology, topics))
            except topo.InvalidTopology:
                group.configured = None
        return {"error_code": E.none, "error_message": None, "group_id": group_id, "group_state": group.state_name,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "topology": _described_topology(group), "members": [
                    _described_member(m, group.targets.get(m.member_id, EMPTY)) for m in group.members.values()]}


# =============================================================================================
# helpers


def _status_name(configured: topo.ConfiguredTopology) -> str:
    if configured.ready:
        return "ready"
    return topo.STATUS_NAMES[configured.status] if configured.status is not None else "missing-internal-topics"


def _convertible(group) -> bool:
    """A group of another type a streams join takes over: an empty classic one (Kafka 4.3 converts
    it, its offsets kept)."""
    return group.type == "classic" and not group.members and group.state_name == "Empty"


def _validate(req: StreamsHeartbeatRequest) -> None:
    """GroupCoordinatorService's checks, in Kafka 4.3's order: unsupported features, then the request."""
    def invalid(message: str) -> _Refused:
        return _Refused(E.invalid_request, message)
    if req.instance_id is not None:
        raise invalid("Static membership is not yet supported.")
    if req.task_offsets_given:
        raise invalid("TaskOffsets are not supported yet.")
    if req.task_end_offsets_given:
        raise invalid("TaskEndOffsets are not supported yet.")
    if req.owned_warmup_given:
        raise invalid("WarmupTasks are not supported yet.")
    if req.regex_given:
        raise invalid("Regular expressions for source topics are not supported yet.")
    if req.member_id.strip() == "":
        raise invalid("MemberId can't be empty.")
    if req.group_id.strip() == "":
        raise invalid("GroupId can't be empty.")
    if req.rack_id is not None and req.rack_id.strip() == "":
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is not None:
            for name, tasks in (("ActiveTasks", req.owned.active), ("StandbyTasks", req.owned.standby),
                                ("WarmupTasks", req.owned.warmup)):
                if tasks:
                    raise invalid(f"{name} must be empty when (re-)joining.")
        if req.topology is None:
            raise invalid("Topology must be non-null when (re-)joining.")
        topo.validate(req.topology)
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
    if req.member_epoch != 0 and req.topology is not None:
        raise invalid("Topology can only be provided when (re-)joining.")


def _sorted(topology: StreamsGroupTopologyValue) -> StreamsGroupTopologyValue:
    """Subtopologies by id: two members' topologies compare as Kafka's maps do."""
    return dataclasses.replace(topology, subtopologies=tuple(sorted(topology.subtopologies,
                                                                    key=lambda s: s.subtopology_id)))


def _assignment(member: StreamsMember) -> Assignment:
    if member.current is None:
        return NEW_MEMBER
    return Assignment(member.member_epoch, member.previous_member_epoch, member.state, member.assigned, member.pending,
                      member.active_epochs())


def _current_value(a: Assignment) -> StreamsGroupCurrentMemberAssignmentValue:
    """The record; active tasks (assigned and pending revocation) with their AssignmentEpochs."""
    return StreamsGroupCurrentMemberAssignmentValue(
        a.member_epoch, a.previous_member_epoch, int(a.state),
        task_ids(a.assigned.active, True, a.epochs), task_ids(a.assigned.standby, True),
        task_ids(a.assigned.warmup, True), task_ids(a.pending.active, True, a.epochs),
        task_ids(a.pending.standby, True), task_ids(a.pending.warmup, True))


def _updated_metadata(old: StreamsGroupMemberMetadataValue | None,
                      req: StreamsHeartbeatRequest) -> StreamsGroupMemberMetadataValue:
    """Null fields keep what is stored (Kafka's StreamsGroupMember.Builder.maybeUpdate…)."""
    if old is None:
        old = StreamsGroupMemberMetadataValue(None, None, req.client_id, req.client_host, -1, -1, "", None, ())
    value = StreamsGroupMemberMetadataValue(
        None, req.rack_id if req.rack_id is not None else old.rack_id, req.client_id, req.client_host,
        req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else old.rebalance_timeout_ms,
        req.topology.epoch if req.topology is not None else old.topology_epoch,
        req.process_id if req.process_id is not None else old.process_id,
        StreamsEndpoint(*req.user_endpoint) if req.user_endpoint is not None else old.user_endpoint,
        tuple(StreamsKeyValue(k, v) for k, v in req.client_tags) if req.client_tags is not None else old.client_tags)
    return old if value == old else value


def _topology_topics(topology: StreamsGroupTopologyValue) -> set[str]:
    names = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(t.name for t in s.repartition_source_topics)
        names.update(t.name for t in s.state_changelog_topics)
    return names


def _metadata_hash(topology: StreamsGroupTopologyValue, topics: TopicsImage) -> int:
    """A hash of the topology's topics that exist (name, id, partition count); 0 for none: it moves
    when one is created, deleted or grows, and the group epoch follows."""
    names = sorted(n for n in _topology_topics(topology) if n in topics.by_name)
    if not names:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for n in names:
        t = topics.by_name[n]
        h.update(f"{n}\0{t.topic_id}\0{t.num_partitions}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def _wire_tasks(tasks) -> list[dict]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items()) if ps]


def _described_topology(group: StreamsGroup) -> dict | None:
    if group.topology is None:
        return None
    configured = group.configured
    subtopologies = None
    if configured is not None and configured.subtopologies is not None:
        by_id = {s.subtopology_id: s for s in group.topology.subtopologies}

        def infos(infos, counts) -> list[dict]:
            return [{"name": t.name, "partitions": counts.get(t.name, t.partitions),
                     "replication_factor": t.replication_factor,
                     "topic_configs": [{"key": c.key, "value": c.value} for c in t.topic_configs]} for t in infos]

        # the source topics as the member sent them (Kafka echoes them): the repartition ones a
        # subtopology reads are listed apart, so kafka-streams-groups.sh's input topics leave them out
        subtopologies = [{"subtopology_id": s, "source_topics": list(by_id[s].source_topics),
                          "repartition_sink_topics": list(c.repartition_sink_topics),
                          "state_changelog_topics": infos(by_id[s].state_changelog_topics, c.changelogs),
                          "repartition_source_topics": infos(by_id[s].repartition_source_topics, c.repartition_sources)}
                         for s, c in configured.subtopologies.items()]
    return {"epoch": group.topology.epoch, "subtopologies": subtopologies}


def _described_member(m: StreamsMember, target: Tasks) -> dict:
    md = m.metadata

    def assignment(t: Tasks) -> dict:
        return {"active_tasks": _wire_tasks(t.active), "standby_tasks": _wire_tasks(t.standby),
                "warmup_tasks": _wire_tasks(t.warmup)}

    return {"member_id": m.member_id, "member_epoch": m.member_epoch,
            "instance_id": md.instance_id if md else None, "rack_id": md.rack_id if md else None,
            "client_id": md.client_id if md else "", "client_host": md.client_host if md else "",
            "topology_epoch": md.topology_epoch if md else -1, "process_id": md.process_id if md else "",
            "user_endpoint": {"host": md.user_endpoint.host, "port": md.user_endpoint.port}
            if md and md.user_endpoint else None,
            "client_tags": [{"key": kv.key, "value": kv.value} for kv in (md.client_tags if md else ())],
            "task_offsets": [], "task_end_offsets": [], "assignment": assignment(m.assigned),
            "target_assignment": assignment(target), "is_classic": False}
