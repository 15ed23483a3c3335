"""Compaction of one partition's closed segments, as Kafka's log cleaner does for
`__consumer_offsets`: keep the latest record per key, drop tombstones older than
`log.cleaner.delete.retention.ms`. Offsets are kept (batches may have gaps), so consumers of the
log, like the analytics pipeline, still see each record at its original offset.

Each closed segment is rewritten on its own, oldest first: write `<segment>.cleaned`, fsync it,
rename it over the segment, fsync the directory. A crash at any moment leaves every segment
either old or cleaned (a leftover `.cleaned` file is deleted on load), and cleaning oldest first
means a dropped tombstone never uncovers an older value of its key. The active segment is never
touched, so appends carry on meanwhile.
"""

from __future__ import annotations

import dataclasses
import os

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from .files import fsync_dir
from .log import CLEANED_SUFFIX, CorruptLog, list_segments, scan


@dataclasses.dataclass(slots=True)
class CompactionResult:
    segments_cleaned: int = 0
    records_before: int = 0
    records_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    @property
    def reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after


def closed_bytes(directory: str) -> int:
    """Bytes in the segments compaction may rewrite (all but the active one)."""
    return sum(os.path.getsize(path) for _, path in list_segments(directory)[:-1])


def compact(directory: str, now_ms: int, delete_retention_ms: int, crash_after: int | None = None) -> CompactionResult:
    """Compact the closed segments of `directory`. `crash_after` (tests only) stops after that many
    segments have been written, before their rename, as a crash would."""
    segments = list_segments(directory)
    result = CompactionResult()
    if len(segments) < 2:
        return result
    latest: dict[bytes, int] = {}
    parsed = []
    for i, (_, path) in enumerate(segments):
        with open(path, "rb") as f:
            data = f.read()
        batches, _, problem = scan(data)
        if problem is not None and i < len(segments) - 1:
            raise CorruptLog(f"{path}: {problem}; not compacting")
        records = [(b.batch, list(b.batch)) for b in batches]  # a batch can be iterated only once
        for _, rs in records:
            for r in rs:
                latest[bytes(r.key)] = r.offset
        parsed.append((path, len(data), records))
    horizon = now_ms - delete_retention_ms
    for written, (path, size, batches) in enumerate(parsed[:-1]):
        kept, total, out = 0, 0, []
        for batch, records in batches:
            survivors = [r for r in records if latest[bytes(r.key)] == r.offset
                         and not (r.value is None and batch.max_timestamp < horizon)]
            total += len(records)
            kept += len(survivors)
            if survivors:
                out.append(_rebuild(batch.base_offset, survivors))
        result.records_before += total
        result.records_after += kept
        result.bytes_before += size
        if kept == total:
            result.bytes_after += size
            continue
        if crash_after is not None and written >= crash_after:
            _write(path + CLEANED_SUFFIX, b"".join(out))
            raise RuntimeError("injected crash before rename")
        data = b"".join(out)
        if data:
            _write(path + CLEANED_SUFFIX, data)
            os.replace(path + CLEANED_SUFFIX, path)
        else:
            os.remove(path)
        fsync_dir(directory)
        result.bytes_after += len(data)
        result.segments_cleaned += 1
    return result


def _rebuild(base_offset: int, records) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for r in records:
        builder.append(r.offset - base_offset, timestamp=r.timestamp, key=bytes(r.key),
                       value=None if r.value is None else bytes(r.value), headers=[])
    buf = builder.build()
    buf[0:8] = base_offset.to_bytes(8, "big", signed=True)
    return bytes(buf)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
