"""Partitions' lifecycle on a node: the load of every owned partition at start (off the loop,
LOAD_IN_PROGRESS meanwhile), and in cluster mode gaining and losing partitions as the cluster view
decides (Kafka's onElection / onResignation)."""

from __future__ import annotations

import asyncio
import enum
import gc
import logging
import time
from collections.abc import Iterable
from typing import Any, Protocol

from groupd.coordinator.core.partition import GroupShard
from groupd.coordinator.observability import metrics
from groupd.coordinator.system_clock import now
from groupd.protocol import ErrorCode
from groupd.storage.log import LoadResult, PartitionLog
from groupd.storage.owned_log import OwnedPartitionLog, Ownership

from . import heap
from .log_writer import LogWriter

log = logging.getLogger("groupd")


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


class PartitionLifecycle:
    """GroupCoordinator's partition lifecycle (coordinator.py holds the state it works on)."""

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
            if self.states[p] is PartitionState.ACTIVE:
                for hook in self.on_gain:
                    hook(p)
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
                resolve(parked, reply)
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
                                    on_error=metrics.write_failed, syncs=self._syncs)
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
        if self._loaded_bytes:  # an empty log left no garbage, and trim() would import ctypes for nothing
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


def resolve(ticket: Any, reply: Any) -> None:
    if isinstance(ticket, asyncio.Future) and not ticket.done():
        ticket.set_result(reply)
