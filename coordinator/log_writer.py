"""Group commit for one offsets partition: records from every request that arrives while a write
is in flight are gathered into the next batch, so one write (and one fsync) serves many requests.
The write runs on a worker thread; its outcome comes back to the loop as the mapped error code.

Failures map as Kafka maps coordinator write errors (spec §10.3): a storage error → NOT_COORDINATOR,
a write slower than `offsets.commit.timeout.ms` → COORDINATOR_NOT_AVAILABLE. A failed batch
leaves nothing in the segment and changes no state (the records are never applied).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor

from protocol import ErrorCode

from storage.log import PartitionLog
from storage.records import Record

log = logging.getLogger("groupd.storage")


class LogWriter:
    def __init__(self, plog: PartitionLog, executor: Executor, fsync_each_batch: bool, timeout_ms: int,
                 on_batch=None, on_late=None) -> None:
        self.plog = plog
        self._executor = executor
        self._fsync = fsync_each_batch
        self._timeout = timeout_ms / 1000
        self._pending: list[tuple[list[Record], asyncio.Future]] = []
        self._writing = False
        self._idle_waiters: list[asyncio.Future] = []
        self._on_batch = on_batch  # (records, bytes, seconds) → None, for metrics
        # records whose requests were answered as timed out but which then landed: the log has
        # them, so memory must too (applied, never answered twice)
        self._on_late = on_late
        self.closed = False

    def append(self, records: list[Record]) -> asyncio.Future:
        """A future of None once `records` are durable, or of the mapped error code."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self.closed:
            fut.set_result(ErrorCode.not_coordinator)
            return fut
        self._pending.append((records, fut))
        if not self._writing:
            self._writing = True
            loop.call_soon(self._flush)  # gather what the same loop turn appends
        return fut

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            self._writing = False
            self._notify_idle()
            return
        loop = asyncio.get_running_loop()
        records = [r for recs, _ in batch for r in recs]
        futures = [f for _, f in batch]
        started = time.perf_counter()
        job = loop.run_in_executor(self._executor, self.plog.append, records, self._fsync)
        timer = loop.call_later(self._timeout, self._timed_out, futures)

        def done(f: asyncio.Future) -> None:
            timer.cancel()
            error = None
            if f.exception() is not None:
                log.error("write failed partition=%d records=%d error=%r", self.plog.partition, len(records),
                          f.exception())
                error = ErrorCode.not_coordinator  # KAFKA_STORAGE_ERROR, as a coordinator reports it
            elif self._on_batch is not None:
                self._on_batch(len(records), f.result(), time.perf_counter() - started)
            late = [r for recs, fut in batch if fut.done() for r in recs] if error is None else []
            for fut in futures:
                if not fut.done():
                    fut.set_result(error)
            if late and self._on_late is not None:
                log.warning("write landed after its timeout partition=%d records=%d: applied", self.plog.partition,
                            len(late))
                self._on_late(late)
            self._flush()

        job.add_done_callback(done)

    def _timed_out(self, futures: list[asyncio.Future]) -> None:
        log.error("write timed out partition=%d after %.0f ms", self.plog.partition, self._timeout * 1000)
        for fut in futures:
            if not fut.done():
                fut.set_result(ErrorCode.coordinator_not_available)  # REQUEST_TIMED_OUT, mapped

    def idle(self) -> asyncio.Future | None:
        """None when nothing is being written, else a future for when nothing is."""
        if not self._writing:
            return None
        fut = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(fut)
        return fut

    def _notify_idle(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
