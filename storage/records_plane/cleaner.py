"""Compaction of a data partition's closed segments (`cleanup.policy=compact`), as Kafka 4.x's log
cleaner does: the latest record per key survives, offsets are kept (batches become sparse), a
record without a key goes, and a tombstone (null value) stays until its batch's delete horizon.

The offsets log's cleaner (storage/compaction.py) lends its pieces: the key map (`latest_offsets`),
the segment read, the synced write and the rename discipline — each closed segment, oldest first,
is written to `<segment>.cleaned`, fsynced, renamed over the segment and the directory fsynced, so a
crash at any moment leaves every segment old or cleaned (the load deletes a leftover `.cleaned`).
What data batches need beyond it is here:
- a rebuilt batch keeps what the producer's state is rebuilt from on load (producer id, epoch,
  base sequence, the original last offset: Kafka's `overrideLastOffset`), its leader epoch,
  timestamp type and record headers (it is written uncompressed);
- the delete horizon (KIP-534): the first clean that keeps a tombstone stamps its batch with
  `now + delete.retention.ms` (attribute bit 6, the base timestamp holding the horizon); a later
  clean past that time drops the tombstone;
- an aborted transaction's batches (Kafka's cleaner: `AbortedTransactionMetadata`) count for no key and
  lose their records; control batches (markers) stay as they are, and the plane never hands the
  cleaner a segment at or past the first unstable offset, so read_committed readers see the same;
- a batch whose records all go is dropped, except a segment's last (its last offset keeps the
  segments chained) and a producer's last batch (its sequence survives a restart), which stay as
  empty batches (Kafka's RETAIN_EMPTY).
Blocking file work, run in the cleaner's process (coordinator/runtime/records_disk.py).
"""

from __future__ import annotations

import dataclasses
import os
import struct

from ..batch_crc import set_crc
from ..compaction import CompactionResult, latest_offsets, read_closed, write_synced
from ..files import fsync_dir
from ..log import CLEANED_SUFFIX
from ..wire import varint
from .segments import SegmentIndex

DELETE_HORIZON_FLAG = 0x40  # batch attribute bit 6 (KIP-534): the base timestamp is the delete horizon
_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_CONTROL = 0x20
# base offset, length, leader epoch, magic, crc, attributes, last offset delta, base and max
# timestamps, producer id, epoch, base sequence, record count: Kafka's v2 batch header
_HEADER = struct.Struct(">qiibIhiqqqhii")
_ATTRIBUTES = struct.Struct(">h")
_LEADER_EPOCH = struct.Struct(">i")
_BASE_TIMESTAMP = struct.Struct(">q")


@dataclasses.dataclass(slots=True)
class DataCompactionResult(CompactionResult):
    # the index of every segment rewritten, by path (the loop swaps them in)
    indexes: dict[str, SegmentIndex] = dataclasses.field(default_factory=dict)
    horizon: int | None = None  # the earliest delete horizon of a tombstone kept: clean again then
    producers_kept: int = 0  # empty batches kept for a producer's sequence


def compact_segments(directory: str, paths: list[str], now_ms: int, delete_retention_ms: int,
                     crash_after: int | None = None, older_kept: bool = False,
                     aborted: list[tuple[int, int, int]] = ()) -> DataCompactionResult:
    """Compact the closed segments `paths` (oldest first; never the active segment). `older_kept`:
    segments before them are not in this clean (a cluster leader cleans only its own stamp's), so no
    tombstone may go — it may hide an older value there. `aborted`: the partition's aborted
    transactions, (marker offset, producer id, first offset). `crash_after` (tests only) stops as a crash
    would, after that many rewrites, leaving the next one's `.cleaned` file before its rename."""
    result = DataCompactionResult()
    producers: dict[int, int] = {}  # producer id -> the last offset of its last batch
    is_aborted = _aborted_batches(aborted)
    latest = latest_offsets(((path, 0, None) for path in paths), producers, is_aborted)
    keep_tombstones = older_kept  # or past a corrupt segment, whose tombstones may hide an older value
    for path in paths:
        data, batches, corrupt = read_closed(path)
        if corrupt:
            result.segments_corrupt += 1
            keep_tombstones = True
            continue
        out, total, kept = clean_batches(data, batches, latest, producers, now_ms, delete_retention_ms,
                                         keep_tombstones, result, is_aborted)
        size = len(data)
        result.records_before += total
        result.records_after += kept
        result.bytes_before += size
        if len(out) == len(batches) and all(isinstance(o, memoryview) for o in out):
            result.bytes_after += size  # nothing to change: left as it is
            continue
        cleaned = b"".join(out)
        if crash_after is not None and result.segments_cleaned >= crash_after:
            write_synced(path + CLEANED_SUFFIX, cleaned)
            raise RuntimeError("injected crash before rename")
        write_synced(path + CLEANED_SUFFIX, cleaned)
        inode = os.stat(path + CLEANED_SUFFIX).st_ino
        os.replace(path + CLEANED_SUFFIX, path)
        fsync_dir(directory)
        result.indexes[path] = index_of(cleaned, inode)
        result.bytes_after += len(cleaned)
        result.segments_cleaned += 1
    return result


