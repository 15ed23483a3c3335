"""Group commit for one data partition (`records.plane: disk`), as `log_writer.py` does for an offsets
partition: the batches producers sent in one loop turn are written with one unbuffered write (the
page cache, on the loop), one fsync on a `LogWorkers` thread covers every batch written before it
started, and a write that has to roll the segment runs the roll on the worker first: when the
batches do not fit (segment.bytes), or when the segment is older than segment.ms (Kafka's
`LogSegment.shouldRoll`, storage/records_plane/rolling.py). Retention that takes every segment asks
for a roll to an empty segment first (`roll_empty`), as Kafka's `deleteSegments` does.

Offsets are given at `append` (Produce answers with them, idempotent producers' duplicates are found
by them): `next_offset` is the end of what was accepted, `written` of what is in the segment,
`end_offset` (the high watermark readers see) of what is durable under the flush policy
(`log.flush.interval.ms` 0: fsynced; N: written, fsynced by the plane's timer). Each append says
when it wants its answer: once written (acks=1) or once durable (acks=all).

A failed write or fsync (a full disk) leaves nothing in the segment: it is cut back to the first
batch not durable, every append from there on fails with KAFKA_STORAGE_ERROR, `next_offset` goes
back, and `on_cut(offset)` tells the plane to forget what those batches taught (producer state).
One log line per failure; other partitions are not touched.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable

from groupd.coordinator.system_clock import wall_ms
from groupd.protocol import ErrorCode
from groupd.storage.records_plane.rolling import random_jitter
from groupd.storage.records_plane.segments import DataLog

from .log_workers import LogWorkers

log = logging.getLogger("groupd.storage")

_MAX_TS = struct.Struct(">q")
_OFFSET, _EPOCH = struct.Struct(">q"), struct.Struct(">i")

Done = Callable[[ErrorCode | None], None]
RollPolicy = Callable[[], tuple[int, int]]  # the topic's (max segment ms, segment.jitter.ms), read at each flush


class _Item:
    __slots__ = ("data", "base", "count", "done", "durable")

    def __init__(self, data: bytearray, base: int, count: int, done: Done | None, durable: bool) -> None:
        self.data, self.base, self.count, self.done, self.durable = data, base, count, done, durable


class _Written:
    __slots__ = ("items", "start", "first_offset", "end_offset", "size", "at")

    def __init__(self, items: list[_Item], start: int, size: int) -> None:
        self.items, self.start, self.size = items, start, size
        self.first_offset = items[0].base
        self.end_offset = items[-1].base + items[-1].count
        self.at = time.perf_counter()


class DataWriter:
    def __init__(self, dlog: DataLog, workers: LogWorkers, fsync_each_batch: bool, timeout_ms: int,
                 on_cut: Callable[[int], None], on_durable: Callable[[], None],
                 on_error: Callable[[str], None] | None = None, roll_policy: RollPolicy | None = None,
                 clock: Callable[[], int] = wall_ms) -> None:
        self.dlog = dlog
        self.next_offset = dlog.next_offset  # accepted
        self.written = dlog.next_offset  # in the segment
        self.end_offset = dlog.next_offset  # durable: the high watermark
        self.bytes_durable = 0  # bytes made durable since start (held fetches' min_bytes)
        self._workers = workers
        self._fsync = fsync_each_batch
        self._timeout = timeout_ms / 1000
        self._on_cut, self._on_durable, self._on_error = on_cut, on_durable, on_error
        self._roll_policy, self._clock = roll_policy, clock
        self._jitter: int | None = None  # the active segment's roll jitter, drawn once per segment
        self._pending: list[_Item] = []
        self._unsynced: list[_Written] = []
        self._job: list[_Written] | None = None
        self._rolling = False
        self._scheduled = False
        self._idle: list[asyncio.Future] = []
        self.closed = False
        self.failed_writes = 0

    def append(self, data: bytes | bytearray, count: int, done: Done | None, durable: bool) -> _Item:
        """Accept one batch (`data`, its offset bytes stamped here: a bytearray in place, the caller
        giving it up, as a Produce's batches are; bytes on a copy); `item.base` is its base offset.
        `item.done(None)` once written (durable=False) or durable (True), else `item.done(error)`;
        `done` may be set on the item until the loop turn ends."""
        base = self.next_offset
        buf = data if isinstance(data, bytearray) else bytearray(data)
        # the offsets and partitionLeaderEpoch: outside the CRC, as Kafka's leader stamps them
        _OFFSET.pack_into(buf, 0, base)
        _EPOCH.pack_into(buf, 12, self.dlog.leader_epoch)
        self.next_offset = base + count
        item = _Item(buf, base, count, done, durable)
        self._pending.append(item)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return item

    @property
    def rolling(self) -> bool:
        """A segment roll runs on a worker thread (it changes the log's segment list)."""
        return self._rolling

    def _flush(self) -> None:
        self._scheduled = False
        if not self._pending or self._rolling or self.closed:
            self._check_idle()
            return
        items = self._pending
        data = items[0].data if len(items) == 1 else b"".join([i.data for i in items])
        dlog = self.dlog
        if not dlog.fits(len(data)) or self._old_enough_to_roll(items):
            if self._job is not None:
                return  # roll once the fsync in flight is done (its end calls _flush)
            self._start(lambda: dlog.roll(items[0].base), [], rolling=True)
            return
        self._pending = []
        try:
            start = dlog.write_batches(data, sum(i.count for i in items),
                                       [(i.base, len(i.data), _MAX_TS.unpack_from(i.data, 35)[0]) for i in items])
        except Exception as e:  # cut back already: these and nothing before them fail
            self._fail(items, e)
            self._check_idle()
            return
        written = _Written(items, start, len(data))
        self.written = written.end_offset
        for i in items:
            if not i.durable and i.done is not None:
                done, i.done = i.done, None
                done(None)
        if not self._fsync:
            self._durable([written])
        else:
            self._unsynced.append(written)
            if self._job is None:
                self._sync()
        self._check_idle()

    def _old_enough_to_roll(self, items: list[_Item]) -> bool:
        """segment.ms: the active segment is not empty and older than the topic allows (measured to
        the largest timestamp of the batches about to be written)."""
        if self._roll_policy is None or not self.dlog.active_bytes:
            return False
        segment_ms, jitter_ms = self._roll_policy()
        if self._jitter is None:
            self._jitter = random_jitter(segment_ms, jitter_ms)
        newest = max(_MAX_TS.unpack_from(i.data, 35)[0] for i in items)
        return self.dlog.time_to_roll(newest, self._clock(), segment_ms, self._jitter)

    def roll_empty(self, then: Callable[[BaseException | None], None]) -> bool:
        """Roll the active segment at the log end, leaving an empty active one (retention is about to
        delete every segment: a log always keeps one). Only when the writer is idle and everything is
        durable; `then(error)` on the loop once the roll is over. False: not started (busy or empty)."""
        if self.closed or self._job is not None or self._scheduled or self._pending or self._unsynced or \
                self.end_offset != self.next_offset or not self.dlog.active_bytes:
            return False
        base, dlog = self.next_offset, self.dlog
        self._start(lambda: dlog.roll(base), [], rolling=True, then=then)
        return True

    def _sync(self) -> None:
        group, self._unsynced = self._unsynced, []
        self._start(self.dlog.fsync_active, group, rolling=False)

    def _start(self, work: Callable[[], object], group: list[_Written], rolling: bool,
               then: Callable[[BaseException | None], None] | None = None) -> None:
        timer = asyncio.get_running_loop().call_later(self._timeout, self._timed_out)
        self._rolling, self._job = rolling, group
        self._workers.run(work, lambda error: self._job_done(error, group, timer, rolling, then))

    def _job_done(self, error: BaseException | None, group: list[_Written], timer, rolling: bool,
                  then: Callable[[BaseException | None], None] | None = None) -> None:
        timer.cancel()
        self._job, self._rolling = None, False
        if rolling and error is None:
            self._jitter = None  # the new segment draws its own
        if then is not None:
            then(error)  # before the appends that waited: they go to the new segment
        if error is None:
            if group:
                self._durable(group)
        elif rolling:  # nothing was written: the appends waiting for the roll fail
            items, self._pending = self._pending, []
            self._fail(items, error)
        else:
            self.dlog.cut(group[0].start, group[0].first_offset)
            items = [i for w in group + self._unsynced for i in w.items] + self._pending
            self._unsynced, self._pending = [], []
            self._fail(items, error)
        if self._unsynced:
            self._sync()
        elif self._pending:
            self._flush()
        self._check_idle()

    def _durable(self, group: list[_Written]) -> None:
        self.end_offset = group[-1].end_offset
        self.bytes_durable += sum(w.size for w in group)
        for w in group:
            for i in w.items:
                if i.durable and i.done is not None:
                    done, i.done = i.done, None
                    done(None)
        self._on_durable()

    def _fail(self, items: list[_Item], error: BaseException) -> None:
        """Every item from the first failed one on: offsets go back to it."""
        if not items:
            return
        first = items[0].base
        self.next_offset = self.written = self.dlog.next_offset = min(first, self.dlog.next_offset)
        self.end_offset = min(self.end_offset, first)
        self.failed_writes += 1
        log.error("write failed partition=%s from_offset=%d batches=%d error=%s", self.dlog.name, first, len(items),
                  error)
        if self._on_error is not None:
            self._on_error(self.dlog.name)
        self._on_cut(first)
        for i in items:
            if i.done is not None:
                done, i.done = i.done, None
                done(ErrorCode.kafka_storage_error)

    def _timed_out(self) -> None:
        log.warning("write slow partition=%s: still not durable after %.0f ms", self.dlog.name, self._timeout * 1000)

    def abandon(self, error: ErrorCode) -> None:
        """Answer every append not answered yet with `error` now (a lost leadership: the records may
        still land, the producer retries them); what they write is no longer waited for."""
        for i in self._pending + [i for w in self._unsynced + (self._job or []) for i in w.items]:
            if i.done is not None:
                done, i.done = i.done, None
                done(error)

    def sync_now(self) -> None:
        """Interval mode: fsync what was written (the plane's timer calls this on a worker thread)."""
        self.dlog.sync()

    def idle(self) -> asyncio.Future | None:
        if not (self._job is not None or self._scheduled or self._pending or self._unsynced):
            return None
        fut = asyncio.get_running_loop().create_future()
        self._idle.append(fut)
        return fut

    def _check_idle(self) -> None:
        if self._idle and not (self._job is not None or self._scheduled or self._pending or self._unsynced):
            waiters, self._idle = self._idle, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
