"""The consumer-group (KIP-848) state machine (spec §2, §3, §5, §6): ConsumerGroupHeartbeat —
joins, regular heartbeats, -1/-2 leaves, static membership — and the session and rebalance timers,
over the consumer groups of one partition; ConsumerGroupDescribe reads. Sans-IO: each operation
takes the request, a snapshot of topic metadata and `now`, and returns an `Outcome` whose records
the partition applies when the runner appends them (coordinator/core/consumer/group.py). Over 500 lines
because a heartbeat is one ordered pass (spec §5: validate, find the member, update it, bump the
group epoch, compute the target, reconcile, answer) that joins, leaves and timers share; the pure steps
live beside it (assignors.py, target_assignment.py, reconciliation.py, migration.py, regex_resolution.py).

Regexes resolve as Kafka's do (§6.2): a heartbeat asks for a resolution as an effect the shell runs
off the request's path, and the result comes back as `regexes_resolved`, through the same records.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable, Mapping

from groupd.coordinator.core import events as ev
from groupd.coordinator.core.clock import Now
from groupd.coordinator.core.group_config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS
from groupd.coordinator.core.outcome import Effect, Outcome, reply_when_written
from groupd.protocol import ErrorCode
from groupd.storage.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    topic_partitions,
)
from groupd.storage.consumer_records import (
    TopicMetadata as TopicMetadataRecord,
)
from groupd.storage.records import GroupMetadataKey, Record

from .assignors import ASSIGNORS, PartitionAssignorError, TopicMetadata
from .group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    current_value,
    member_tombstones,
    target_member_of,
)
from .migration import (
    CannotConvert,
    can_downgrade,
    converted_view,
    downgrade_records,
    upgrade_records,
    validate_online_upgrade,
)
from .reconciliation import (
    NEW_MEMBER,
    FencedMemberEpoch,
    MemberAssignment,
    MemberState,
    reconcile,
    validate_member_epoch,
)
from .regex_resolution import regex_change, regexes_to_resolve, resolve, result_records
from .target_assignment import TargetMember, build_target_assignment, preferred_assignor
from .topic_regex import InvalidRegularExpression, compile_topic_regex

E = ErrorCode

EPOCH_BUMP_REASONS = ("new-group", "subscription-changed", "metadata-changed", "regex-resolved", "member-left",
                      "member-fenced", "session-expired", "rebalance-timeout", "join-timeout", "sync-timeout", "forced")


@dataclasses.dataclass(frozen=True, slots=True)
class TopicsImage:
    """The node's topics as the shell saw them: `version` changes whenever a topic is created,
    deleted or grows, which makes every group refresh its subscription metadata lazily."""

    version: int
    by_name: Mapping[str, TopicMetadata]
    by_id: Mapping[uuid.UUID, TopicMetadata]
    created_version: int = -1  # the version of the last topic creation: regexes re-resolve after it

    @classmethod
    def of(cls, version: int, topics, created_version: int | None = None) -> TopicsImage:
        by_name = {t.name: TopicMetadata(t.topic_id, t.name, t.partitions) for t in topics}
        return cls(version, by_name, {t.topic_id: t for t in by_name.values()},
                   version if created_version is None else created_version)


@dataclasses.dataclass(slots=True)
class ConsumerSettings:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2147483647
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy (spec §7.4)
    classic_max_size: int = 2147483647  # group.max.size: a downgraded group must fit
    regex_refresh_interval_ms: int = 600000  # group.consumer.regex.refresh.interval.ms
    regex_min_refresh_interval_ms: int = 10000  # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (a constant)
    # per-group overrides (coordinator/core/group_config.py): group id → name → value; the shell keeps it current
    group_configs: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class ConsumerHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: list[tuple[uuid.UUID, list[int]]] | None = None  # owned; None = unchanged
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    classic: ClassicMemberMetadata | None = None  # a classic-protocol member's JoinGroup (spec §7.3)
    # the topics this member's principal may DESCRIBE: a regex it triggers resolves to those only
    # (spec §6.2); None = every topic (no authorizer)
    describable: Callable[[str], bool] | None = None


def error_reply(error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}


def _blank(s: str | None) -> bool:
    return s is not None and s.strip() == ""


class ConsumerMachine:
    def __init__(self, groups: dict, settings: ConsumerSettings, new_member_id: Callable[[], str], events: list,
                 perf_ms: Callable[[], float] = lambda: 0.0,
                 downgraded: Callable[[str, Now, bool], Outcome] = lambda group_id, now, rebalance: Outcome(),
                 ) -> None:
        self.groups = groups  # the partition's registry, shared with every group type
        self.settings = settings
        self.new_member_id = new_member_id  # a random UUID as 22-char URL-safe base64 (v0 joins)
        self.events = events
        self._perf_ms = perf_ms  # a cost meter for the target computation (events only; no deadlines)
        self.downgraded = downgraded  # the classic machine takes over a downgraded group (spec §7.4)
        # timers, as deadlines on the monotonic clock (memory only): (group, member) → deadline,
        # and (group, member) → (deadline, member epoch it was armed at)
        self.session: dict[tuple[str, str], int] = {}
        self.rebalance: dict[tuple[str, str], tuple[int, int]] = {}
        # a classic member's join and sync deadlines (spec §7.3): checked when its session timer fires
        self.classic_deadlines: dict[tuple[str, str], tuple[int, str]] = {}  # → (deadline, reason)
        self.topics: TopicsImage | None = None  # the last image a heartbeat brought (timers have none)
        self.resolving: set[str] = set()  # groups with a regex resolution in flight (at most one each)

    # =========================================================================================
    # ConsumerGroupHeartbeat

    def heartbeat(self, req: ConsumerHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        error = self._validate(req)
        if error is not None:
            return Outcome(reply=error)
        self.topics = topics
        resolving = req.group_id in self.resolving
        try:
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                out = self._leave(req, now)
            else:
                out = self.join_or_heartbeat(req, topics, now)
        except (FencedMemberEpoch, InvalidRegularExpression, PartitionAssignorError) as e:
            if not resolving:  # a resolution this heartbeat asked for is dropped with its outcome
                self.resolving.discard(req.group_id)
            return Outcome(reply=error_reply(_ERRORS[type(e)], str(e)))
        if out.records:  # answered once durable; a failed write answers its error (the runner reverted it)
            reply_when_written(out, out.reply, error_reply)
        return out

    def steady_heartbeat(self, req: ConsumerHeartbeatRequest, topics: TopicsImage, now: Now) -> dict | None:
        """The short cut for the heartbeat most requests are: a known consumer-protocol member at the
        group's epoch, reconciled (stable, nothing pending revocation), sending nothing new (every
        optional field null or equal to what it has: the Java client resends its instance id,
        librdkafka its rack and rebalance timeout), in a group with no regex to refresh and no topic
        change to look at. The reply `heartbeat` would give, with the only state it would change (the
        session deadline, the last topics image), and no records, events or timers; None when any of
        that may not hold: the caller then takes `heartbeat`. tests/core/test_consumer_steady_heartbeat.py
        checks both agree."""
        group = self.groups.get(req.group_id)
        if type(group) is not ConsumerGroup:
            return None
        member = group.members.get(req.member_id)
        if member is None or member.current is None:
            return None
        assignment = member.assignment
        epoch = req.member_epoch
        metadata = member.metadata
        if (epoch <= 0 or epoch != assignment.member_epoch or assignment.state is not MemberState.STABLE
                or epoch != group.group_epoch or epoch != group.assignment_epoch
                or group.metadata_version != topics.version or group.subscribed_regexes
                or metadata is None or metadata.classic_member_metadata is not None
                or req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
                or req.topic_partitions is not None or req.classic is not None
                or req.client_id != metadata.client_id or req.client_host != metadata.client_host):
            return None
        if not (req.instance_id is None and req.rack_id is None and req.server_assignor is None
                and req.rebalance_timeout_ms == -1) and not self._resends_what_it_has(group, req, metadata):
            return None
        key = (req.group_id, req.member_id)
        deadline = now.mono + self.session_timeout_ms(req.group_id, metadata)
        armed = self.session.get(key)
        if armed is None or deadline < armed:  # an earlier deadline (a shorter timeout) re-arms the timer
            return None
        self.session[key] = deadline  # the armed timer fires no later than this and re-arms (spec §2.4)
        self.topics = topics
        return {"error_code": E.none, "error_message": None, "member_id": req.member_id, "member_epoch": epoch,
                "heartbeat_interval_ms": self.heartbeat_interval_ms(req.group_id), "assignment": None}

    def _resends_what_it_has(self, group: ConsumerGroup, req: ConsumerHeartbeatRequest,
                             metadata: ConsumerGroupMemberMetadataValue) -> bool:
        """Whether the optional fields a steady heartbeat carries are each null (-1) or equal to the
        member's and valid, so that `updated_metadata` gives back a value equal to `metadata`."""
        if req.instance_id is not None and (req.instance_id != metadata.instance_id or _blank(req.instance_id)
                                            or group.static_members.get(req.instance_id) != req.member_id):
            return False
        if req.rack_id is not None and (req.rack_id != metadata.rack_id or _blank(req.rack_id)):
            return False
        if req.server_assignor is not None and (req.server_assignor != metadata.server_assignor
                                                or req.server_assignor not in self.settings.assignors):
            return False
        return req.rebalance_timeout_ms in (-1, metadata.rebalance_timeout_ms)

    def _validate(self, req: ConsumerHeartbeatRequest) -> dict | None:
        """Spec §5 step 4: INVALID_REQUEST with Kafka's messages, UNSUPPORTED_ASSIGNOR."""
        def invalid(message: str) -> dict:
            return error_reply(E.invalid_request, message)
        if req.group_id.strip() == "":
            return invalid("GroupId can't be empty.")
        if _blank(req.instance_id):
            return invalid("InstanceId can't be empty.")
        if _blank(req.rack_id):
            return invalid("RackId can't be empty.")
        if req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return invalid("MemberEpoch is invalid.")
        if req.member_id.strip() == "" and (req.version >= 1 or req.member_epoch != 0):
            return invalid("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or len(req.topic_partitions) > 0:
                return invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and req.instance_id is None:
            return invalid("InstanceId can't be null.")
        if req.server_assignor is not None and req.server_assignor not in self.settings.assignors:
            return error_reply(E.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported. "
                               f"Supported assignors: {', '.join(self.settings.assignors)}.")
        return None

    def _consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def join_or_heartbeat(self, req: ConsumerHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        out = Outcome()
        existing = self.groups.get(req.group_id)
        if existing is None or not isinstance(existing, ConsumerGroup):
            # Kafka's answers to a heartbeat that cannot create the group (only a classic one converts)
            if req.member_epoch != 0 or (existing is not None and existing.type != "classic"):
                out.reply = error_reply(E.group_id_not_found, f"Group {req.group_id} not found." if existing is None
                                        else f"Group {req.group_id} is not a consumer group.")
                return out
            if existing is not None and existing.state_name != "Empty":
                try:  # online upgrade (spec §7.4), whatever the classic group's state
                    group = self._upgrade(out, existing, topics, now)
                except CannotConvert as e:
                    self.events.append(ev.UpgradeRefused(req.group_id, e.reason, str(e), e.detail))
                    out.reply = error_reply(E.group_id_not_found, str(e))
                    return out
            else:
                if existing is not None:  # an empty classic group is replaced
                    out.records.append(Record(GroupMetadataKey(req.group_id), None))
                group = ConsumerGroup(req.group_id)  # a view: the records below create the registered one
        else:
            group = existing
        s = self.settings
        found = self._find_member(group, req)
        if isinstance(found, dict):
            out.reply = found
            return out
        member_id, member, replaced = found

        old_metadata = replaced.metadata if replaced is not None else member.metadata if member is not None else None
        assignment = (member.assignment if member is not None and member.current is not None else NEW_MEMBER)
        if replaced is not None:
            assignment = MemberAssignment(0, 0, MemberState.STABLE, replaced.assignment.assigned_partitions, {})
            out.records += member_tombstones(group.group_id, replaced.member_id)
            self.events.append(ev.ConsumerStaticMemberReplaced(group.group_id, req.instance_id, replaced.member_id,
                                                               member_id))
        metadata = self.updated_metadata(old_metadata, req)
        joined = member is None and replaced is None

        # -- the group epoch (spec §3.1): a new regex bumps it only once its resolution lands (§6.2)
        bump_reason = "new-group" if group.group_epoch == 0 else None
        old_names = old_metadata.subscribed_topic_names if old_metadata is not None else ()
        old_regex = old_metadata.subscribed_topic_regex if old_metadata is not None else None
        names_changed = set(old_names) != set(metadata.subscribed_topic_names)
        regex_changed = old_regex != metadata.subscribed_topic_regex
        subscription_changed = names_changed or regex_changed  # the member reconciles against it at once
        regex_resolved = self._update_regexes(out, group, old_regex, metadata.subscribed_topic_regex, topics, now,
                                              req.describable)
        if (names_changed or regex_resolved) and bump_reason is None:
            bump_reason = "subscription-changed"
        if metadata != old_metadata or replaced is not None:
            out.records.append(Record(ConsumerGroupMemberMetadataKey(group.group_id, member_id), metadata))

        resolved = None  # regex → its topics, as resolved so far: built when needed
        if bump_reason is not None or subscription_changed or group.metadata_version != topics.version:
            resolved = _resolved(group)
            regexes_in_use = self._regexes_in_use(group, member_id, metadata)
            group.metadata_version = topics.version  # memory only: when this group last looked at the topics
            subscribed = self._subscribed_names(group, member_id, metadata, regexes_in_use, resolved)
            if self._write_subscription_metadata(out, group, subscribed, topics) and bump_reason is None:
                bump_reason = "metadata-changed"
        group_epoch = group.group_epoch
        if bump_reason is not None:
            group_epoch += 1
            out.records.append(Record(ConsumerGroupMetadataKey(group.group_id),
                                      ConsumerGroupMetadataValue(group_epoch)))
            self.events.append(ev.ConsumerGroupEpochBumped(group.group_id, group_epoch, bump_reason))

        # -- the target assignment (spec §3.2)
        target_epoch = group.assignment_epoch
        target = group.target_of(replaced.member_id if replaced is not None else member_id)
        if group_epoch > target_epoch:
            if resolved is None:
                resolved = _resolved(group)
            updated: dict[str, TargetMember | None] = {member_id: target_member_of(metadata)}
            if replaced is not None:
                updated[replaced.member_id] = None
            members = {m.member_id: m.target_member() for m in group.members.values()}
            voters = {k: v for k, v in {**members, **updated}.items() if v is not None}
            assignor_name = preferred_assignor(voters, s.assignors)
            started = self._perf_ms()
            result = build_target_assignment(group.group_id, group_epoch, ASSIGNORS[assignor_name], members,
                                             group.target_assignment, topics.by_id, updated_members=updated,
                                             static_members=group.static_members, resolved_regexes=resolved)
            self.events.append(ev.ConsumerTargetAssignmentComputed(
                group.group_id, group_epoch, len(result.target_assignment), assignor_name, self._perf_ms() - started))
            out.records += result.records
            target_epoch = group_epoch
            target = result.target_assignment.get(member_id, {})
        elif replaced is not None:  # the new member inherits the departed one's target
            out.records.append(Record(ConsumerGroupTargetAssignmentMemberKey(group.group_id, member_id),
                                      ConsumerGroupTargetAssignmentMemberValue(topic_partitions(target))))

        # -- reconciliation (spec §4)
        owned = req.topic_partitions
        updated_assignment = assignment
        if not (assignment.state is MemberState.STABLE and assignment.member_epoch == target_epoch
                and not subscription_changed):
            updated_assignment = reconcile(assignment, target_epoch, target, owned, group.partition_epoch)
        key = (group.group_id, member_id)
        if updated_assignment is not assignment or joined or replaced is not None or member.current is None:
            out.records.append(Record(ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member_id),
                                      current_value(updated_assignment)))
            if updated_assignment.state is MemberState.UNREVOKED_PARTITIONS:
                deadline = now.mono + metadata.rebalance_timeout_ms
                self.rebalance[key] = (deadline, updated_assignment.member_epoch)
                out.timers.append((("consumer-rebalance",) + key, deadline))
            else:
                self.rebalance.pop(key, None)
            if updated_assignment.assigned_partitions != assignment.assigned_partitions:
                self.events.append(ev.ConsumerAssignmentChanged(
                    group.group_id, member_id, updated_assignment.member_epoch,
                    sum(map(len, updated_assignment.assigned_partitions.values()))))
        if joined:
            self.events.append(ev.ConsumerMemberJoined(group.group_id, member_id, req.instance_id, group_epoch))

        # -- the session timer: only the deadline moves (spec §2.4)
        self.arm_session(out, group.group_id, member_id, metadata, now)

        full = (req.rebalance_timeout_ms != -1 and owned is not None
                and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        send_assignment = (req.member_epoch == 0 or full
                           or updated_assignment.assigned_partitions != assignment.assigned_partitions)
        out.reply = {"error_code": E.none, "error_message": None, "member_id": member_id,
                     "member_epoch": updated_assignment.member_epoch,
                     "heartbeat_interval_ms": self.heartbeat_interval_ms(group.group_id),
                     "assignment": {"topic_partitions": [
                         {"topic_id": t, "partitions": sorted(ps)}
                         for t, ps in sorted(updated_assignment.assigned_partitions.items()) if ps]}
                     if send_assignment else None}
        return out

    def _upgrade(self, out: Outcome, classic, topics: TopicsImage, now: Now) -> ConsumerGroup:
        """The live classic group becomes a consumer group: its records, its parked JoinGroup and
        SyncGroup answered REBALANCE_IN_PROGRESS, a session per member; the view to go on with.
        Kafka's order: the policy, protocol type and size are checked first (a refusal leaves the
        parked requests alone); the parked requests are answered before the members' protocols are
        read, so a malformed one or a custom assignor's userData refuses with them answered."""
        validate_online_upgrade(classic, self.settings.migration_policy, self.settings.max_size)
        out.released += classic.release_parked(E.rebalance_in_progress, name_members=True)
        records = upgrade_records(classic, topics.by_name)
        out.records += records
        group = converted_view(classic.group_id, records)
        for member_id, member in group.members.items():
            self.arm_session(out, group.group_id, member_id, member.metadata, now)
        self.events.append(ev.GroupConverted(group.group_id, "upgrade", len(group.members)))
        return group

    def _find_member(self, group: ConsumerGroup, req: ConsumerHeartbeatRequest):
        """(member id, the member or None for a new one, the static member it replaces or None), or the
        error reply (spec §5 step 6, §6.1). Raises FencedMemberEpoch."""
        limit = self.settings.max_size
        if req.member_id not in group.members and len(group.members) >= limit:
            return error_reply(E.group_max_size_reached,
                               f"The consumer group has reached its maximum capacity of {limit} members.")
        member_id = req.member_id or self.new_member_id()
        member = group.members.get(member_id)
        replaced: ConsumerMember | None = None
        if req.instance_id is not None:
            holder_id = group.static_members.get(req.instance_id)
            if req.member_epoch == 0:
                if holder_id is not None and holder_id != member_id:
                    replaced = group.members[holder_id]
                    # between consumer-protocol members only one that left with -2 may be replaced; a
                    # classic member on either side replaces at once (it sends no -2; KAFKA-17228)
                    if (replaced.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and req.classic is None
                            and replaced.classic is None):
                        return error_reply(E.unreleased_instance_id, f"Static member {holder_id} with instance id "
                                                                     f"{req.instance_id} is not released yet.")
            elif holder_id is None:
                return error_reply(E.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
            elif holder_id != member_id:
                return error_reply(E.fenced_instance_id, f"Instance id {req.instance_id} is held by another member.")
        if member is None and replaced is None and req.member_epoch != 0:
            return error_reply(E.unknown_member_id, f"Member {member_id} is not a member of the group.")
        if member is not None and req.member_epoch != 0:
            validate_member_epoch(member.assignment, req.member_epoch, req.topic_partitions)
        # epoch 0 from a known member is a rejoin the heartbeat serves as usual (KAFKA-19233)
        return member_id, member, replaced

    def updated_metadata(self, old: ConsumerGroupMemberMetadataValue | None,
                          req: ConsumerHeartbeatRequest) -> ConsumerGroupMemberMetadataValue:
        """Null / -1 fields keep what is stored (spec §2.5); an empty regex drops it."""
        if (old is not None and req.subscribed_topic_names is None and req.subscribed_topic_regex is None
                and req.rebalance_timeout_ms == -1 and req.rack_id is None and req.server_assignor is None
                and req.instance_id in (None, old.instance_id) and req.client_id == old.client_id
                and req.client_host == old.client_host and req.classic in (None, old.classic_member_metadata)):
            return old  # the steady heartbeat: nothing to rewrite
        if old is None:
            old = ConsumerGroupMemberMetadataValue(None, None, req.client_id, req.client_host, (), None)
        regex = old.subscribed_topic_regex
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            if regex is not None and regex != old.subscribed_topic_regex:
                compile_topic_regex(regex)  # raises InvalidRegularExpression
        names = old.subscribed_topic_names
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
        return dataclasses.replace(
            old,
            instance_id=req.instance_id if req.instance_id is not None else old.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else old.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=names, subscribed_topic_regex=regex,
            rebalance_timeout_ms=(old.rebalance_timeout_ms if req.rebalance_timeout_ms == -1
                                  else req.rebalance_timeout_ms),
            server_assignor=req.server_assignor if req.server_assignor is not None else old.server_assignor,
            classic_member_metadata=req.classic if req.classic is not None else old.classic_member_metadata)

    @staticmethod
    def _regexes_in_use(group: ConsumerGroup, member_id: str,
                        metadata: ConsumerGroupMemberMetadataValue | None) -> set[str]:
        """Every regex some member subscribes to, with `member_id`'s subscription as `metadata`."""
        # from the group's subscriber counts (not a walk over every member: this runs on every join)
        member = group.members.get(member_id)
        own = member.subscribed_topic_regex if member is not None else None
        in_use = {r for r, n in group.subscribed_regexes.items() if n > (r == own)}
        if metadata is not None and metadata.subscribed_topic_regex:
            in_use.add(metadata.subscribed_topic_regex)
        return in_use

    @staticmethod
    def _write_subscription_metadata(out: Outcome, group: ConsumerGroup, subscribed: set[str],
                                     topics: TopicsImage) -> bool:
        """The record of the subscribed topics that exist (ids, partition counts), when it changed."""
        value = ConsumerGroupPartitionMetadataValue(tuple(
            TopicMetadataRecord(t.topic_id, t.name, t.num_partitions)
            for t in sorted((topics.by_name[n] for n in subscribed if n in topics.by_name), key=lambda t: t.name)))
        if value == (group.subscription_metadata or ConsumerGroupPartitionMetadataValue(())):
            return False
        out.records.append(Record(ConsumerGroupPartitionMetadataKey(group.group_id), value))
        return True

    @staticmethod
    def _subscribed_names(group: ConsumerGroup, member_id: str, metadata: ConsumerGroupMemberMetadataValue,
                          regexes: set[str], resolved: Mapping[str, frozenset[str]]) -> set[str]:
        """The topic names the group subscribes to, by name or through a regex, with `member_id`'s
        subscription as `metadata`."""
        member = group.members.get(member_id)
        own = Counter(member.subscribed_topic_names) if member is not None else Counter()
        names = {n for n, count in group.subscribed_names.items() if count > own[n]}  # the others' (counts)
        names.update(metadata.subscribed_topic_names)
        for r in regexes:
            names.update(resolved.get(r, ()))
        return names

    # =========================================================================================
    # regex resolution (spec §6.2; the rules in regex_resolution.py)

    def _update_regexes(self, out: Outcome, group: ConsumerGroup, old_regex: str | None, new_regex: str | None,
                        topics: TopicsImage, now: Now, describable: Callable[[str], bool] | None = None) -> bool:
        """A member's regex change, and maybe a resolution of all the group's regexes (keeping the
        topics `describable` says this member's principal may describe, as Kafka filters by the
        triggering member's ACLs); whether the change takes effect at once (a new group epoch)."""
        tombstones, required, takes_effect = regex_change(group, old_regex, new_regex)
        out.records += tombstones
        if (required or group.subscribed_regexes) and group.group_id not in self.resolving:
            s = self.settings
            regexes = regexes_to_resolve(group, old_regex, new_regex, required, topics.created_version, now.wall,
                                         s.regex_min_refresh_interval_ms, s.regex_refresh_interval_ms)
            if regexes:
                self.resolving.add(group.group_id)
                out.effects.append(self._resolution(group.group_id, regexes, topics, describable))
        return takes_effect

    def _resolution(self, group_id: str, regexes: frozenset[str], topics: TopicsImage,
                    describable: Callable[[str], bool] | None) -> Effect:
        names = topics.by_name  # an image is never changed once built: safe to read from a worker thread

        def done(result: Mapping[str, frozenset[str]] | None, error: BaseException | None, now: Now) -> Outcome:
            if result is not None and describable is not None:  # the ACL check runs back on the loop
                result = {regex: frozenset(filter(describable, matched)) for regex, matched in result.items()}
            return self.regexes_resolved(group_id, result, error, topics, now)

        return Effect(("consumer-regex", group_id), lambda: resolve(regexes, names), done,
                      weight=len(names) * len(regexes))

    def regexes_resolved(self, group_id: str, resolved: Mapping[str, frozenset[str]] | None,
                         error: BaseException | None, topics: TopicsImage, now: Now) -> Outcome:
        """A resolution's result comes back: its records, and a new group epoch when a regex's topics
        (and so the subscribed topics) changed."""
        self.resolving.discard(group_id)
        out = Outcome()
        group = self._consumer_group(group_id)
        if group is None:
            return out
        if error is not None:
            self.events.append(ev.ConsumerRegexResolutionFailed(group_id, repr(error)))
            return out
        out.records, current, changed = result_records(group, resolved, topics.version, now.wall)
        latest = self.topics if self.topics is not None and self.topics.version >= topics.version else topics
        subscribed = set(group.subscribed_names)
        for regex in group.subscribed_regexes:
            subscribed.update(current.get(regex, ()))
        changed = self._write_subscription_metadata(out, group, subscribed, latest) or changed
        if changed:
            epoch = group.group_epoch + 1
            out.records.append(Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch)))
            self.events.append(ev.ConsumerGroupEpochBumped(group_id, epoch, "regex-resolved"))

        def written(write_error, at: Now) -> Outcome:
            if write_error is None and self._consumer_group(group_id) is group:
                group.regex_version = topics.version  # memory only: what the next check compares with
            return Outcome()

        out.after_write = written
        return out

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's consumer.heartbeat.interval.ms, else the broker's (spec §2.4)."""
        overrides = self.settings.group_configs.get(group_id)
        if overrides is None:
            return self.settings.heartbeat_interval_ms
        return overrides.get(CONSUMER_HEARTBEAT_INTERVAL_MS, self.settings.heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str, metadata: ConsumerGroupMemberMetadataValue | None) -> int:
        """A classic-protocol member keeps the session timeout of its JoinGroup (spec §7.3); a
        consumer-protocol one gets the group's consumer.session.timeout.ms, else the broker's."""
        classic = metadata.classic_member_metadata if metadata is not None else None
        if classic is not None:
            return classic.session_timeout_ms
        overrides = self.settings.group_configs.get(group_id)
        if overrides is None:
            return self.settings.session_timeout_ms
        return overrides.get(CONSUMER_SESSION_TIMEOUT_MS, self.settings.session_timeout_ms)

    def arm_session(self, out: Outcome | None, group_id: str, member_id: str,
                    metadata: ConsumerGroupMemberMetadataValue | None, now: Now) -> None:
        """Only the deadline moves (spec §2.4): an armed timer that fires early re-arms itself."""
        key = (group_id, member_id)
        self.session[key] = now.mono + self.session_timeout_ms(group_id, metadata)
        if out is not None:
            out.timers.append((("consumer-session",) + key, self.session[key]))

    # =========================================================================================
    # leaving (-1, -2) and fencing (spec §2.7, §6.1)

    def _leave(self, req: ConsumerHeartbeatRequest, now: Now) -> Outcome:
        out = Outcome()
        group = self._consumer_group(req.group_id)
        if group is None:
            out.reply = error_reply(E.group_id_not_found, f"Group {req.group_id} not found.")
            return out
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                out.reply = error_reply(E.unknown_member_id, f"Member {req.member_id} is not a member of the group.")
                return out
        else:
            holder_id = group.static_members.get(req.instance_id)
            if holder_id is None:
                out.reply = error_reply(E.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
                return out
            if holder_id != req.member_id:
                out.reply = error_reply(E.fenced_instance_id,
                                        f"Instance id {req.instance_id} is held by another member.")
                return out
            member = group.members[holder_id]
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # a static member bounces: it keeps its partitions at epoch -2; no new group epoch
            a = member.assignment
            left = MemberAssignment(LEAVE_GROUP_STATIC_MEMBER_EPOCH, a.member_epoch, a.state, a.assigned_partitions, {})
            out.records.append(Record(ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member.member_id),
                                      current_value(left)))
            self.rebalance.pop((group.group_id, member.member_id), None)
            self.events.append(ev.ConsumerMemberLeft(group.group_id, member.member_id, req.instance_id, temporary=True))
        else:
            self.remove_members(out, group, [member], "member-left", now)
            self.events.append(ev.ConsumerMemberLeft(group.group_id, member.member_id, req.instance_id,
                                                     temporary=False))
        out.reply = {"error_code": E.none, "error_message": None, "member_id": member.member_id,
                     "member_epoch": req.member_epoch, "heartbeat_interval_ms": 0, "assignment": None}
        return out

    def remove_members(self, out: Outcome, group: ConsumerGroup, members: list[ConsumerMember], reason: str,
                       now: Now) -> None:
        """Each member's tombstones, the regexes only they used, and one new group epoch (spec §2.7);
        or, when only classic members stay, the group's downgrade (spec §7.4)."""
        gone = {m.member_id for m in members}
        staying = [m for m in group.members.values() if m.member_id not in gone]
        if can_downgrade(staying, self.settings.migration_policy, self.settings.classic_max_size):
            out.records += downgrade_records(group, staying, now.wall)
            self.events.append(ev.GroupConverted(group.group_id, "downgrade", len(staying)))
            out.after_write = lambda error, at: (Outcome() if error is not None
                                                 else self.downgraded(group.group_id, at, True))
            for member_id in group.members:
                self.forget(group.group_id, member_id)
            return
        in_use = {m.subscribed_topic_regex for m in staying if m.subscribed_topic_regex}
        for member in members:
            out.records += member_tombstones(group.group_id, member.member_id)
        for regex in {m.subscribed_topic_regex for m in members} & set(group.regexes) - in_use:
            out.records.append(Record(ConsumerGroupRegularExpressionKey(group.group_id, regex), None))
        if self.topics is not None:
            resolved = _resolved(group)
            subscribed = {n for m in staying for n in m.subscribed_topic_names}
            subscribed.update(*(resolved.get(r, ()) for r in in_use))
            self._write_subscription_metadata(out, group, subscribed, self.topics)
        self.bump_epoch(out, group, reason)
        for member_id in gone:
            self.forget(group.group_id, member_id)

    def bump_epoch(self, out: Outcome, group: ConsumerGroup, reason: str) -> None:
        """A new group epoch: every member's next heartbeat gets the target assignment of it."""
        epoch = group.group_epoch + 1
        out.records.append(Record(ConsumerGroupMetadataKey(group.group_id), ConsumerGroupMetadataValue(epoch)))
        self.events.append(ev.ConsumerGroupEpochBumped(group.group_id, epoch, reason))

    def fence(self, out: Outcome, group: ConsumerGroup, members: list[ConsumerMember], reason: str,
              now: Now) -> None:
        """Remove members whose session or rebalance timeout expired (or an operator expired)."""
        self.remove_members(out, group, members, reason, now)
        for member in members:
            self.events.append(ev.ConsumerMemberFenced(group.group_id, member.member_id, member.instance_id, reason))

    def force_rebalance(self, out: Outcome, group: ConsumerGroup, now: Now) -> None:
        """An operator's rebalance (fault injection): a new group epoch."""
        self.bump_epoch(out, group, "forced")

    def expire_members(self, out: Outcome, group: ConsumerGroup, member_ids: list[str], now: Now) -> None:
        """An operator's expiry of these members (fault injection): fenced as by their session timeout."""
        if member_ids:
            self.fence(out, group, [group.members[m] for m in member_ids], "forced", now)

    @staticmethod
    def owns_timer(key: tuple) -> bool:
        return key[0].startswith("consumer")

    def forget(self, group_id: str, member_id: str) -> None:
        """A removed member's timers."""
        for timers in (self.session, self.rebalance, self.classic_deadlines):
            timers.pop((group_id, member_id), None)

    # =========================================================================================
    # timers

    def on_loaded(self, out: Outcome, group: ConsumerGroup, now: Now) -> None:
        """The partition has replayed its log: every member gets a full session from now, and one
        that still has partitions to revoke a full rebalance timeout (as Kafka's onLoaded)."""
        for member_id, member in group.members.items():
            key = (group.group_id, member_id)
            self.arm_session(out, group.group_id, member_id, member.metadata, now)
            if member.assignment.state is MemberState.UNREVOKED_PARTITIONS and member.metadata is not None:
                deadline = now.mono + member.metadata.rebalance_timeout_ms
                self.rebalance[key] = (deadline, member.member_epoch)
                out.timers.append((("consumer-rebalance",) + key, deadline))

    def on_timer(self, key: tuple, now: Now) -> Outcome:
        out = Outcome()
        kind, group_id, member_id = key
        group = self._consumer_group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if kind == "consumer-session":
            deadline = self.session.get((group_id, member_id))
            if member is None or deadline is None:
                self.session.pop((group_id, member_id), None)
                self.classic_deadlines.pop((group_id, member_id), None)
                return out
            reason = "session-expired"
            classic = self.classic_deadlines.get((group_id, member_id))
            if classic is not None and classic[0] < deadline:
                deadline, reason = classic
            if deadline > now.mono:  # a heartbeat moved it: fire again then
                out.timers.append((key, deadline))
                return out
            self.fence(out, group, [member], reason, now)
        else:
            armed = self.rebalance.get((group_id, member_id))
            if member is None or armed is None:
                self.rebalance.pop((group_id, member_id), None)
                return out
            deadline, epoch = armed
            if deadline > now.mono:
                out.timers.append((key, deadline))
                return out
            if member.member_epoch == epoch and member.assignment.state is MemberState.UNREVOKED_PARTITIONS:
                self.fence(out, group, [member], "rebalance-timeout", now)
            else:
                self.rebalance.pop((group_id, member_id), None)
        return out

    # =========================================================================================
    # ConsumerGroupDescribe (spec §7.2)

    def describe(self, group_id: str, topics: TopicsImage) -> dict:
        group = self._consumer_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a consumer group." if group_id in self.groups
                       else f"Group {group_id} not found.")
            return {"error_code": E.group_id_not_found, "error_message": message, "group_id": group_id,
                    "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                    "members": []}  # Kafka's DescribedGroup with only the error set: state ""

        def named(assignment) -> dict:
            return {"topic_partitions": [
                {"topic_id": t, "topic_name": topics.by_id[t].name, "partitions": sorted(ps)}
                for t, ps in sorted(assignment.items()) if ps and t in topics.by_id]}

        members = {m: v.target_member() for m, v in group.members.items()}
        return {"error_code": E.none, "error_message": None, "group_id": group_id, "group_state": group.state_name,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "assignor_name": preferred_assignor(members, self.settings.assignors),
                "members": [{"member_id": m.member_id, "instance_id": m.instance_id,
                             "rack_id": m.metadata.rack_id if m.metadata else None, "member_epoch": m.member_epoch,
                             "client_id": m.metadata.client_id if m.metadata else "",
                             "client_host": m.metadata.client_host if m.metadata else "",
                             "subscribed_topic_names": list(m.subscribed_topic_names),
                             "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka: "" when none
                             "assignment": named(m.assignment.assigned_partitions),
                             "target_assignment": named(group.target_of(m.member_id)),
                             "member_type": 0 if m.classic is not None else 1}
                            for m in group.members.values()]}


_ERRORS = {FencedMemberEpoch: E.fenced_member_epoch, InvalidRegularExpression: E.invalid_regular_expression,
           PartitionAssignorError: E.unknown_server_error}


def _resolved(group: ConsumerGroup) -> dict[str, frozenset[str]]:
    return {r: frozenset(v.topics) for r, v in group.regexes.items()}