def _aborted_batches(aborted: list[tuple[int, int, int]]):
    """Whether a batch belongs to one of the `aborted` transactions (its producer's, between the
    transaction's first offset and its ABORT marker)."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for last, pid, first in aborted:
        ranges.setdefault(pid, []).append((first, last))

    def check(batch) -> bool:
        return bool(batch.is_transactional) and not batch.is_control_batch and any(
            first <= batch.base_offset <= last for first, last in ranges.get(batch.producer_id, ()))

    return check


def clean_batches(data: bytes, batches, latest: dict[bytes, int], producers: dict[int, int], now_ms: int,
                  delete_retention_ms: int, keep_tombstones: bool, result: DataCompactionResult,
                  is_aborted=lambda _batch: False):
    """One segment's surviving batches, as (list of bytes — a memoryview where a batch is copied as
    it was —, records, records kept)."""
    out: list = []
    total = kept = 0
    last = len(batches) - 1
    for i, b in enumerate(batches):
        batch = b.batch
        raw = memoryview(data)[b.position:b.position + b.size]
        (attributes,) = _ATTRIBUTES.unpack_from(raw, 21)
        try:
            records = [] if attributes & _CONTROL else list(batch)
        except Exception:  # noqa: BLE001 -- a codec this process lacks: the batch stays as it was
            records = None
        if not records:
            if records is None or attributes & _CONTROL or i == last:
                out.append(raw)
            continue
        horizon = _BASE_TIMESTAMP.unpack_from(raw, 27)[0] if attributes & DELETE_HORIZON_FLAG else None
        past = horizon is not None and now_ms >= horizon
        expired = past and not keep_tombstones
        survivors = [] if is_aborted(batch) else [
            r for r in records if r.key is not None and latest.get(bytes(r.key)) == r.offset
            and (r.value is not None or not expired)]
        total += len(records)
        kept += len(survivors)
        tombstones = any(r.value is None for r in survivors)
        if tombstones and horizon is None:
            horizon = now_ms + delete_retention_ms  # first cleaned: the tombstones' time starts now
        if tombstones and not past:  # (past yet kept: behind a corrupt segment, not due again)
            result.horizon = horizon if result.horizon is None else min(result.horizon, horizon)
        if len(survivors) == len(records) and (not tombstones or attributes & DELETE_HORIZON_FLAG):
            out.append(raw)  # unchanged: the batch as it was
        elif survivors:
            out.append(build_batch(raw, batch, survivors, horizon if tombstones else None))
        elif i == last or (batch.producer_id >= 0 and producers.get(batch.producer_id) == batch.next_offset - 1):
            if i != last:
                result.producers_kept += 1
            out.append(build_batch(raw, batch, [], None))
    return out, total, kept


def build_batch(raw, batch, records, delete_horizon: int | None) -> bytes:
    """A v2 batch of `records` (read from `batch`, stored as `raw`) at the batch's base offset,
    keeping its last offset, producer, leader epoch and timestamp type; uncompressed; stamped with
    `delete_horizon` when given. No records: Kafka's empty batch header."""
    (attributes,) = _ATTRIBUTES.unpack_from(raw, 21)
    attributes &= ~(_COMPRESSION_MASK | DELETE_HORIZON_FLAG)
    base = batch.base_offset
    if not records:
        first = maximum = batch.max_timestamp
    else:
        stamps = [r.timestamp for r in records]
        maximum = batch.max_timestamp if attributes & _LOG_APPEND_TIME else max(stamps)
        first = stamps[0]
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_FLAG
        first = delete_horizon
    body = bytearray()
    for r in records:
        body += _record(r, r.timestamp - first, r.offset - base)
    (epoch,) = _LEADER_EPOCH.unpack_from(raw, 12)
    head = bytearray(_HEADER.pack(base, _HEADER.size - 12 + len(body), epoch, 2, 0, attributes,
                                  batch.last_offset_delta, first, maximum, batch.producer_id,
                                  batch.producer_epoch, batch.base_sequence, len(records)))
    whole = head + body
    set_crc(whole)
    return bytes(whole)


def _record(r, timestamp_delta: int, offset_delta: int) -> bytes:
    key = None if r.key is None else bytes(r.key)
    value = None if r.value is None else bytes(r.value)
    body = bytearray(b"\x00")
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    _bytes(body, key)
    _bytes(body, value)
    headers = r.headers or []
    body += varint(len(headers))
    for name, header_value in headers:
        _bytes(body, name.encode() if isinstance(name, str) else bytes(name))
        _bytes(body, None if header_value is None else bytes(header_value))
    return bytes(varint(len(body)) + body)


def _bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += varint(-1)
    else:
        out += varint(len(value))
        out += value




def index_of(segment: bytes, inode: int) -> SegmentIndex:
    """The sparse index of a rewritten segment (what `DataLog.load_batches` would build)."""
    index = SegmentIndex(inode=inode)
    position, n = 0, len(segment)
    while position + _HEADER.size <= n:
        base, length = struct.unpack_from(">qi", segment, position)
        index.add(base, position, struct.unpack_from(">q", segment, position + 35)[0])
        position += 12 + length
    return index
