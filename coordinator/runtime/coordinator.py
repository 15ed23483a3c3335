"""The asyncio shell around the sans-IO shards: it routes a group to its shard and hands each
outcome to that partition's `Runner` (coordinator/core/runner.py: append and apply, then release the
reply once durable or revert), plugging in the partition's log writer and the loop's timers.
"""

from __future__ import annotations

from collections.abc import Iterable

import asyncio
import base64
import enum
import gc
import logging
import time
import uuid
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from groupd.protocol import ErrorCode

from groupd.storage.compaction import closed_bytes, compact, die_with_parent
from groupd.storage.log import LoadResult, PartitionLog
from groupd.storage.files import remove_files
from groupd.storage.owned_compaction import closed_counted_bytes, compact_owned
from groupd.storage.owned_log import OwnedPartitionLog, Ownership, unlisted_segments

from . import heap
from groupd.coordinator.observability import metrics, observe
from groupd.coordinator.system_clock import mono_ms, now, wall_ms
from .log_workers import LogWorkers
from .log_writer import LogWriter
from groupd.coordinator.core.runner import Runner
from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.core.classic.replies import join_reply, sync_reply
from groupd.coordinator.core.classic.requests import HeartbeatRequest, JoinRequest, LeaveRequest, SyncRequest
from groupd.coordinator.core.outcome import Outcome
from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, TopicsImage, error_reply
from groupd.coordinator.core.requests import OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest
from groupd.coordinator.core.partition import GroupSettings, GroupShard

log = logging.getLogger("groupd")


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


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

# The cyclic GC once the log is loaded: what exists then (modules, the loaded groups and offsets) is
# moved out of its sight, and it runs every GC_YOUNG allocations instead of 700. Requests make
# little cyclic garbage, but each collection, and every full one, walked the whole heap: a quarter
# of an OffsetCommit's CPU (bench/request_cost.py: 40 -> 31 µs).
GC_YOUNG = 20_000


def settle_gc() -> None:
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, older, oldest)


LOAD_PROGRESS_S = 5.0  # how often a load in progress is reported


def _perf_ms() -> float:
    return time.perf_counter() * 1000


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    UNOWNED = "unowned"  # another node coordinates it (coordinator/cluster/view.py)


class Claim(Protocol):
    """Cluster mode's side of `GroupCoordinator.gain` (coordinator/cluster/etcd/cluster.py)."""

    async def ownership(self) -> Ownership:
        """The segments that count (after waiting out a deposed owner's lease if need be)."""

    async def confirm(self, next_offset: int) -> bool:
        """Record that this owner's records start at `next_offset`; False if the claim is lost."""

    def counted(self) -> tuple[tuple[int, int | None], ...]:
        """The manifest as this owner last wrote it (its own stamp last, open)."""

    async def compaction_stamp(self) -> int | None:
        """A fresh stamp for a compaction's output, taken while the claim holds; None if it is lost."""

    async def swap(self, counted: tuple, stamp: int, end: int) -> bool:
        """Replace the manifest `counted` by `[[stamp, end], [own stamp, None]]`, only while the claim
        holds and the manifest is still `counted`; False if not (raises if the outcome is unknown)."""


