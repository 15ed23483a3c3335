"""The share-group (KIP-932) membership machine (spec §2): ShareGroupHeartbeat — joins with
client-generated member ids, heartbeats, leaves (-1) — the session timers, and ShareGroupDescribe,
over the share groups of one partition. Kafka's GroupMetadataManager.shareGroupHeartbeat: validate,
find or create the group and member, update the member, bump the group epoch on a subscription or
metadata change, recompute the target with the `simple` assignor, and hand the member its target at
once (share groups share partitions, so nothing is revoked first). Sans-IO: each operation takes
the request, a snapshot of topic metadata and `now`, and returns an `Outcome` whose records the
partition applies when the runner appends them (group.py).

Only share-partitions whose state is initialized are assigned, as Kafka 4.x's: a heartbeat records
the subscribed partitions not yet initialized (nor initializing since less than the retry interval)
as initializing in ShareGroupStatePartitionMetadata, last in its batch; once that is durable the
runtime carries out the `("share-initialize", group)` effect and its completion moves them to
initialized (or, on failure, out of initializing so a later heartbeat retries). The next heartbeat
sees initialized partitions no target holds and bumps the group epoch (Kafka's
initializedAssignmentPending), so a new group's members join with nothing and get their shares then.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Iterable, Mapping

from groupd.coordinator.core import events as ev
from groupd.coordinator.core.clock import Now
from groupd.coordinator.core.consumer.machine import TopicsImage
from groupd.coordinator.core.outcome import Effect, Outcome, reply_when_written
from groupd.protocol import ErrorCode
from groupd.storage.consumer_records import topic_partitions
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
    TopicPartitionsInfo,
)

from . import assignor
from .group import STABLE_MEMBER, Partitions, ShareGroup, ShareMember, member_tombstones

E = ErrorCode
LEAVE_GROUP_MEMBER_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36  # Kafka's KafkaApis.isMemberIdValid
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"  # the group-config names (Kafka's GroupConfig)
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
# group.share.initialize.retry.interval.ms: an initialization not completed by then (a restart lost it)
# is started again by the next heartbeat
INITIALIZE_RETRY_INTERVAL_MS = 30000


@dataclasses.dataclass(slots=True)
class ShareSettings:
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    max_size: int = 200  # group.share.max.size
    group_configs: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


def error_reply(error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}


class FencedMemberEpoch(Exception):
    pass


class ShareMachine:
    def __init__(self, groups: dict, settings: ShareSettings, events: list) -> None:
        self.groups = groups  # the partition's registry, shared with every group type
        self.settings = settings
        self.events = events
        self.session: dict[tuple[str, str], int] = {}  # (group, member) → deadline (monotonic ms; memory)
        self.topics: TopicsImage | None = None  # the last image a heartbeat brought (timers have none)
        self.metadata_version: dict[str, int] = {}  # group → the topics version its hash was last checked at

    # =========================================================================================
    # ShareGroupHeartbeat

    def heartbeat(self, req: ShareHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        error = _validate(req)
        if error is not None:
            return Outcome(reply=error)
        self.topics = topics
        try:
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                out = self._leave(req, topics, now)
            else:
                out = self._join_or_heartbeat(req, topics, now)
        except FencedMemberEpoch as e:
            return Outcome(reply=error_reply(E.fenced_member_epoch, str(e)))
        if out.records:  # answered once durable; a failed write answers its error (the runner reverted it)
            reply_when_written(out, out.reply, error_reply)
        return out

    def _share_group(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None

    def _not_found(self, group_id: str) -> dict:
        message = (f"Group {group_id} is not a share group." if group_id in self.groups
                   else f"Group {group_id} not found.")
        return error_reply(E.group_id_not_found, message)

    def _join_or_heartbeat(self, req: ShareHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        out = Outcome()
        group = self._share_group(req.group_id)
        if group is None:
            if req.member_epoch != 0 or req.group_id in self.groups:  # another type's id, or nothing to find
                out.reply = self._not_found(req.group_id)
                return out
            group = ShareGroup(req.group_id)  # a view: the records below create the registered one
        limit = self.settings.max_size
        if req.member_id not in group.members and len(group.members) >= limit:
            out.reply = error_reply(E.group_max_size_reached,
                                    f"The share group has reached its maximum capacity of {limit} members.")
            return out
        member = group.members.get(req.member_id)
        if member is None and req.member_epoch != 0:
            out.reply = error_reply(E.unknown_member_id,
                                    f"Member {req.member_id} is not a member of group {req.group_id}.")
            return out
        if member is not None and req.member_epoch != 0:
            _check_epoch(member, req.member_epoch)
        joined = member is None
        member = member or ShareMember(req.member_id)

        # -- the member's subscription and the group epoch (spec §2.2 step 5)
        old = member.metadata
        metadata = _updated_metadata(old, req)
        g = group.group_id
        if metadata != old:
            out.records.append(Record(ShareGroupMemberMetadataKey(g, member.member_id), metadata))

        def subscriptions() -> dict[str, tuple[str, ...]]:  # every member's, this one's as updated
            return {**{m.member_id: m.subscribed_topic_names for m in group.members.values()},
                    member.member_id: metadata.subscribed_topic_names}

        # the topic names any member subscribes to, this one's as updated: from the group's counts, not
        # a walk over every member (this runs on every heartbeat)
        own = old.subscribed_topic_names if old is not None else ()
        subscribed = {n for n, count in group.subscribed_names.items() if count > (n in own)}
        subscribed.update(metadata.subscribed_topic_names)

        subscription_changed = old is None or set(old.subscribed_topic_names) != set(metadata.subscribed_topic_names)
        group_epoch = group.group_epoch
        # the subscribed topics' metadata is hashed again only when it may have changed: a new
        # subscription or a new topics image (memory: after a restart the first heartbeat re-checks)
        if subscription_changed or self.metadata_version.get(g) != topics.version:
            self.metadata_version[g] = topics.version
            metadata_hash = _metadata_hash(subscribed, topics)
            if subscription_changed or metadata_hash != group.metadata_hash:
                self.metadata_version.pop(g)  # checked again next time, in case this write fails
                group_epoch += 1
                out.records.append(Record(ShareGroupMetadataKey(g),
                                          ShareGroupMetadataValue(group_epoch, metadata_hash)))
                self.events.append(ev.ShareGroupEpochBumped(
                    g, group_epoch, "subscription-changed" if subscription_changed else "metadata-changed"))
        # share state newly initialized and a current target without it: a new epoch assigns it
        if group_epoch == group.group_epoch <= group.assignment_epoch \
                and _initialized_unassigned(group, subscribed, topics):
            group_epoch += 1
            out.records.append(Record(ShareGroupMetadataKey(g),
                                      ShareGroupMetadataValue(group_epoch, group.metadata_hash)))
            self.events.append(ev.ShareGroupEpochBumped(g, group_epoch, "initialized"))

        # -- the target assignment (step 6)
        target_epoch = group.assignment_epoch
        target = group.targets.get(member.member_id, {})
        if group_epoch > target_epoch:
            targets = self._target(out, group, subscriptions(), topics, group_epoch, now)
            target_epoch = group_epoch
            target = targets.get(member.member_id, {})

        # -- reconciliation (step 7): the whole target at once, within the member's subscription
        assigned = member.assigned
        if joined or member.member_epoch != target_epoch or subscription_changed:
            subscribed_ids = {topics.by_name[n].topic_id for n in metadata.subscribed_topic_names
                              if n in topics.by_name}
            assigned = {t: ps for t, ps in target.items() if t in subscribed_ids and ps}
            current = ShareGroupCurrentMemberAssignmentValue(target_epoch, member.member_epoch, STABLE_MEMBER,
                                                             topic_partitions(assigned))
            if current != member.current:
                out.records.append(Record(ShareGroupCurrentMemberAssignmentKey(g, member.member_id), current))
            member_epoch = target_epoch
        else:
            member_epoch = member.member_epoch

        self._maybe_initialize(out, group, subscribed, topics, now)
        if joined:
            self.events.append(ev.ShareMemberJoined(g, member.member_id, group_epoch))
        self.arm_session(out, g, member.member_id, now)
        send_assignment = (req.member_epoch == 0 or req.subscribed_topic_names is not None
                           or assigned != member.assigned)
        out.reply = {"error_code": E.none, "error_message": None, "member_id": member.member_id,
                     "member_epoch": member_epoch, "heartbeat_interval_ms": self.heartbeat_interval_ms(g),
                     "assignment": {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                                         for t, ps in sorted(assigned.items()) if ps]}
                     if send_assignment else None}
        return out

    def _target(self, out: Outcome, group: ShareGroup, subscriptions: Mapping[str, tuple[str, ...]],
                topics: TopicsImage, epoch: int, now: Now) -> dict[str, Partitions]:
        """A new target at `epoch` over the initialized partitions of the existing subscribed topics;
        records for the members whose target changed, and the target epoch."""
        g = group.group_id
        by_member = {m: frozenset(topics.by_name[n].topic_id for n in names if n in topics.by_name)
                     for m, names in subscriptions.items()}
        initialized = group.initialized()
        partitions = {t: initialized.get(t, frozenset()) & frozenset(range(topics.by_id[t].num_partitions))
                      for ids in by_member.values() for t in ids}
        previous = {m: group.targets.get(m, {}) for m in by_member}
        targets = assignor.assign(by_member, partitions, previous)
        for member_id, target in targets.items():
            if member_id not in group.targets or target != {t: ps for t, ps in previous[member_id].items() if ps}:
                out.records.append(Record(ShareGroupTargetAssignmentMemberKey(g, member_id),
                                          ShareGroupTargetAssignmentMemberValue(topic_partitions(target))))
        out.records.append(Record(ShareGroupTargetAssignmentMetadataKey(g), ShareGroupTargetAssignmentMetadataValue(epoch)))
        return targets

    def _maybe_initialize(self, out: Outcome, group: ShareGroup, subscribed: Iterable[str], topics: TopicsImage,
                          now: Now) -> None:
        """Kafka's maybeCreateInitializeShareGroupStateRequest: the subscribed partitions neither
        initialized nor initializing (an initialization older than the retry interval counts as
        lost) become initializing, and their initialization starts once that record is durable."""
        state = group.state_partitions or ShareGroupStatePartitionMetadataValue()
        initializing = {t.topic_id: t for t in state.initializing_topics if t.topic_id in topics.by_id}
        have = {t: set(ps) for t, ps in group.initialized().items()}
        for t, info in initializing.items():
            if now.wall - info.create_timestamp < INITIALIZE_RETRY_INTERVAL_MS:
                have.setdefault(t, set()).update(info.partitions)
        wanted: dict[uuid.UUID, frozenset[int]] = {}
        for name in sorted(n for n in subscribed if n in topics.by_name):
            topic = topics.by_name[name]
            missing = frozenset(range(topic.num_partitions)) - have.get(topic.topic_id, set())
            if missing:
                wanted[topic.topic_id] = missing
        if not wanted:
            return
        for t, ps in wanted.items():
            before = initializing.get(t)
            merged = sorted(ps | set(before.partitions if before else ()))
            initializing[t] = TopicPartitionsInfo(t, topics.by_id[t].name, tuple(merged), now.wall)
        value = ShareGroupStatePartitionMetadataValue(tuple(initializing[t] for t in sorted(initializing)),
                                                      state.initialized_topics, state.deleting_topics)
        out.records.append(Record(ShareGroupStatePartitionMetadataKey(group.group_id), value))
        effect = Effect(("share-initialize", group.group_id), _initialize_at_leaders,
                        lambda result, error, at: self.initialize_done(group.group_id, wanted, error, at))
        then = out.after_write

        def written(error: ErrorCode | None, at: Now) -> Outcome:
            follow = then(error, at) if then is not None else Outcome()
            if error is None:
                follow.effects.append(effect)
            return follow

        out.after_write = written

    def initialize_done(self, group_id: str, done: Mapping[uuid.UUID, frozenset[int]], error: BaseException | None,
                        now: Now) -> Outcome:
        """Kafka's initializeShareGroupState (success: initializing → initialized) and
        uninitializeShareGroupState (failure: out of initializing, so a later heartbeat retries)."""
        out = Outcome()
        group = self._share_group(group_id)
        if group is None or group.state_partitions is None:
            return out
        state = group.state_partitions
        initializing = {t.topic_id: t for t in state.initializing_topics}
        initialized = {t.topic_id: t for t in state.initialized_topics}
        changed = False
        for t, ps in done.items():
            info = initializing.get(t)
            moving = set(info.partitions) & ps if info is not None else set()
            if not moving:
                continue  # a failed write reverted it, or it was retried and completed since
            changed = True
            rest = tuple(p for p in info.partitions if p not in moving)
            if rest:
                initializing[t] = dataclasses.replace(info, partitions=rest)
            else:
                del initializing[t]
            if error is None:
                before = initialized.get(t)
                merged = tuple(sorted(moving | set(before.partitions if before else ())))
                initialized[t] = TopicPartitionsInfo(t, info.topic_name, merged,
                                                     before.create_timestamp if before else now.wall)
        if changed:
            value = ShareGroupStatePartitionMetadataValue(tuple(initializing[t] for t in sorted(initializing)),
                                                          tuple(initialized[t] for t in sorted(initialized)),
                                                          state.deleting_topics)
            out.records.append(Record(ShareGroupStatePartitionMetadataKey(group_id), value))
        return out

    def set_initialized(self, group_id: str, add: Mapping[uuid.UUID, Iterable[int]], remove: Iterable[uuid.UUID],
                        topics: TopicsImage, now: Now, create: bool) -> Outcome:
        """AlterShareGroupOffsets (`add`, `create`: a missing group is made, empty, as Kafka's) and
        DeleteShareGroupOffsets (`remove`): the share-partitions the empty group has initialized.
        Reply: an ErrorCode, once durable."""
        out = Outcome()
        group = self._share_group(group_id)
        if group is None and (group_id in self.groups or not create):
            out.reply = E.group_id_not_found
            return out
        if group is not None and group.members:
            out.reply = E.non_empty_group
            return out
        if group is None:
            out.records.append(Record(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(0, 0)))
        known = {t.topic_id: t for t in group.state_partitions.initialized_topics} \
            if group is not None and group.state_partitions else {}
        removed = set(remove)
        for t in removed:
            known.pop(t, None)
        for t, ps in add.items():
            if t not in topics.by_id:
                continue
            before = known.get(t)
            merged = sorted(set(ps) | set(before.partitions if before else ()))
            known[t] = TopicPartitionsInfo(t, topics.by_id[t].name, tuple(merged),
                                           before.create_timestamp if before else now.wall)
        state = group.state_partitions if group is not None and group.state_partitions else None
        initializing = []  # what is initializing stays so, but for the partitions now initialized or removed
        for info in state.initializing_topics if state else ():
            rest = tuple(p for p in info.partitions if p not in set(add.get(info.topic_id, ())))
            if rest and info.topic_id not in removed:
                initializing.append(dataclasses.replace(info, partitions=rest))
        value = ShareGroupStatePartitionMetadataValue(tuple(initializing), tuple(known[t] for t in sorted(known)), ())
        out.records.append(Record(ShareGroupStatePartitionMetadataKey(group_id), value))
        reply_when_written(out, E.none, lambda error: error)
        return out

    # =========================================================================================
    # leaving (-1) and fencing (spec §2.5)

    def _leave(self, req: ShareHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        out = Outcome()
        group = self._share_group(req.group_id)
        if group is None:
            out.reply = self._not_found(req.group_id)
            return out
        member = group.members.get(req.member_id)
        if member is None:
            out.reply = error_reply(E.unknown_member_id,
                                    f"Member {req.member_id} is not a member of group {req.group_id}.")
            return out
        self.remove_members(out, group, [member], topics, "member-left")
        self.events.append(ev.ShareMemberLeft(group.group_id, member.member_id))
        out.reply = {"error_code": E.none, "error_message": None, "member_id": member.member_id,
                     "member_epoch": LEAVE_GROUP_MEMBER_EPOCH, "heartbeat_interval_ms": 0, "assignment": None}
        return out

    def remove_members(self, out: Outcome, group: ShareGroup, members: list[ShareMember],
                       topics: TopicsImage | None, reason: str) -> None:
        """Each member's tombstones and one new group epoch, with the hash of what the others subscribe to."""
        gone = {m.member_id for m in members}
        for member in members:
            out.records += member_tombstones(group.group_id, member.member_id)
            self.session.pop((group.group_id, member.member_id), None)
        staying = {n for m in group.members.values() if m.member_id not in gone for n in m.subscribed_topic_names}
        metadata_hash = _metadata_hash(staying, topics) if topics is not None else group.metadata_hash
        self.bump_epoch(out, group, metadata_hash, reason)

    def bump_epoch(self, out: Outcome, group: ShareGroup, metadata_hash: int, reason: str) -> None:
        """A new group epoch: every member's next heartbeat gets the target assignment of it."""
        epoch = group.group_epoch + 1
        out.records.append(Record(ShareGroupMetadataKey(group.group_id), ShareGroupMetadataValue(epoch, metadata_hash)))
        self.events.append(ev.ShareGroupEpochBumped(group.group_id, epoch, reason))

    def fence(self, out: Outcome, group: ShareGroup, members: list[ShareMember], reason: str) -> None:
        """Remove members whose session expired (or an operator expired)."""
        self.remove_members(out, group, members, self.topics, reason)
        for member in members:
            self.events.append(ev.ShareMemberFenced(group.group_id, member.member_id, reason))

    # =========================================================================================
    # timers

    def heartbeat_interval_ms(self, group_id: str) -> int:
        overrides = self.settings.group_configs.get(group_id) or {}
        return overrides.get(SHARE_HEARTBEAT_INTERVAL_MS, self.settings.heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        overrides = self.settings.group_configs.get(group_id) or {}
        return overrides.get(SHARE_SESSION_TIMEOUT_MS, self.settings.session_timeout_ms)

    def arm_session(self, out: Outcome, group_id: str, member_id: str, now: Now) -> None:
        """Only the deadline moves: an armed timer that fires early re-arms itself."""
        key = (group_id, member_id)
        self.session[key] = now.mono + self.session_timeout_ms(group_id)
        out.timers.append((("share-session",) + key, self.session[key]))

    @staticmethod
    def owns_timer(key: tuple) -> bool:
        return key[0] == "share-session"

    def on_loaded(self, out: Outcome, group: ShareGroup, now: Now) -> None:
        """After a load every member gets a full session from now (Kafka's onLoaded)."""
        for member_id in group.members:
            self.arm_session(out, group.group_id, member_id, now)

    def on_timer(self, key: tuple, now: Now) -> Outcome:
        out = Outcome()
        _, group_id, member_id = key
        group = self._share_group(group_id)
        member = group.members.get(member_id) if group is not None else None
        deadline = self.session.get((group_id, member_id))
        if member is None or deadline is None:
            self.session.pop((group_id, member_id), None)
            return out
        if deadline > now.mono:  # a heartbeat moved it: fire again then
            out.timers.append((key, deadline))
            return out
        self.fence(out, group, [member], "session-expired")
        return out

    def force_rebalance(self, out: Outcome, group: ShareGroup, now: Now) -> None:
        """An operator's rebalance (fault injection): a new group epoch."""
        self.bump_epoch(out, group, group.metadata_hash, "forced")

    def expire_members(self, out: Outcome, group: ShareGroup, member_ids: list[str], now: Now) -> None:
        """An operator's expiry of these members (fault injection): fenced as by their session timeout."""
        if member_ids:
            self.fence(out, group, [group.members[m] for m in member_ids], "forced")

    # =========================================================================================
    # ShareGroupDescribe (spec §1.3)

    def describe(self, group_id: str, topics: TopicsImage) -> dict:
        group = self._share_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if group_id in self.groups
                       else f"Group {group_id} not found.")
            return {"error_code": E.group_id_not_found, "error_message": message, "group_id": group_id,
                    "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}

        def named(assignment: Partitions) -> dict:
            return {"topic_partitions": [
                {"topic_id": t, "topic_name": topics.by_id[t].name, "partitions": sorted(ps)}
                for t, ps in sorted(assignment.items()) if ps and t in topics.by_id]}

        return {"error_code": E.none, "error_message": None, "group_id": group_id, "group_state": group.state_name,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "assignor_name": assignor.NAME,
                "members": [{"member_id": m.member_id, "rack_id": m.metadata.rack_id if m.metadata else None,
                             "member_epoch": m.member_epoch,
                             "client_id": m.metadata.client_id if m.metadata else "",
                             "client_host": m.metadata.client_host if m.metadata else "",
                             "subscribed_topic_names": list(m.subscribed_topic_names),
                             "assignment": named(m.assigned)}
                            for m in group.members.values()]}


def _initialize_at_leaders() -> None:
    """The share state's initialization at each partition's leader. Nothing to write there: a
    leader creates a share-partition's state at its first ShareFetch, resolving
    share.auto.offset.reset, as Kafka's leader resolves the UNINITIALIZED start offset the group
    coordinator initializes it with; the completion still comes back on a later turn, as Kafka's."""


def _initialized_unassigned(group: ShareGroup, subscribed: Iterable[str], topics: TopicsImage) -> bool:
    """Kafka's initializedAssignmentPending: an initialized partition of a subscribed topic that no
    member's target holds (the group's inverted index says which are held)."""
    initialized = group.initialized()
    if not initialized:
        return False
    for name in subscribed:
        topic = topics.by_name.get(name)
        if topic is None:
            continue
        unheld = initialized.get(topic.topic_id, frozenset()) - group.held.get(topic.topic_id, {}).keys()
        if any(p < topic.num_partitions for p in unheld):
            return True
    return False


def _validate(req: ShareHeartbeatRequest) -> dict | None:
    """INVALID_REQUEST with Kafka's messages (GroupCoordinatorService, KafkaApis.isMemberIdValid)."""
    def invalid(message: str | None) -> dict:
        return error_reply(E.invalid_request, message)
    if req.group_id.strip() == "":
        return invalid("GroupId can't be empty.")
    if req.member_id.strip() == "":
        return invalid("MemberId can't be empty.")
    if len(req.member_id) > MAX_MEMBER_ID_LENGTH:
        return invalid(None)
    if req.rack_id is not None and req.rack_id.strip() == "":
        return invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            return invalid("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return invalid("MemberEpoch is invalid.")
    return None


def _check_epoch(member: ShareMember, received: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: the member's epoch, or its previous one
    (the answer that carried the new epoch was lost)."""
    if received > member.member_epoch:
        raise FencedMemberEpoch(f"The share group member has a greater member epoch ({received}) than the one known "
                                f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                                "partitions and rejoin.")
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise FencedMemberEpoch(f"The share group member has a smaller member epoch ({received}) than the one known "
                                f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                                "partitions and rejoin.")


def _updated_metadata(old: ShareGroupMemberMetadataValue | None,
                      req: ShareHeartbeatRequest) -> ShareGroupMemberMetadataValue:
    """Null fields keep what is stored."""
    if old is None:
        old = ShareGroupMemberMetadataValue(None, req.client_id, req.client_host, ())
    names = old.subscribed_topic_names
    if req.subscribed_topic_names is not None:
        names = tuple(sorted(set(req.subscribed_topic_names)))
    value = ShareGroupMemberMetadataValue(req.rack_id if req.rack_id is not None else old.rack_id,
                                          req.client_id, req.client_host, names)
    return old if value == old else value


def _metadata_hash(subscribed: Iterable[str], topics: TopicsImage) -> int:
    """A hash of the subscribed topics that exist (name, id, partition count); 0 for none. It
    changes when one is created, deleted or grows: the group epoch follows (Kafka hashes the
    same facts, and racks, with its own function)."""
    names = sorted({n for n in subscribed if n in topics.by_name})
    if not names:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for n in names:
        t = topics.by_name[n]
        h.update(f"{n}\0{t.topic_id}\0{t.num_partitions}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)

