"""The asyncio shell around the sans-IO shards: it routes a group to its shard and hands each
outcome to that partition's `Runner` (coordinator/core/runner.py: append and apply, then release the
reply once durable or revert), plugging in the partition's log writer and the loop's timers.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from groupd.coordinator.core.classic.replies import join_reply, sync_reply
from groupd.coordinator.core.classic.requests import HeartbeatRequest, JoinRequest, LeaveRequest, SyncRequest
from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, TopicsImage, error_reply
from groupd.coordinator.core.outcome import Outcome
from groupd.coordinator.core.partition import GroupSettings, GroupShard
from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.core.requests import (
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from groupd.coordinator.core.runner import Runner
from groupd.coordinator.core.share.machine import ShareHeartbeatRequest
from groupd.coordinator.core.share.machine import error_reply as share_error_reply
from groupd.coordinator.core.streams.machine import StreamsHeartbeatRequest
from groupd.coordinator.core.streams.machine import error_reply as streams_error_reply
from groupd.coordinator.observability import observe
from groupd.coordinator.system_clock import mono_ms, now
from groupd.protocol import ErrorCode

from .housekeeping import Housekeeping
from .log_workers import LogWorkers
from .log_writer import LogWriter
from .partitions import Claim, PartitionLifecycle, PartitionState, resolve
from .sync_rounds import SyncRounds

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

log = logging.getLogger("groupd")


def new_member_id(prefix: str) -> str:
    """Kafka's classic member id, "<client id or instance id>-<random UUID>": the version-4 UUID's
    text written from 16 random bytes without building a `uuid.UUID` and its string (7 -> 3 µs a
    new member)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    h = raw.hex()
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_consumer_member_id() -> str:
    """A consumer-protocol member id for a v0 join: a random UUID as Kafka renders one."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes)[:22].decode()


OFFLOAD_WEIGHT = 50_000  # an effect of more steps (topics × regexes) runs in a worker thread


def _run_effect(effect, completed) -> None:
    try:
        result = effect.work()
    except Exception as e:  # the core decides what a failed effect means (one event, one log line)
        completed(None, e)
        return
    completed(result, None)


# Parallel fsyncs on this VM's ext4 (bench note, issue 14): 1 thread ~3.9k/s, 4 ~12k/s, 16 ~31k/s,
# 32 ~34k/s; beyond 32 nothing more. Each partition has at most one write in flight.
LOG_WRITE_THREADS = 32



def _perf_ms() -> float:
    return time.perf_counter() * 1000


class GroupCoordinator(PartitionLifecycle, Housekeeping):
    """Every offsets partition of this node: routing a group to its partition, running each
    operation through the partition's runner, and the reads. Loading and moving partitions
    (partitions.py) and the periodic work (housekeeping.py) share its state."""

    def __init__(self, settings, group_configs: dict | None = None) -> None:
        self.settings = settings
        self.partitions = settings.offsets_topic_num_partitions
        self._group_settings = GroupSettings.from_settings(settings, group_configs)
        self.shards = [self._new_shard(p) for p in range(self.partitions)]
        self.states = [PartitionState.LOADING] * self.partitions
        self._partition_cache: dict[str, int] = {}
        self.writers: list[LogWriter | None] = [None] * self.partitions
        self._claims: list[Claim | None] = [None] * self.partitions  # cluster mode: the claim each partition is held by
        # awaited first when a partition is lost (cluster mode): what else rides on its claim lets go
        # (the data partitions it is home to: coordinator/runtime/records_disk.py), with `fenced`
        self.on_lose: list = []
        # called once a gained partition serves (cluster mode): what else rides on its claim starts
        # (the transaction log partitions it is home to: coordinator/runtime/transactions.py)
        self.on_gain: list = []
        self.runners = [self._new_runner(shard) for shard in self.shards]
        # bumped by every gain and lose: a load that finishes after its partition moved again is dropped
        self._epochs = [0] * self.partitions
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="groupd-log")
        # appends (write + fsync) apart from loads: one thread per partition up to LOG_WRITE_THREADS,
        # so the fsyncs of many partitions run at once and the disk's journal commits them together
        self._writes = LogWorkers(min(self.partitions, LOG_WRITE_THREADS))
        # the fsyncs of every partition written in a loop turn: one round (one syncfs if configured)
        self._syncs = SyncRounds(self._writes, use_syncfs=settings.log_flush_syncfs)
        # effects too big for a loop turn (regex resolution over a big catalog): one worker, apart
        # from the log's, so they never queue ahead of a write
        self._effects = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupd-effects")
        # compaction decodes and rebuilds whole segments in Python: in a process of its own (started
        # at the first compaction) it never holds the interpreter that serves requests
        self._compactor: ProcessPoolExecutor | None = None
        self._tasks: dict[Any, asyncio.TimerHandle] = {}  # periodic work: expiry, fsync, compaction
        self._failure_logged: dict[str, float] = {}  # task → when its last failure was logged (monotonic s)

    def _new_shard(self, p: int) -> GroupShard:
        return GroupShard(p, self._group_settings, new_member_id, new_consumer_member_id, _perf_ms)

    def _new_runner(self, shard: GroupShard) -> Runner:
        return Runner(shard, self, resolve, now, self._new_ticket, observe.emit)

    def partition(self, group_id: str) -> int:
        # Java's String.hashCode in Python is ~5% of a heartbeat: remember it per group id
        p = self._partition_cache.get(group_id)
        if p is None:
            if len(self._partition_cache) > 100_000:
                self._partition_cache.clear()
            p = self._partition_cache[group_id] = partition_for(group_id, self.partitions)
        return p

    def shard(self, group_id: str) -> GroupShard:
        return self.shards[self.partition(group_id)]

    def unavailable(self, p: int) -> ErrorCode | None:
        """The error for a request to partition `p` that cannot be served now (spec §10.1)."""
        state = self.states[p]
        if state is PartitionState.ACTIVE:
            return None
        return ErrorCode.coordinator_load_in_progress if state is PartitionState.LOADING else ErrorCode.not_coordinator

    # -- running operations --------------------------------------------------------------------

    def run(self, p: int, out: Outcome, ticket: asyncio.Future | None = None) -> Any:
        """Carry out an outcome of shard `p`: the reply when it is ready now, else a future of it."""
        return self.runners[p].run(out, ticket)

    def _new_ticket(self) -> asyncio.Future:
        return asyncio.get_running_loop().create_future()

    def call_at(self, deadline: int, fire) -> asyncio.TimerHandle:
        """The runners' timer port: `fire` at `deadline` (monotonic ms)."""
        return asyncio.get_running_loop().call_later(max(deadline - mono_ms(), 0) / 1000, fire)

    def submit(self, effect, completed) -> None:
        """The runners' effect port: a light effect runs on a later loop turn, a heavy one in a
        worker thread; either way `completed` runs on the loop."""
        loop = asyncio.get_running_loop()
        if effect.weight < OFFLOAD_WEIGHT:
            loop.call_soon(_run_effect, effect, completed)
            return
        job = loop.run_in_executor(self._effects, effect.work)
        job.add_done_callback(lambda f: f.cancelled() or (completed(None, f.exception()) if f.exception() is not None
                                                          else completed(f.result(), None)))

    # -- operations: one entry point -------------------------------------------------------------

    def call(self, group_id: str, operation, unavailable=lambda error: error, parks: bool = False) -> Any:
        """Run `operation(shard, ticket, now)` on the partition of `group_id`: its reply, or a
        future of it; `unavailable(error)` when the partition cannot serve now (spec §10.1).
        `parks`: the operation may park its request (JoinGroup, SyncGroup) and needs a ticket."""
        p = self.partition(group_id)
        if (error := self.unavailable(p)) is not None:
            return unavailable(error)
        ticket = self._new_ticket() if parks else None
        return self.run(p, operation(self.shards[p], ticket, now()), ticket)

    def join(self, req: JoinRequest, topics: TopicsImage | None = None) -> Any:
        return self.call(req.group_id, lambda shard, ticket, at: shard.join(req, ticket, at, topics),
                         lambda error: join_reply(error, req.member_id), parks=True)

    def sync(self, req: SyncRequest, topics: TopicsImage | None = None) -> Any:
        return self.call(req.group_id, lambda shard, ticket, at: shard.sync(req, ticket, at, topics), sync_reply,
                         parks=True)

    def leave(self, req: LeaveRequest) -> Any:
        return self.call(req.group_id, lambda shard, _, at: shard.leave(req, at),
                         lambda error: {"error_code": error, "members": []})

    def commit(self, req: OffsetCommitRequest) -> Any:
        return self.call(req.group_id, lambda shard, _, at: shard.commit(req, at),
                         lambda error: {(t, part): error for t, part, *_ in req.offsets})

    def txn_commit(self, req: TxnOffsetCommitRequest) -> Any:
        """TxnOffsetCommit (28), verified: {(topic, partition): error}, or a future of it."""
        return self.call(req.group_id, lambda shard, _, at: shard.txn_commit(req, at),
                         lambda error: {(t, part): error for t, part, *_ in req.offsets})

    async def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                                   coordinator_epoch: int) -> ErrorCode:
        """The COMMIT (or ABORT) marker of a producer's transaction on offsets partition `partition`
        (WriteTxnMarkers; Kafka's completeTransaction): written as a control batch, then the
        producer's pending offsets there are committed or dropped. NONE once durable; a partition
        not served here, or a write that failed, answers NOT_LEADER_OR_FOLLOWER (the transaction
        coordinator retries), as KafkaApis maps the group coordinator's errors."""
        if not 0 <= partition < self.partitions:
            return ErrorCode.unknown_topic_or_partition
        if self.unavailable(partition) is not None:
            return ErrorCode.not_leader_or_follower
        shard = self.shards[partition]
        result = self.run(partition, shard.complete_transaction(producer_id, producer_epoch, commit, coordinator_epoch))
        if isinstance(result, asyncio.Future):
            result = await result
        if result in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                      ErrorCode.coordinator_load_in_progress):
            return ErrorCode.not_leader_or_follower
        if result is not ErrorCode.none:  # fenced: a stale producer epoch or transaction coordinator
            log.warning("transaction marker refused partition=%d producer_id=%d producer_epoch=%d "
                        "coordinator_epoch=%d result=%s: %s", partition, producer_id, producer_epoch,
                        coordinator_epoch, "commit" if commit else "abort", result.name)
        return result

    def delete_offsets(self, req: OffsetDeleteRequest) -> Any:
        return self.call(req.group_id, lambda shard, _, at: shard.delete_offsets(req),
                         lambda error: {"error_code": error, "partitions": {}})

    def delete_group(self, group_id: str) -> Any:
        return self.call(group_id, lambda shard, _, at: shard.delete_group(group_id))

    def consumer_heartbeat(self, req: ConsumerHeartbeatRequest, topics: TopicsImage) -> Any:
        p = self.partition(req.group_id)
        if self.states[p] is PartitionState.ACTIVE:  # most heartbeats only move a deadline: no outcome, no runner
            reply = self.shards[p].consumer_steady_heartbeat(req, topics, now())
            if reply is not None:
                return reply
        return self.call(req.group_id, lambda shard, _, at: shard.consumer_heartbeat(req, topics, at), error_reply)

    def share_heartbeat(self, req: ShareHeartbeatRequest, topics: TopicsImage) -> Any:
        return self.call(req.group_id, lambda shard, _, at: shard.share_heartbeat(req, topics, at), share_error_reply)

    def share_set_initialized(self, group_id: str, add, remove, topics: TopicsImage, create: bool) -> Any:
        """AlterShareGroupOffsets / DeleteShareGroupOffsets: the empty share group's initialized
        share-partitions changed (ShareGroupStatePartitionMetadata): an ErrorCode, or a future of it."""
        return self.call(group_id, lambda shard, _, at: shard.share_set_initialized(group_id, add, remove, topics, at,
                                                                                    create))
    def streams_heartbeat(self, req: StreamsHeartbeatRequest, topics: TopicsImage) -> Any:
        return self.call(req.group_id, lambda shard, _, at: shard.streams_heartbeat(req, topics, at),
                         streams_error_reply)

    def force_rebalance(self, group_id: str) -> Any:
        """Fault injection: a new generation (classic) or group epoch (consumer) now."""
        return self.call(group_id, lambda shard, _, at: shard.force_rebalance(group_id, at))

    def expire_members(self, group_id: str, member_ids: list[str] | None) -> Any:
        """Fault injection: these members (None: all) removed as if their sessions expired."""
        return self.call(group_id, lambda shard, _, at: shard.expire_members(group_id, member_ids, at))

    def heartbeat(self, req: HeartbeatRequest) -> ErrorCode:
        """The hot path: no outcome, no ticket; a valid heartbeat only moves a deadline."""
        p = self.partition(req.group_id)
        state = self.states[p]
        if state is not PartitionState.ACTIVE:  # a loading coordinator answers heartbeats blind (spec §5.1)
            return ErrorCode.none if state is PartitionState.LOADING else ErrorCode.not_coordinator
        shard = self.shards[p]
        error = shard.heartbeat(req, now())
        if shard.events:  # a fenced static member
            self.runners[p].flush_events()
        return error

    # -- reads ----------------------------------------------------------------------------------

    def fetch_offsets(self, req: OffsetFetchRequest) -> Any:
        """Committed offsets, or the group-level error; with require_stable, read after the
        partition's in-flight writes."""
        p = self.partition(req.group_id)
        if (error := self.unavailable(p)) is not None:
            return error
        if (error := self.shards[p].validate_offset_fetch(req.group_id, req.member_id, req.member_epoch)) is not None:
            return error
        idle = self.writers[p].idle() if req.require_stable else None
        if idle is None:
            runner = self.runners[p]
            return self.shards[p].fetch_offsets(req.group_id, req.topics,
                                                runner.last_committed() if runner.in_flight else None,
                                                req.require_stable)
        result = asyncio.get_running_loop().create_future()
        idle.add_done_callback(lambda _: resolve(result, self._stable_read(p, req)))
        return result

    def _stable_read(self, p: int, req: OffsetFetchRequest) -> Any:
        """A RequireStable read once the partition's writes are done (the partition may have
        moved meanwhile: then its error)."""
        if (error := self.unavailable(p)) is not None:
            return error
        return self.shards[p].fetch_offsets(req.group_id, req.topics, None, True)

    def describe(self, group_id: str) -> dict | ErrorCode | None:
        p = self.partition(group_id)
        if (error := self.unavailable(p)) is not None:
            return error
        return self.shards[p].describe(group_id)

    def consumer_describe(self, group_id: str, topics: TopicsImage) -> dict | ErrorCode:
        p = self.partition(group_id)
        if (error := self.unavailable(p)) is not None:
            return error
        return self.shards[p].consumer_describe(group_id, topics)

    def share_describe(self, group_id: str, topics: TopicsImage) -> dict | ErrorCode:
        p = self.partition(group_id)
        if (error := self.unavailable(p)) is not None:
            return error
        return self.shards[p].share_describe(group_id, topics)

    def share_initialized(self, group_id: str) -> dict | ErrorCode:
        """A share group's initialized share-partitions (topic id → partitions; {} for a group that is
        missing or of another type), or the error of its offsets partition (loading, not here)."""
        p = self.partition(group_id)
        if (error := self.unavailable(p)) is not None:
            return error
        group = self.shards[p].groups.get(group_id)
        return group.initialized() if getattr(group, "type", None) == "share" else {}

    def share_group_has_members(self, group_id: str) -> bool | ErrorCode | None:
        """Whether a share group has members (None: no group of that id), GROUP_ID_NOT_FOUND for a
        group of another type, or the error of its offsets partition (loading, not here)."""
        p = self.partition(group_id)
        if (error := self.unavailable(p)) is not None:
            return error
        group = self.shards[p].groups.get(group_id)
        if group is None:
            return None
        if getattr(group, "type", None) != "share":
            return ErrorCode.group_id_not_found
        return bool(group.members)
    def streams_describe(self, group_id: str, topics: TopicsImage) -> dict | ErrorCode:
        p = self.partition(group_id)
        if (error := self.unavailable(p)) is not None:
            return error
        return self.shards[p].streams_describe(group_id, topics)

    def list_groups(self) -> list | ErrorCode:
        """Every group, or COORDINATOR_LOAD_IN_PROGRESS while any partition loads (spec §9.2)."""
        if PartitionState.LOADING in self.states:
            return ErrorCode.coordinator_load_in_progress
        return [g for p, shard in enumerate(self.shards) if self.states[p] is PartitionState.ACTIVE
                for g in shard.list_groups()]
