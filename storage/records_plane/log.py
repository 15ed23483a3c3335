"""One partition's records in memory: a list of stamped v2 batches, the log start offset and the
high watermark (= log end: one replica, every append is committed at once), plus the producer
state that idempotent producers need and their transactions (the last stable offset, aborted ranges:
transactions.py). Sans-IO: the current time is passed in.

Retention follows Kafka's rules with a batch in the role of a segment:
- by bytes: drop the oldest batch while the log minus that batch is still ≥ `retention_bytes`
  (Kafka's `retention.bytes` check), so the log never holds more than `retention_bytes` plus one
  batch;
- by time: drop the oldest batch while its max timestamp is more than `retention_ms` old
  (Kafka's `retention.ms` uses a segment's largest timestamp the same way);
and the log start offset moves to the first batch kept (to the high watermark when none is).
Bytes are checked on every append (memory must stay bounded); time only when the plane's owner
calls `enforce_retention`, every `log.retention.check.interval.ms` as Kafka does, so a record
stamped in the past is still there to be read until the next check.
"""

from __future__ import annotations

import bisect

from .batches import ProducedBatch, first_record_at_or_after, record_timestamp, record_with_max_timestamp
from .producers import Producers


class TopicPartitionLog:
    def __init__(self, retention_bytes: int, retention_ms: int) -> None:
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms  # -1: no time limit
        self.batches: list[ProducedBatch] = []
        self.bases: list[int] = []  # base offset of each batch, for bisect
        self.log_start = 0
        self.high_watermark = 0
        self.size = 0
        self.producers = Producers()

    # -- appending -----------------------------------------------------------------------------

    def check_producer(self, batch: ProducedBatch) -> int | None:
        """None to append `batch`, the base offset of the batch it duplicates, or raises BatchError
        (storage/records_plane/producers.py)."""
        return self.producers.check(batch)

    def append(self, batch: ProducedBatch, now_ms: int) -> int:
        """Stamp and append a checked batch; its base offset."""
        base = self._put(batch)
        if batch.producer_id >= 0:
            self.producers.record(batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count,
                                  base, now_ms, batch.transactional, batch.max_timestamp)
        self._drop_while(lambda oldest: self.size - oldest.size >= self.retention_bytes)
        return base

    def append_marker(self, marker: ProducedBatch, commit: bool, coordinator_epoch: int, now_ms: int) -> int:
        """Append an end-transaction marker (checked by `producers.check_marker`); its offset."""
        offset = self._put(marker)
        self.producers.marker(marker.producer_id, marker.producer_epoch, coordinator_epoch, offset, commit, now_ms)
        self._drop_while(lambda oldest: self.size - oldest.size >= self.retention_bytes)
        return offset

    def _put(self, batch: ProducedBatch) -> int:
        base = self.high_watermark
        batch.stamp(base)
        self.batches.append(batch)
        self.bases.append(base)
        self.high_watermark = base + batch.count
        self.size += batch.size
        return base

    # -- retention -----------------------------------------------------------------------------

    def enforce_retention(self, now_ms: int) -> int:
        """Drop what retention by bytes or by time no longer keeps; the number of batches dropped."""
        return self._drop_while(lambda oldest: self.size - oldest.size >= self.retention_bytes or (
            self.retention_ms >= 0 and now_ms - oldest.max_timestamp > self.retention_ms))

    def drop_oldest(self) -> int:
        """Drop the oldest batch (the plane's memory cap); the bytes freed."""
        size = self.batches[0].size
        self._drop_while(lambda _oldest: True, limit=1)
        return size

    def _drop_while(self, drop, limit: int | None = None) -> int:
        dropped = 0
        batches = self.batches
        end = len(batches) if limit is None else min(limit, len(batches))
        while dropped < end and drop(batches[dropped]):
            self.size -= batches[dropped].size
            dropped += 1
        if dropped:
            del batches[:dropped]
            del self.bases[:dropped]
            self.log_start = max(self.log_start, self.bases[0] if self.bases else self.high_watermark)
            self.producers.txns.trim_before(self.log_start)
        return dropped

    # -- deleting records (DeleteRecords) ------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Move the log start to `offset` (the caller checked log start < offset ≤ high watermark) and
        drop the batches wholly below it; the bytes freed. A batch holding the new start stays whole
        (a fetch returns it; the consumer skips the records below its offset)."""
        before = self.size
        below = bisect.bisect_right(self.bases, offset) - 1  # the batch holding `offset` (or the last below)
        if below >= 0 and self.bases[below] + self.batches[below].count <= offset:
            below += 1
        if below > 0:
            self._drop_while(lambda _oldest: True, limit=below)
        self.log_start = max(self.log_start, offset)
        self.producers.txns.trim_before(self.log_start)
        return before - self.size

    # -- reading -------------------------------------------------------------------------------

    def out_of_range(self, offset: int) -> bool:
        """Kafka's OFFSET_OUT_OF_RANGE: before the log start or past the high watermark."""
        return offset < self.log_start or offset > self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.producers.txns.stable_offset(self.high_watermark, self.log_start)

    def read(self, offset: int, max_bytes: int, at_least_one: bool, end: int | None = None) -> list[ProducedBatch]:
        """Whole batches from the one holding `offset`, within `max_bytes`; with `at_least_one`
        the first batch comes even when it alone is larger (KIP-74), so a consumer always
        progresses; none from `end` on (read_committed: the last stable offset, a batch boundary).
        The caller checks the range first."""
        i = self._first_index(offset)
        out: list[ProducedBatch] = []
        used = 0
        for batch, base in zip(self.batches[i:], self.bases[i:]):
            if end is not None and base >= end:
                break
            if used + batch.size > max_bytes and not (at_least_one and not out):
                break
            out.append(batch)
            used += batch.size
        return out

    def _first_index(self, offset: int) -> int:
        """Index of the first batch holding an offset ≥ `offset`."""
        i = bisect.bisect_right(self.bases, offset) - 1
        if i < 0:
            return 0
        if self.bases[i] + self.batches[i].count <= offset:
            return i + 1
        return i

    def bytes_from(self, offset: int, limit: int, end: int | None = None) -> int:
        """Bytes a fetch at `offset` would get (below `end`: read_committed), counting up to `limit` (for
        min-bytes checks)."""
        i = self._first_index(offset)
        total = 0
        for batch, base in zip(self.batches[i:], self.bases[i:]):
            if end is not None and base >= end:
                break
            total += batch.size
            if total >= limit:
                break
        return total

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp ≥ `timestamp`, or None: the
        first batch whose max timestamp reaches it is searched record by record."""
        for batch in self.batches:
            if batch.max_timestamp >= timestamp:
                found = first_record_at_or_after(batch.data, timestamp, self.log_start)
                if found is not None:
                    return found
        return None

    def timestamp_at(self, offset: int) -> int | None:
        """The timestamp of the record at `offset`, or None when it is not in the log (before the
        log start: retention dropped it; at or past the high watermark: not produced yet). Reads
        the one batch holding it (decompressing it if it is compressed)."""
        if offset < self.log_start or offset >= self.high_watermark or not self.batches:
            return None
        return record_timestamp(self.batches[self._first_index(offset)].data, offset)

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        if not self.batches:
            return None
        best = max(self.batches, key=lambda b: b.max_timestamp)  # first of equals: earliest
        return record_with_max_timestamp(best.data)
