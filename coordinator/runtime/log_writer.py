"""Group commit for one offsets partition: the records of every request appended in one loop turn
are written as one batch, and one fsync covers every batch written before it started.

As Kafka appends, the batch is written on the loop (an unbuffered write to the page cache, one
syscall); only the fsync runs on a worker thread, in a round with the other partitions' fsyncs of
the loop turn (sync_rounds.py), and batches written while it runs wait for the next one, so a slow
disk makes batches bigger, not the loop slower. A write that has to roll the
segment (fsync the full one, create the next) runs on the worker too, and later batches wait for it.
In interval mode (`log.flush.interval.ms` > 0) a batch is answered once written.

Each request's records are encoded on their own before they join a batch, so one bad request never
fails its neighbours: a record that cannot be encoded (a group id over 32,767 bytes) or a request
over `message.max.bytes` fails alone with RECORD_LIST_TOO_LARGE, which each API maps as Kafka does
(`Outcome.too_large`). Failures map as Kafka maps coordinator write errors (spec §10.3): a storage
error → NOT_COORDINATOR, a write slower than `offsets.commit.timeout.ms` → COORDINATOR_NOT_AVAILABLE.
A failed write or fsync leaves nothing in the segment: it is cut back to the first batch that is not
durable, and every append from that batch on fails (the runner reverts what their records applied).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable

from groupd.protocol import ErrorCode
from groupd.storage.log import BatchKind, PartitionLog, batch_kind, encode
from groupd.storage.records import Record

from .log_workers import LogWorkers
from .sync_rounds import SyncRounds

# Kafka's DefaultRecordBatch.RECORD_BATCH_OVERHEAD and DefaultRecord.MAX_RECORD_OVERHEAD: a bound
# on the batch one request's records make, checked against message.max.bytes
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 21

log = logging.getLogger("groupd.storage")

Append = tuple[list, Callable, Callable, BatchKind]  # (encoded records, completed, timed_out, batch kind)


class Written:
    """A batch written to the active segment and not yet durable."""
    __slots__ = ("appends", "start", "first_offset", "records", "size", "written_at")

    def __init__(self, appends: list[Append], start: int, first_offset: int, records: int, size: int) -> None:
        self.appends, self.start, self.first_offset = appends, start, first_offset
        self.records, self.size, self.written_at = records, size, time.perf_counter()


def _runs(appends: list[Append]) -> list[tuple[BatchKind, list]]:
    """The batches a flush writes: plain appends side by side share one; each transactional
    append (a producer's offsets, a marker) is a batch of its own."""
    runs: list[tuple[BatchKind, list]] = []
    for pairs, _, _, kind in appends:
        if kind is None and runs and runs[-1][0] is None:
            runs[-1][1].extend(pairs)
        else:
            runs.append((kind, list(pairs)))
    return runs


class LogWriter:
    def __init__(self, plog: PartitionLog, workers: LogWorkers, fsync_each_batch: bool, timeout_ms: int,
                 on_batch=None, max_message_bytes: int = 1048588, on_error=None, encoder=encode, kind=batch_kind,
                 syncs: SyncRounds | None = None) -> None:
        self.plog = plog
        # records -> [(key, value)] and the batch they need: the offsets log's, or __transaction_state's
        self._encode, self._kind = encoder, kind
        # the log end readers see (Fetch, ListOffsets of __consumer_offsets): past the last durable
        # batch (interval mode: the last written), never a batch a failed fsync may still cut
        self.end_offset = plog.next_offset
        self._workers = workers  # a write that rolls the segment runs on one
        # the fsyncs, in rounds shared with the other partitions of the log (a writer alone: its own)
        self._syncs = syncs if syncs is not None else SyncRounds(workers)
        self._fsync = fsync_each_batch
        self._timeout = timeout_ms / 1000
        self._max_bytes = max_message_bytes
        self._pending: list[Append] = []  # appended this loop turn (or waiting for a roll): not yet written
        self._unsynced: list[Written] = []  # written, waiting for the next fsync
        self._job: list[Written] | None = None  # on a worker: an fsync, or a write that rolls the segment
        self._rolling = False
        self._scheduled = False
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
            encoded = self._encode(records)
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
        self._pending.append((encoded, completed, timed_out, self._kind(records)))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)  # gather what the same loop turn appends

    def _flush(self) -> None:
        """Write what was appended as one batch (unless a rolling write is under way: its end calls this)."""
        self._scheduled = False
        if not self._pending or self._rolling:
            self._check_idle()
            return
        appends, self._pending = self._pending, []
        runs = _runs(appends)
        encoded = [pair for _, pairs in runs for pair in pairs]
        plog = self.plog
        first_offset = plog.next_offset
        try:
            batch = plog.build(encoded) if len(runs) == 1 and runs[0][0] is None else plog.build_runs(runs)
            rolls = not plog.fits(len(batch))
            start = None if rolls else plog.write(batch, len(encoded))
        except Exception as e:  # the segment is cut back already: this batch alone fails
            self._fail(appends, e, len(encoded))
            self._check_idle()
            return
        if rolls:
            if self._job is not None:  # roll once the fsync in flight is done
                self._pending = appends + self._pending
                return
            written = Written(appends, 0, first_offset, len(encoded), len(batch))
            self._start(lambda: plog.append_runs(runs, self._fsync), [written], rolling=True)
            return
        written = Written(appends, start, first_offset, len(encoded), len(batch))
        if not self._fsync:
            self._durable([written])
            self._check_idle()
            return
        self._unsynced.append(written)
        if self._job is None:
            self._sync()

    def _sync(self) -> None:
        group, self._unsynced = self._unsynced, []
        timer = asyncio.get_running_loop().call_later(self._timeout, self._timed_out, group)
        self._job = group
        self._syncs.sync(self.plog, lambda error: self._job_done(error, group, timer, False))

    def _start(self, work: Callable[[], object], group: list[Written], rolling: bool) -> None:
        timer = asyncio.get_running_loop().call_later(self._timeout, self._timed_out, group)
        self._rolling, self._job = rolling, group
        self._workers.run(work, lambda error: self._job_done(error, group, timer, rolling))

    def _job_done(self, error: BaseException | None, group: list[Written], timer: asyncio.TimerHandle,
                  rolling: bool) -> None:
        timer.cancel()
        self._job, self._rolling = None, False
        if error is None:
            self._durable(group)
        else:
            if not rolling:  # a rolling write cut itself back; an fsync's batches are cut here
                self.plog.cut(group[0].start, group[0].first_offset)
            # everything written or queued after the failed batches was cut with them, or applied on top of them
            appends = [a for w in group + self._unsynced for a in w.appends] + self._pending
            self._unsynced, self._pending = [], []
            self._fail(appends, error, sum(w.records for w in group))
        if self._unsynced:
            self._sync()
        elif self._pending:
            self._flush()
        self._check_idle()

    def _durable(self, group: list[Written]) -> None:
        done = time.perf_counter()
        self.end_offset = group[-1].first_offset + group[-1].records
        for written in group:
            if self._on_batch is not None:
                self._on_batch(written.records, written.size, done - written.written_at)
            for _, completed, _, _ in written.appends:
                completed(None)

    def _fail(self, appends: list[Append], error: BaseException, records: int) -> None:
        log.error("write failed partition=%d records=%d error=%r", self.plog.partition, records, error)
        if self._on_error is not None:
            self._on_error(self.plog.partition, "failed")
        for _, completed, _, _ in appends:
            completed(ErrorCode.not_coordinator)  # KAFKA_STORAGE_ERROR, as a coordinator reports it

    def _timed_out(self, group: list[Written]) -> None:
        log.error("write timed out partition=%d after %.0f ms", self.plog.partition, self._timeout * 1000)
        if self._on_error is not None:
            self._on_error(self.plog.partition, "timed_out")
        for written in group:
            for _, _, timed_out, _ in written.appends:
                timed_out()

    def _busy(self) -> bool:
        return self._job is not None or self._scheduled or bool(self._pending or self._unsynced)

    def idle(self) -> asyncio.Future | None:
        """None when nothing is being written, else a future for when nothing is."""
        if not self._busy():
            return None
        fut = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(fut)
        return fut

    def _check_idle(self) -> None:
        if self._idle_waiters and not self._busy():
            waiters, self._idle_waiters = self._idle_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