class GroupCoordinator:
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
        self.runners = [self._new_runner(shard) for shard in self.shards]
        # bumped by every gain and lose: a load that finishes after its partition moved again is dropped
        self._epochs = [0] * self.partitions
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="groupd-log")
        # appends (write + fsync) apart from loads: one thread per partition up to LOG_WRITE_THREADS,
        # so the fsyncs of many partitions run at once and the disk's journal commits them together
        self._writes = LogWorkers(min(self.partitions, LOG_WRITE_THREADS))
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
        return Runner(shard, self, _resolve, now, self._new_ticket, observe.emit)

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

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, owned: Iterable[int] | None = None) -> None:
        """Load the partitions this node owns (told by the cluster view, as Kafka's `onElection`;
        None: every partition) off the loop; each serves requests once it is loaded.
        Progress is logged every LOAD_PROGRESS_S while partitions load, and once when all are done."""
        loop = asyncio.get_running_loop()
        # No cyclic GC while the log loads: the records and offsets it builds hold no cycles, and
        # collections that walk the growing offsets took a fifth of a load. Back on once loaded.
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        owned = list(range(self.partitions)) if owned is None else sorted(owned)
        for p in set(range(self.partitions)) - set(owned):
            self.states[p] = PartitionState.UNOWNED
        self._pending_loads = len(owned)
        self._load_started = time.monotonic()
        self._loaded_bytes = self._loaded_records = 0
        self._schedule("load-progress", LOAD_PROGRESS_S, self._report_load_progress)
        if not owned:
            self._all_loaded()
        for p in owned:
            loop.run_in_executor(self._executor, self._load, p, self.shards[p], None).add_done_callback(
                lambda f, p=p: self._loaded(p, f))
        self._clean_bytes = [0] * self.partitions  # closed-segment bytes right after the last compaction
        backoff = self.settings.log_cleaner_backoff_ms / 1000
        self._schedule("compact", backoff, self._maybe_compact)
        interval = self.settings.log_flush_interval_ms
        if interval > 0:
            self._schedule("fsync", interval / 1000, self._sync_all, interval / 1000)

    def _load(self, p: int, shard: GroupShard, ownership: Ownership | None) -> tuple[PartitionLog, LoadResult, float]:
        started = time.perf_counter()
        plog = (PartitionLog(self.settings.data_dir, p, self.settings.offsets_topic_segment_bytes) if ownership is None
                else OwnedPartitionLog(self.settings.data_dir, p, self.settings.offsets_topic_segment_bytes, ownership))
        result = plog.load(shard.apply)  # no request reads the partition until it is loaded
        return plog, result, time.perf_counter() - started

    def _loaded(self, p: int, f: asyncio.Future) -> None:
        """A start-up load is over: the partition serves, and the start-up is counted down."""
        self._open(p, f)
        if self.states[p] is PartitionState.ACTIVE:
            result = f.result()[1]
            self._loaded_bytes += result.bytes
            self._loaded_records += result.records
        self._pending_loads -= 1
        if self._pending_loads == 0:
            self._all_loaded()

    # -- partitions moving between nodes (cluster mode): the view decides, these carry it out --

    def gain(self, p: int, claim: Claim | None = None) -> asyncio.Future:
        """Start coordinating partition `p`: COORDINATOR_LOAD_IN_PROGRESS at once and while its log
        loads off the loop (a cluster `claim` says which segments count and must confirm the load),
        then it serves. The future resolves to the partition's state once that is over (ACTIVE,
        FAILED, or UNOWNED if it was lost meanwhile or the claim did not hold)."""
        self._epochs[p] += 1
        self.states[p] = PartitionState.LOADING
        return asyncio.ensure_future(self._gain(p, self._epochs[p], claim))

    async def _gain(self, p: int, epoch: int, claim: Claim | None) -> PartitionState:
        loop = asyncio.get_running_loop()
        ownership = await claim.ownership() if claim is not None else None
        if self._epochs[p] != epoch:
            return self.states[p]
        job = loop.run_in_executor(self._executor, self._load, p, self.shards[p], ownership)
        await asyncio.wait([job])
        held = job.exception() is None and self._epochs[p] == epoch
        if held and claim is not None:
            try:
                held = await claim.confirm(job.result()[0].next_offset) and self._epochs[p] == epoch
            except Exception as e:
                log.warning("partition claim not confirmed partition=%d: %r", p, e)
                held = False
        if held or (job.exception() is not None and self._epochs[p] == epoch):
            self._claims[p] = claim
            self._open(p, job)
            return self.states[p]
        if job.exception() is None:  # lost while loading, or the claim no longer holds
            await loop.run_in_executor(self._executor, job.result()[0].close)
        if self._epochs[p] == epoch:
            self.states[p] = PartitionState.UNOWNED
        return self.states[p]

    async def lose(self, p: int, fenced: bool = False) -> int | None:
        """Stop coordinating partition `p` (another node takes it): it answers NOT_COORDINATOR from
        now on, its timers stop, its parked JoinGroup/SyncGroup requests answer NOT_COORDINATOR. A
        clean hand-over lets the writes in flight finish; `fenced` (this node may no longer be the
        owner) answers them NOT_COORDINATOR at once, since their records may land after the next owner
        loaded. The log is closed and the state dropped, so a later `gain` loads it again. Returns
        the log's next offset (where the next owner's records start), None if it had no log."""
        self._epochs[p] += 1
        self.states[p] = PartitionState.UNOWNED
        task = self._tasks.pop(("expire", p), None)
        if task is not None:
            task.cancel()
        for hook in self.on_lose:
            await hook(p, fenced)
        shard, runner, writer = self.shards[p], self.runners[p], self.writers[p]
        self.shards[p] = self._new_shard(p)
        self.runners[p] = self._new_runner(self.shards[p])
        self.writers[p] = None
        self._claims[p] = None
        runner.cancel_timers()
        if fenced:
            runner.abandon(ErrorCode.not_coordinator)
        for group in shard.groups.values():
            for parked, reply in group.release_parked(ErrorCode.not_coordinator):
                _resolve(parked, reply)
        if writer is None:
            return None
        writer.closed = True  # what still arrives for it answers NOT_COORDINATOR
        idle = writer.idle()
        if idle is not None:
            await idle
        await asyncio.get_running_loop().run_in_executor(self._executor, writer.plog.close)
        return writer.plog.next_offset

    def _open(self, p: int, f: asyncio.Future) -> None:
        """A load is over: the partition serves with its log writer, or is FAILED."""
        if f.exception() is not None:
            self.states[p] = PartitionState.FAILED
            log.error("partition load failed partition=%d: %s", p, f.exception())
            return
        plog, result, seconds = f.result()
        self.writers[p] = LogWriter(plog, self._writes, self.settings.log_flush_interval_ms == 0,
                                    self.settings.offsets_commit_timeout_ms, on_batch=metrics.batch_written,
                                    max_message_bytes=self.settings.message_max_bytes,
                                    on_error=metrics.write_failed)
        self.runners[p].log = self.writers[p]
        metrics.LOAD_SECONDS.labels(str(p)).set(seconds)
        self.states[p] = PartitionState.ACTIVE
        shard = self.shards[p]
        self.run(p, shard.on_loaded(now()))
        self._schedule(("expire", p), self.settings.offsets_retention_check_interval_ms / 1000, self._expire, p)
        if result.corrupt_bytes:
            metrics.CORRUPT_BYTES.labels(str(p)).inc(result.corrupt_bytes)
            metrics.CORRUPT_BATCHES.labels(str(p)).inc(result.corrupt_batches)
        if result.records or result.corrupt_bytes:
            damage = (f" corrupt_bytes={result.corrupt_bytes} corrupt_batches={result.corrupt_batches}"
                      if result.corrupt_bytes else "")
            log.log(logging.ERROR if result.corrupt_bytes else logging.INFO,
                    "partition loaded partition=%d records=%d bytes=%d groups=%d offsets=%d ms=%d%s%s", p,
                    result.records, result.bytes, len(shard.groups), sum(map(len, shard.offsets.values())),
                    seconds * 1000, damage, " (torn tail truncated)" if result.truncated else "")

    def _all_loaded(self) -> None:
        """The start-up load is over: cyclic GC back on, one summary line."""
        if self._gc_was_enabled:
            gc.enable()
        settle_gc()
        heap.trim()  # about 8 bytes per loaded offset of RSS that held only the load's garbage
        progress = self._tasks.pop("load-progress", None)
        if progress is not None:
            progress.cancel()
        seconds = time.monotonic() - self._load_started
        log.info("offsets log loaded partitions=%d active=%d failed=%d groups=%d bytes=%d records=%d "
                 "records_per_s=%d ms=%d", self.partitions - self.states.count(PartitionState.UNOWNED),
                 self.states.count(PartitionState.ACTIVE),
                 self.states.count(PartitionState.FAILED), sum(len(s.groups) for s in self.shards),
                 self._loaded_bytes, self._loaded_records, self._loaded_records / max(seconds, 1e-3),
                 seconds * 1000)

    def _report_load_progress(self) -> None:
        """A long load says how far it got (partitions done so far, their bytes, the rate)."""
        if self._pending_loads == 0:
            return
        seconds = time.monotonic() - self._load_started
        owned = self.partitions - self.states.count(PartitionState.UNOWNED)
        log.info("offsets log loading partitions=%d/%d bytes=%d records=%d records_per_s=%d",
                 owned - self._pending_loads, owned, self._loaded_bytes, self._loaded_records,
                 self._loaded_records / max(seconds, 1e-3))
        self._schedule("load-progress", LOAD_PROGRESS_S, self._report_load_progress)

    # -- periodic work: expiry, compaction, fsync. Each survives its own exception: it logs (at
    # most once a minute per task) and runs again after its interval.

    def _schedule(self, key: Any, delay: float, fn, *args, retry: float | None = None) -> None:
        """Run `fn(*args)` after `delay` s; if it raises without having scheduled its next run,
        it runs again after `retry` s (default: `delay`)."""
        retry = delay if retry is None else retry
        self._tasks[key] = asyncio.get_running_loop().call_later(delay, self._run_task, key, retry, fn, args)

    def _run_task(self, key: Any, retry: float, fn, args: tuple) -> None:
        handle = self._tasks.get(key)
        try:
            fn(*args)
        except Exception as e:
            self._task_failed(key, e)
            if self._tasks.get(key) is handle:  # it did not get to schedule its next run
                self._schedule(key, retry, fn, *args, retry=retry)

    def _task_failed(self, key: Any, error: BaseException) -> None:
        task = key[0] if isinstance(key, tuple) else key
        at = time.monotonic()
        if at - self._failure_logged.get(task, -3600.0) >= 60:
            self._failure_logged[task] = at
            log.error("periodic task failed task=%s %s: %r (it runs again; logged at most once a minute)", task,
                      f"partition={key[1]}" if isinstance(key, tuple) else "", error)

    def _expire(self, p: int) -> None:
        interval = self.settings.offsets_retention_check_interval_ms / 1000
        self._schedule(("expire", p), interval, self._expire, p)
        if self.states[p] is PartitionState.ACTIVE:
            self.run(p, self.shards[p].expire(now(), self.settings.offsets_retention_minutes * 60_000))

    def _maybe_compact(self) -> None:
        """Compact, off the loop, the first partition whose closed segments are dirty enough."""
        backoff = self.settings.log_cleaner_backoff_ms / 1000
        loop = asyncio.get_running_loop()
        for p, writer in enumerate(self.writers):
            if writer is None or writer.closed:
                continue
            closed = self._closed_bytes(p, writer)
            if closed and (closed - self._clean_bytes[p]) / closed >= self.settings.min_cleanable_dirty_ratio:
                started = time.perf_counter()
                if self._compactor is None:
                    self._compactor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                          initializer=die_with_parent)
                if writer.plog.stamp:
                    job = asyncio.ensure_future(self._compact_owned(p, writer, self._claims[p]))
                else:
                    job = loop.run_in_executor(self._compactor, compact, writer.plog.directory, wall_ms(),
                                               self.settings.log_cleaner_delete_retention_ms)
                job.add_done_callback(lambda f, p=p, writer=writer: self._compacted(p, writer, f, started))
                return
        self._schedule("compact", backoff, self._maybe_compact)

    def _closed_bytes(self, p: int, writer: LogWriter) -> int:
        """Bytes compaction would read: the closed segments (cluster mode: those the manifest counts)."""
        if not writer.plog.stamp:
            return closed_bytes(writer.plog.directory)
        claim = self._claims[p]
        return 0 if claim is None else closed_counted_bytes(writer.plog.directory, claim.counted(),
                                                            writer.plog.segments[-1][0])

    async def _compact_owned(self, p: int, writer: LogWriter, claim: Claim):
        """Cluster mode (storage/owned_compaction.py): compact into segments of a fresh stamp, swap
        the manifest while the claim holds, then remove what it no longer counts; if the swap fails
        (the claim was lost), remove the output instead. None if the claim was lost before it began."""
        loop = asyncio.get_running_loop()
        stamp = await claim.compaction_stamp()
        if stamp is None:
            return None
        counted, directory = claim.counted(), writer.plog.directory
        result = await loop.run_in_executor(self._compactor, compact_owned, directory, counted,
                                            writer.plog.segments[-1][0], stamp, wall_ms(),
                                            self.settings.log_cleaner_delete_retention_ms)
        if not result.written:
            return result
        # an unknown outcome raises: both the output and the old segments stay, the next owner's load sorts them
        if self.writers[p] is writer and await claim.swap(counted, stamp, result.end):
            await loop.run_in_executor(self._executor, remove_files,
                                       unlisted_segments(directory, claim.counted(), stamp))
            return result
        await loop.run_in_executor(self._executor, remove_files, result.written)
        log.info("compaction discarded partition=%d stamp=%d: the claim no longer holds", p, stamp)
        return None

    def _compacted(self, p: int, writer: LogWriter, f: asyncio.Future, started: float) -> None:
        # the next dirty partition, if any; after a failure, not before the backoff
        backoff = self.settings.log_cleaner_backoff_ms / 1000
        try:
            self._clean_bytes[p] = self._closed_bytes(p, writer)  # a failure is not retried at once
            if isinstance(f.exception(), BrokenProcessPool):  # the process died: the next compaction starts one
                self._compactor = None
            if f.exception() is not None:
                raise f.exception()
            result = f.result()
            if result is not None:
                metrics.COMPACTIONS.inc()
                metrics.COMPACTION_RECLAIMED.inc(result.reclaimed)
                log.info("compacted partition=%d segments=%d records=%d->%d bytes=%d->%d corrupt_segments=%d ms=%d",
                         p, result.segments_cleaned, result.records_before, result.records_after, result.bytes_before,
                         result.bytes_after, result.segments_corrupt, (time.perf_counter() - started) * 1000)
        except Exception as e:
            self._task_failed(("compact", p), e)
            self._schedule("compact", backoff, self._maybe_compact)
            return
        self._schedule("compact", 0, self._maybe_compact, retry=backoff)

    def _sync_all(self, interval: float) -> None:
        """Interval mode (`log.flush.interval.ms` > 0): fsync every log this often."""
        self._schedule("fsync", interval, self._sync_all, interval)
        for writer in self.writers:
            if writer is not None and not writer.closed:
                job = asyncio.get_running_loop().run_in_executor(self._executor, writer.plog.sync)
                job.add_done_callback(lambda f, p=writer.plog.partition: f.exception() is None or
                                      self._task_failed(("fsync", p), f.exception()))

    async def close(self) -> None:
        """Cancel timers, let in-flight writes finish, close (and fsync) every log."""
        for runner in self.runners:
            runner.cancel_timers()
        for task in self._tasks.values():
            task.cancel()
        for writer in self.writers:
            if writer is not None:
                idle = writer.idle()
                if idle is not None:
                    await idle
                writer.closed = True
                await asyncio.get_running_loop().run_in_executor(self._executor, writer.plog.close)
        self._executor.shutdown(wait=True)
        self._writes.shutdown()
        if self._compactor is not None:  # a compaction under way finishes (each segment's rewrite is atomic anyway)
            self._compactor.shutdown(wait=True)
        self._effects.shutdown(wait=False, cancel_futures=True)

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

    def delete_offsets(self, req: OffsetDeleteRequest) -> Any:
        return self.call(req.group_id, lambda shard, _, at: shard.delete_offsets(req),
                         lambda error: {"error_code": error, "partitions": {}})

    def delete_group(self, group_id: str) -> Any:
        return self.call(group_id, lambda shard, _, at: shard.delete_group(group_id))

    def consumer_heartbeat(self, req: ConsumerHeartbeatRequest, topics: TopicsImage) -> Any:
        return self.call(req.group_id, lambda shard, _, at: shard.consumer_heartbeat(req, topics, at), error_reply)

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
                                                runner.last_committed() if runner.in_flight else None)
        result = asyncio.get_running_loop().create_future()
        idle.add_done_callback(lambda _: _resolve(result, self.shards[p].fetch_offsets(req.group_id, req.topics)))
        return result

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

    def list_groups(self) -> list | ErrorCode:
        """Every group, or COORDINATOR_LOAD_IN_PROGRESS while any partition loads (spec §9.2)."""
        if PartitionState.LOADING in self.states:
            return ErrorCode.coordinator_load_in_progress
        return [g for p, shard in enumerate(self.shards) if self.states[p] is PartitionState.ACTIVE
                for g in shard.list_groups()]


def _resolve(ticket: Any, reply: Any) -> None:
    if isinstance(ticket, asyncio.Future) and not ticket.done():
        ticket.set_result(reply)
