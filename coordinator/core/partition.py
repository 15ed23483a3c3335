"""One offsets partition: the registry of its groups (of any type), their committed offsets, and
the one `apply` by which durable state changes, for log loading, live writes (applied when the
runner appends them) and reverts alike. Operations are routed to the group type's machine
(coordinator/core/classic/), the offsets store (coordinator/core/offsets.py) or the admin operations here.
Sans-IO: time comes in as `now`, records and replies go out in an `Outcome`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from groupd.coordinator.core.classic.group import EMPTY, ClassicGroup
from groupd.coordinator.core.classic.machine import ClassicMachine
from groupd.coordinator.core.classic.replies import join_reply, sync_reply
from groupd.coordinator.core.classic.requests import HeartbeatRequest, JoinRequest, LeaveRequest, SyncRequest
from groupd.coordinator.core.consumer.classic_members import ClassicMembers
from groupd.coordinator.core.consumer.group import ConsumerGroup, ConsumerRecords
from groupd.coordinator.core.consumer.machine import (
    ConsumerHeartbeatRequest,
    ConsumerMachine,
    ConsumerSettings,
    TopicsImage,
)
from groupd.coordinator.core.share.group import ShareRecords
from groupd.coordinator.core.share.machine import ShareHeartbeatRequest, ShareMachine, ShareSettings
from groupd.coordinator.core.streams.group import StreamsRecords
from groupd.coordinator.core.streams.machine import StreamsHeartbeatRequest, StreamsMachine, StreamsSettings
from groupd.protocol import ErrorCode
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, Record
from groupd.storage.txn_records import TxnMarkerKey, TxnOffsetKey

from . import events as ev
from .clock import Now
from .group import Group, GroupMachine
from .offsets import OffsetsStore
from .outcome import Outcome
from .requests import OffsetCommitRequest, OffsetDeleteRequest, TxnOffsetCommitRequest
from .txn_offsets import PendingOffsets, TxnUndo

E = ErrorCode
CLASSIC_SPEAKERS = ("classic", "consumer")  # group types that serve JoinGroup/SyncGroup/Heartbeat/LeaveGroup
# group types whose empty group a classic JoinGroup replaces (Kafka 4.3 converts an empty streams group)
CLASSIC_REPLACES_EMPTY = ("streams",)


@dataclasses.dataclass(slots=True)
class GroupSettings:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2147483647
    offset_metadata_max_bytes: int = 4096
    consumer: ConsumerSettings = dataclasses.field(default_factory=ConsumerSettings)
    share: ShareSettings = dataclasses.field(default_factory=ShareSettings)
    streams: StreamsSettings = dataclasses.field(default_factory=StreamsSettings)

    @classmethod
    def from_settings(cls, s, group_configs: Mapping[str, Mapping[str, int]] | None = None) -> GroupSettings:
        """`group_configs`: the per-group overrides (storage/group_configs.py), read live."""
        consumer = ConsumerSettings(s.group_consumer_heartbeat_interval_ms, s.group_consumer_session_timeout_ms,
                                    s.group_consumer_assignors, s.group_consumer_max_size,
                                    s.group_consumer_migration_policy, s.group_max_size,
                                    s.group_consumer_regex_refresh_interval_ms,
                                    group_configs=group_configs if group_configs is not None else {})
        share = ShareSettings(s.group_share_heartbeat_interval_ms, s.group_share_session_timeout_ms,
                              s.group_share_max_size, consumer.group_configs)
        streams = StreamsSettings(s.group_streams_heartbeat_interval_ms, s.group_streams_session_timeout_ms,
                                  s.group_streams_max_size, s.group_streams_num_standby_replicas,
                                  s.group_streams_initial_rebalance_delay_ms, s.group_streams_assignment_interval_ms,
                                  consumer.group_configs)
        return cls(s.group_min_session_timeout_ms, s.group_max_session_timeout_ms,
                   s.group_initial_rebalance_delay_ms, s.group_max_size, s.offset_metadata_max_bytes, consumer, share,
                   streams)


class GroupShard:
    def __init__(self, partition: int, settings: GroupSettings, new_member_id: Callable[[str], str],
                 new_consumer_member_id: Callable[[], str] | None = None,
                 perf_ms: Callable[[], float] = lambda: 0.0) -> None:
        self.partition = partition
        self.settings = settings
        self.groups: dict[str, Group] = {}
        self.pending = PendingOffsets()  # offsets of open transactions (coordinator/core/txn_offsets.py)
        self.store = OffsetsStore(self.groups, settings.offset_metadata_max_bytes, self.pending)
        self.events: list = []  # what happened (coordinator/core/events.py); the runner hands them to the shell
        self.classic = ClassicMachine(self.groups, settings, new_member_id, self.events)
        self.consumer = ConsumerMachine(self.groups, settings.consumer,
                                        new_consumer_member_id or (lambda: new_member_id("consumer")), self.events,
                                        perf_ms, self.classic.downgraded)
        self.classic_members = ClassicMembers(self.consumer)  # classic members inside consumer groups
        self.share = ShareMachine(self.groups, settings.share, self.events)
        self.streams = StreamsMachine(self.groups, settings.streams, self.events)
        # group type -> its machine (coordinator/core/group.py GroupMachine)
        self.machines: dict[str, GroupMachine] = {"classic": self.classic, "consumer": self.consumer,
                                                  "share": self.share, "streams": self.streams}
        # one apply per record key type; a new group type adds its records here
        self._apply: dict[type, Callable[[Any, Any], list[Record]]] = {
            OffsetCommitKey: self._apply_offset,
            GroupMetadataKey: self._apply_classic_group,
            TxnOffsetKey: self._apply_txn_offset,
            TxnMarkerKey: self._apply_txn_marker,
            TxnUndo: lambda key, _: key.restore() or [],
            **ConsumerRecords(self.groups).appliers(),
            **ShareRecords(self.groups).appliers(),
            **StreamsRecords(self.groups).appliers(),
        }

    @property
    def offsets(self) -> dict[str, dict[tuple[str, int], OffsetCommitValue]]:
        return self.store.offsets

    # =========================================================================================
    # apply: the one mutation path of durable state, for loading, live writes and reverts alike

    def apply(self, record: Record) -> list[Record]:
        """Apply one record; return the records that undo it (the previous state of its key)."""
        return self._apply[type(record.key)](record.key, record.value)

    def _apply_offset(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> list[Record]:
        pending = self.pending
        if pending.producers_of_key and key in pending.producers_of_key:  # a partition with pending offsets
            undo = pending.undo(key.group, pending.producers_of_key[key], (key,))
            if value is None:
                pending.deleted(key)  # a tombstone deletes the pending offsets too
            else:
                pending.committed(key)
            return [Record(undo, None), *self._apply_committed(key, value)]
        return self._apply_committed(key, value)

    def _apply_committed(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> list[Record]:
        if value is not None and key.group not in self.groups:  # offsets alone make a simple (classic) group
            self.groups[key.group] = ClassicGroup(key.group, EMPTY, None)
            # the group's tombstone is reverted last, after the offset
            return [Record(GroupMetadataKey(key.group), None), Record(key, self.store.apply(key, value))]
        return [Record(key, self.store.apply(key, value))]

    def _apply_txn_offset(self, key: TxnOffsetKey, value: OffsetCommitValue | None) -> list[Record]:
        """An offset of an open transaction (Kafka's replay with a producer id): pending until its marker."""
        if value is None:  # a tombstone is one whoever writes it
            return self._apply_offset(key.key, None)
        undo = [Record(self.pending.undo(key.group, (key.producer_id,), (key.key,)), None)]
        if key.group not in self.groups:  # as a commit does, it makes a simple group
            self.groups[key.group] = ClassicGroup(key.group, EMPTY, None)
            undo.insert(0, Record(GroupMetadataKey(key.group), None))  # reverted last
        self.pending.add(key.producer_id, key.producer_epoch, key.key, value)
        return undo

    def _apply_txn_marker(self, key: TxnMarkerKey, _) -> list[Record]:
        """A COMMIT moves the producer's pending offsets into the committed ones (each unless a later
        commit of its partition came after it in the log), an ABORT drops them."""
        pending = self.pending
        # reverted last: the pending offsets of its partitions as they were, every producer's (the
        # revert of a committed value goes through `_apply_offset`, which touches them all)
        keys = tuple(pending.by_producer.get(key.producer_id, ()))
        producers = {key.producer_id}.union(*(pending.producers_of_key.get(k, ()) for k in keys))
        undo = [Record(pending.undo("", producers, keys), None)]
        self.pending.ended(key.producer_id, key.producer_epoch, key.coordinator_epoch)
        for offset_key, value in self.pending.end(key.producer_id, key.commit):
            undo += self._apply_committed(offset_key, value)
        return undo

    def _apply_classic_group(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> list[Record]:
        group = self.groups.get(key.group)
        if isinstance(value, ClassicGroup):  # a revert puts back the very group a conversion replaced
            self.groups[key.group] = value
            return [Record(key, None)]
        undo = [Record(key, group.durable if group is not None else None)]
        if value is None:
            if group is not None:
                if key.group in self.store.offsets:
                    group.durable = None  # its offsets keep it as a simple group, as at load
                else:
                    del self.groups[key.group]
                    undo = [Record(key, group)]  # a revert puts back the very group, members and all
        elif group is None or value.generation > group.generation:
            self.groups[key.group] = ClassicGroup.from_record(key.group, value)
        else:  # memory is as new as the record: take what the record adds to it
            group.replay(value)
        return undo

    def revert(self, undo: list[Record], error: ErrorCode) -> list[tuple[Any, Any]]:
        """Undo a failed write (its undo records, newest first). A group the revert removes (it
        never became durable) answers its parked requests with the write's error."""
        released = []
        for record in reversed(undo):
            group_id = getattr(record.key, "group_id", None) or record.key.group  # classic keys name it `group`
            before = self.groups.get(group_id)
            self.apply(record)
            if before is not None and self.groups.get(group_id) is not before:
                released.extend(before.release_parked(error))
        return released

    def on_loaded(self, now: Now) -> Outcome:
        """The partition has replayed its log: every group type starts its timers."""
        out = Outcome()
        for group in list(self.groups.values()):
            self.machines[group.type].on_loaded(out, group, now)
        return out

    def on_timer(self, key: tuple, now: Now) -> Outcome:
        return next(m for m in self.machines.values() if m.owns_timer(key)).on_timer(key, now)

    # =========================================================================================
    # the consumer protocol (coordinator/core/consumer/machine.py)

    def consumer_heartbeat(self, req: ConsumerHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        return self.consumer.heartbeat(req, topics, now)

    def consumer_steady_heartbeat(self, req: ConsumerHeartbeatRequest, topics: TopicsImage, now: Now) -> dict | None:
        """The steady heartbeat's reply without an outcome (no records, timers or events), or None: then
        `consumer_heartbeat` serves it."""
        return self.consumer.steady_heartbeat(req, topics, now)

    def consumer_describe(self, group_id: str, topics: TopicsImage) -> dict:
        return self.consumer.describe(group_id, topics)

    # =========================================================================================
    # share groups (coordinator/core/share/machine.py)

    def share_heartbeat(self, req: ShareHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        return self.share.heartbeat(req, topics, now)

    def share_describe(self, group_id: str, topics: TopicsImage) -> dict:
        return self.share.describe(group_id, topics)

    def share_set_initialized(self, group_id: str, add, remove, topics: TopicsImage, now: Now,
                              create: bool) -> Outcome:
        return self.share.set_initialized(group_id, add, remove, topics, now, create)

    # =========================================================================================
    # streams groups (coordinator/core/streams/machine.py)

    def streams_heartbeat(self, req: StreamsHeartbeatRequest, topics: TopicsImage, now: Now) -> Outcome:
        return self.streams.heartbeat(req, topics, now)

    def streams_describe(self, group_id: str, topics: TopicsImage) -> dict:
        return self.streams.describe(group_id, topics)

    # =========================================================================================
    # the classic protocol (coordinator/core/classic/machine.py)

    # A classic request for a consumer group (spec §7.3): a JoinGroup replaces an empty consumer
    # group; a live one serves classic members beside consumer-protocol ones.

    # A classic request for a group of a type without classic members (share): Kafka's answers.

    def join(self, req: JoinRequest, ticket: Any, now: Now, topics: TopicsImage | None = None) -> Outcome:
        group = self.groups.get(req.group_id)
        replaced = group is not None and group.type in CLASSIC_REPLACES_EMPTY and not group.members
        if group is not None and group.type not in CLASSIC_SPEAKERS and not replaced:
            return Outcome(reply=join_reply(E.inconsistent_group_protocol, req.member_id))
        if not isinstance(group, ConsumerGroup) and not replaced:
            return self.classic.join(req, ticket, now)
        if group.members:
            return self.classic_members.join(group, req, self._topics(topics), now)
        # the empty group's tombstones first (a failed write reverts them); once they are durable the
        # join runs against no group at all and creates the classic one
        out = Outcome(records=group.delete_records())
        out.after_write = lambda error, at: (self.classic.join(req, ticket, at) if error is None
                                             else Outcome(reply=join_reply(error, req.member_id)))
        return out

    def sync(self, req: SyncRequest, ticket: Any, now: Now, topics: TopicsImage | None = None) -> Outcome:
        group = self.groups.get(req.group_id)
        if group is not None and group.type not in CLASSIC_SPEAKERS:
            return Outcome(reply=sync_reply(E.unknown_member_id))
        if isinstance(group, ConsumerGroup):
            return self.classic_members.sync(group, req, self._topics(topics), now)
        return self.classic.sync(req, ticket, now)

    def heartbeat(self, req: HeartbeatRequest, now: Now) -> ErrorCode:
        group = self.groups.get(req.group_id)
        if group is not None and group.type not in CLASSIC_SPEAKERS:
            return E.unknown_member_id
        if isinstance(group, ConsumerGroup):
            return self.classic_members.heartbeat(group, req, now)
        return self.classic.heartbeat(req, now)

    def leave(self, req: LeaveRequest, now: Now) -> Outcome:
        group = self.groups.get(req.group_id)
        if group is not None and group.type not in CLASSIC_SPEAKERS:
            return Outcome(reply={"error_code": E.unknown_member_id, "members": []})
        if isinstance(group, ConsumerGroup):
            return self.classic_members.leave(group, req, now)
        return self.classic.leave(req, now)

    def _topics(self, topics: TopicsImage | None) -> TopicsImage:
        """The image the request brought, else the last one a consumer heartbeat brought."""
        return topics or self.consumer.topics or TopicsImage(-1, {}, {})

    # =========================================================================================
    # offsets (coordinator/core/offsets.py)

    def commit(self, req: OffsetCommitRequest, now: Now) -> Outcome:
        out = self.store.commit(req, now)
        if E.fenced_instance_id in (out.reply or {}).values():
            self.events.append(ev.StaticMemberFenced(req.group_id))
        return out

    def fetch_offsets(self, group_id: str, topics, last_committed: dict | None = None, require_stable: bool = False):
        return self.store.fetch(group_id, topics, last_committed, require_stable)

    # =========================================================================================
    # transactions (KIP-98/447): TxnOffsetCommit and the markers that end them

    def txn_commit(self, req: TxnOffsetCommitRequest, now: Now) -> Outcome:
        return self.store.txn_commit(req, now)

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             coordinator_epoch: int) -> Outcome:
        """The marker of the producer's transaction (WriteTxnMarkers). Reply: its error, NONE once
        durable; a marker of an older producer epoch or transaction coordinator is refused, as
        Kafka's producer state refuses it."""
        error = self.pending.marker_error(producer_id, producer_epoch, coordinator_epoch)
        if error is not None:
            return Outcome(reply=error)
        out = Outcome(records=[Record(TxnMarkerKey(producer_id, producer_epoch, commit, coordinator_epoch), None)])
        out.after_write = lambda error, at: Outcome(reply=error or E.none)
        return out

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9's member check (spec §7.1); classic groups ignore it."""
        group = self.groups.get(group_id)
        return None if group is None else group.validate_offset_fetch(member_id, member_epoch)

    def delete_offsets(self, req: OffsetDeleteRequest) -> Outcome:
        return self.store.delete(req)

    def expire(self, now: Now, retention_ms: int) -> Outcome:
        """Tombstones for expired offsets, and for groups left without any (spec §11): offsets age
        on the wall clock, as their stored timestamps do."""
        out, expired_offsets, deleted_groups = self.store.expire(now.wall, retention_ms)
        if out.records:
            self.events.append(ev.OffsetsExpired(self.partition, expired_offsets, deleted_groups))
        return out

    # =========================================================================================
    # DescribeGroups, ListGroups, DeleteGroups (spec §9): admin reads and deletes of any group type

    def describe(self, group_id: str) -> dict | None:
        group = self.groups.get(group_id)
        return None if group is None else group.describe()

    def list_groups(self) -> list[Group]:
        return list(self.groups.values())

    def delete_group(self, group_id: str) -> Outcome:
        """Reply: the group's error."""
        out = Outcome()
        group = self.groups.get(group_id)
        error = E.group_id_not_found if group is None else group.validate_delete()
        if error is not None:
            out.reply = error
            return out
        out.records = self.store.tombstones(group_id)
        removed_offsets = len(out.records)
        out.records += group.delete_records()

        def written(error: ErrorCode | None, at: Now) -> Outcome:
            if error is None:
                self.events.append(ev.GroupDeleted(group_id, removed_offsets))
            return Outcome(reply=error or E.none)

        out.after_write = written
        return out

    # =========================================================================================
    # fault injection (coordinator/chaos/faults.py): an operator's rebalance or session expiry, through the
    # transitions the timers and joins take. Reply: the group's error (NONE when done).

    def force_rebalance(self, group_id: str, now: Now) -> Outcome:
        out = Outcome(reply=E.none)
        group = self.groups.get(group_id)
        if group is None:
            out.reply = E.group_id_not_found
        else:
            self.machines[group.type].force_rebalance(out, group, now)
        return out

    def expire_members(self, group_id: str, member_ids: list[str] | None, now: Now) -> Outcome:
        """`member_ids` None: every member."""
        out = Outcome(reply=E.none)
        group = self.groups.get(group_id)
        if group is None:
            out.reply = E.group_id_not_found
            return out
        known = list(group.members) if member_ids is None else member_ids
        if any(m not in group.members for m in known):
            out.reply = E.unknown_member_id
            return out
        self.machines[group.type].expire_members(out, group, known, now)
        return out

