"""Group commit for one offsets partition: records from every request that arrives while a write
is in flight are gathered into the next batch, so one write (and one fsync) serves many requests.
The write runs on a worker thread; its outcome comes back to the loop as the mapped error code.

Each request's records are encoded on their own before they join a batch, so one bad request never
fails its neighbours: a record that cannot be encoded (a group id over 32,767 bytes) or a request
over `message.max.bytes` fails alone with RECORD_LIST_TOO_LARGE, which each API maps as Kafka does
(`Outcome.too_large`). Failures map as Kafka maps coordinator write errors (spec §10.3): a storage
error → NOT_COORDINATOR, a write slower than `offsets.commit.timeout.ms` → COORDINATOR_NOT_AVAILABLE. A failed batch
leaves nothing in the segment; the runner reverts what its records applied.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable
from concurrent.futures import Executor

from protocol import ErrorCode

from storage.log import PartitionLog, encode
from storage.records import Record

# Kafka's DefaultRecordBatch.RECORD_BATCH_OVERHEAD and DefaultRecord.MAX_RECORD_OVERHEAD: a bound
# on the batch one request's records make, checked against message.max.bytes
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 21

log = logging.getLogger("groupd.storage")


class LogWriter:
    def __init__(self, plog: PartitionLog, executor: Executor, fsync_each_batch: bool, timeout_ms: int,
                 on_batch=None, max_message_bytes: int = 1048588, on_error=None) -> None:
        self.plog = plog
        self._executor = executor
        self._fsync = fsync_each_batch
        self._timeout = timeout_ms / 1000
        self._max_bytes = max_message_bytes
        self._pending: list[tuple[list, Callable, Callable]] = []  # (encoded records, completed, timed_out)
        self._writing = False
        self._idle_waiters: list[asyncio.Future] = []
        self._on_batch = on_batch  # (records, bytes, seconds) → None, for metrics
        self._on_error = on_error  # (partition, "failed" | "timed_out") → None, for metrics
        self.closed = False

    def append(self, records: list[Record], completed: Callable[[ErrorCode | None], None],
               timed_out: Callable[[], None]) -> None:
        """`completed(None)` once `records` are durable, or `completed(error)` with the mapped
        error; `timed_out()` first when the write outlasts `offsets.commit.timeout.ms` (the records
        may still land: the caller keeps them applied)."""
        if self.closed:
            completed(ErrorCode.not_coordinator)
            return
        try:
            encoded = encode(records)
        except (struct.error, UnicodeEncodeError, OverflowError) as e:
            log.warning("records not written partition=%d records=%d: cannot be encoded: %s", self.plog.partition,
                        len(records), e)
            completed(ErrorCode.record_list_too_large)
            return
        size = BATCH_OVERHEAD + sum(len(k) + len(v or b"") + RECORD_OVERHEAD for k, v in encoded)
        if size > self._max_bytes:
            log.warning("records not written partition=%d records=%d: %d bytes are over message.max.bytes=%d",
                        self.plog.partition, len(records), size, self._max_bytes)
            completed(ErrorCode.record_list_too_large)
            return
        self._pending.append((encoded, completed, timed_out))
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
        encoded = [pair for pairs, _, _ in batch for pair in pairs]
        started = time.perf_counter()
        job = loop.run_in_executor(self._executor, self.plog.append_encoded, encoded, self._fsync)
        timer = loop.call_later(self._timeout, self._timed_out, batch)

        def done(f: asyncio.Future) -> None:
            timer.cancel()
            error = None
            if f.exception() is not None:
                log.error("write failed partition=%d records=%d error=%r", self.plog.partition, len(encoded),
                          f.exception())
                if self._on_error is not None:
                    self._on_error(self.plog.partition, "failed")
                error = ErrorCode.not_coordinator  # KAFKA_STORAGE_ERROR, as a coordinator reports it
            elif self._on_batch is not None:
                self._on_batch(len(encoded), f.result(), time.perf_counter() - started)
            failed = batch
            if error is not None:  # what was queued behind a failed write depended on it: it fails too
                failed, self._pending = batch + self._pending, []
            for _, completed, _ in failed:
                completed(error)
            self._flush()

        job.add_done_callback(done)

    def _timed_out(self, batch) -> None:
        log.error("write timed out partition=%d after %.0f ms", self.plog.partition, self._timeout * 1000)
        if self._on_error is not None:
            self._on_error(self.plog.partition, "timed_out")
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
