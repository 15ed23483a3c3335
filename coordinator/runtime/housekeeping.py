"""The periodic work of a node's offsets partitions: offset expiry, compaction (in a process of its
own) and the interval fsync. Each task survives its own exception: it logs (rate-limited) and
retries."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from groupd.coordinator.observability import metrics
from groupd.coordinator.system_clock import now, wall_ms
from groupd.storage.compaction import closed_bytes, compact, die_with_parent
from groupd.storage.files import remove_files
from groupd.storage.owned_compaction import closed_counted_bytes, compact_owned
from groupd.storage.owned_log import unlisted_segments

from .cleaner_process import died, spawn_pool
from .log_writer import LogWriter
from .partitions import Claim, PartitionState

log = logging.getLogger("groupd")


class Housekeeping:
    """GroupCoordinator's periodic work (coordinator.py holds the state it works on)."""

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
                    self._compactor = spawn_pool(die_with_parent)
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
            if died(f.exception()):  # the process died: the next compaction starts one
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
