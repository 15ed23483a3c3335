"""Group commit for one offsets partition: records from every request that arrives while a write
is in flight are gathered into the next batch, so one write (and one fsync) serves many requests.
The write runs on a worker thread; its outcome comes back to the loop as the mapped error code.

Failures map as Kafka maps coordinator write errors (spec §10.3): a storage error → NOT_COORDINATOR,
a write slower than `offsets.commit.timeout.ms` → COORDINATOR_NOT_AVAILABLE. A failed batch
leaves nothing in the segment; the runner reverts what its records applied.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor

from protocol import ErrorCode

from storage.log import PartitionLog
from storage.records import Record

log = logging.getLogger("groupd.storage")


class LogWriter:
    def __init__(self, plog: PartitionLog, executor: Executor, fsync_each_batch: bool, timeout_ms: int,
                 on_batch=None) -> None:
        self.plog = plog
        self._executor = executor
        self._fsync = fsync_each_batch
        self._timeout = timeout_ms / 1000
        self._pending: list[tuple[list[Record], Callable, Callable]] = []  # (records, completed, timed_out)
        self._writing = False
        self._idle_waiters: list[asyncio.Future] = []
        self._on_batch = on_batch  # (records, bytes, seconds) → None, for metrics
        self.closed = False

    def append(self, records: list[Record], completed: Callable[[ErrorCode | None], None],
               timed_out: Callable[[], None]) -> None:
        """`completed(None)` once `records` are durable, or `completed(error)` with the mapped
        error; `timed_out()` first when the write outlasts `offsets.commit.timeout.ms` (the records
        may still land: the caller keeps them applied)."""
        if self.closed:
            completed(ErrorCode.not_coordinator)
            return
        self._pending.append((records, completed, timed_out))
        if not self._writing:
            self._writing = True
            asyncio.get_running_loop().call_soon(self._flush)  # gather what the same loop turn appends

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            self._writing = False
            self._notify_idle()
            return
        loop = asyncio.get_running_loop()
        records = [r for recs, _, _ in batch for r in recs]
        started = time.perf_counter()
        job = loop.run_in_executor(self._executor, self.plog.append, records, self._fsync)
        timer = loop.call_later(self._timeout, self._timed_out, batch)

        def done(f: asyncio.Future) -> None:
            timer.cancel()
            error = None
            if f.exception() is not None:
                log.error("write failed partition=%d records=%d error=%r", self.plog.partition, len(records),
                          f.exception())
                error = ErrorCode.not_coordinator  # KAFKA_STORAGE_ERROR, as a coordinator reports it
            elif self._on_batch is not None:
                self._on_batch(len(records), f.result(), time.perf_counter() - started)
            failed = batch
            if error is not None:  # what was queued behind a failed write depended on it: it fails too
                failed, self._pending = batch + self._pending, []
            for _, completed, _ in failed:
                completed(error)
            self._flush()

        job.add_done_callback(done)

    def _timed_out(self, batch) -> None:
        log.error("write timed out partition=%d after %.0f ms", self.plog.partition, self._timeout * 1000)
        for _, _, timed_out in batch:
            timed_out()

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
