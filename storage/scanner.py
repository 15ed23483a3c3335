"""The one reader of segment bytes: walks Kafka v2 record batches, checks each CRC, steps over
corrupt bytes to the next batch that checks out, and holds the torn-tail rule. The server's
load, `groupd log dump/verify/repair` and the analytics source all read segments through here.

We keep one copy of the log (no replica refills a hole), so a bad batch never costs the valid
batches after it: the scan resynchronises on the next position whose header (magic 2, a length
that fits, a base offset not below the offsets already read) and CRC check out, and reports the
bytes it stepped over. Bad bytes with no valid batch after them are the *tail*: in the last
segment of a partition that is a write cut short by a crash (torn), to be truncated; in a closed
segment, which was fsynced whole before the next one began, it is corruption.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from .aiokafka_record_code import DefaultRecordBatch
from .batch_crc import crc_ok

BATCH_HEADER = 61  # v2 batch header size, up to and including the record count
LOG_OVERHEAD = 12  # base offset + batch length: the bytes that the batch length does not count
_MAGIC_AT = 16
_HEAD = struct.Struct(">qi")  # base offset, batch length
_COUNT = struct.Struct(">i")   # bytes 57..61: the record count (compacted batches have offset gaps)


@dataclass(slots=True)
class Batch:
    position: int  # byte offset in the segment file
    size: int
    batch: DefaultRecordBatch

    @property
    def base_offset(self) -> int:
        return self.batch.base_offset

    @property
    def next_offset(self) -> int:
        return self.batch.next_offset


@dataclass(slots=True)
class Damage:
    """Bytes of a segment that hold no valid batch."""
    position: int
    size: int
    reason: str            # why the batch at `position` was refused
    batches: int | None    # batch frames in the range, when their length fields chain to its end
    path: str = ""

    def describe(self) -> str:
        frames = "unknown number of" if self.batches is None else str(self.batches)
        return (f"{self.path}: {self.size} bytes at byte {self.position} skipped "
                f"({frames} batches; {self.reason})")


@dataclass(slots=True)
class Scan:
    """What one segment holds: its valid batches in file order, the corrupt ranges stepped over
    (each followed by a valid batch), and the tail (bad bytes up to the end, or None)."""
    batches: list[Batch] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    tail: Damage | None = None
    size: int = 0

    def torn_tail(self, last: bool) -> Damage | None:
        """The bytes to truncate: a tail, in the last segment only (a crash mid-write)."""
        return self.tail if last else None

    def corruption(self, last: bool) -> list[Damage]:
        """The bad ranges that no crash explains: every skipped range, and a closed segment's tail."""
        return self.damage + ([self.tail] if self.tail is not None and not last else [])


def _check(data: bytes, pos: int) -> tuple[DefaultRecordBatch | None, int, str | None]:
    """(batch, size, None) for a valid batch at `pos`, else (None, 0, why not)."""
    remaining = len(data) - pos
    if remaining < BATCH_HEADER:
        return None, 0, f"{remaining} trailing bytes are shorter than a batch header"
    _, length = _HEAD.unpack_from(data, pos)
    size = LOG_OVERHEAD + length
    if length < BATCH_HEADER - LOG_OVERHEAD:
        return None, 0, f"batch length {length} is shorter than a batch header"
    if size > remaining:
        return None, 0, f"batch length {length} runs past the end of the file"
    magic = data[pos + _MAGIC_AT]
    if magic != 2:
        return None, 0, f"magic {magic}"
    if not crc_ok(memoryview(data)[pos:pos + size]):
        return None, 0, "CRC mismatch"
    batch = DefaultRecordBatch(data[pos:pos + size])
    return batch, size, None


def _resync(data: bytes, bad: int, next_offset: int) -> int | None:
    """The first position after `bad` where a valid batch starts whose base offset is not below
    `next_offset` (a stale or random match must not move offsets backwards), or None."""
    find, n = data.find, len(data)
    at = find(b"\x02", bad + 1 + _MAGIC_AT)
    while at >= 0:
        pos = at - _MAGIC_AT
        if n - pos >= BATCH_HEADER:
            base, length = _HEAD.unpack_from(data, pos)
            if base >= next_offset and BATCH_HEADER - LOG_OVERHEAD <= length <= n - pos - LOG_OVERHEAD \
                    and _check(data, pos)[2] is None:
                return pos
        else:
            return None
        at = find(b"\x02", at + 1)
    return None


def _frames(data: bytes, start: int, end: int) -> int | None:
    """How many batch frames fill [start, end) by their length fields, or None if they do not chain."""
    count, pos = 0, start
    while pos + LOG_OVERHEAD <= end:
        _, length = _HEAD.unpack_from(data, pos)
        if length < BATCH_HEADER - LOG_OVERHEAD:
            return None
        pos += LOG_OVERHEAD + length
        count += 1
    return count if pos == end else None


def scan(data: bytes, next_offset: int = 0, path: str = "") -> Scan:
    """Every valid batch of a segment's bytes. `next_offset` is the offset the partition's
    earlier segments reached (resynchronising never lands on a batch below it)."""
    out = Scan(size=len(data))
    batches, pos, n = out.batches, 0, len(data)
    while pos < n:
        batch, size, problem = _check(data, pos)
        if batch is not None:
            batches.append(Batch(pos, size, batch))
            next_offset = max(next_offset, batch.next_offset)
            pos += size
            continue
        resume = _resync(data, pos, next_offset)
        if resume is None:
            out.tail = Damage(pos, n - pos, problem, _frames(data, pos, n), path)
            break
        out.damage.append(Damage(pos, resume - pos, problem, _frames(data, pos, resume), path))
        pos = resume
    return out


def record_count(data: bytes, batch: Batch) -> int:
    """The record count in a batch's header."""
    return _COUNT.unpack_from(data, batch.position + BATCH_HEADER - 4)[0]


def scan_segments(segments: list[tuple[int, str]]) -> Iterator[tuple[int, str, bytes, Scan, bool]]:
    """(base offset, path, bytes, scan, is the last segment) per segment of a partition, oldest
    first; each scan resynchronises only onto offsets above what the earlier segments hold."""
    next_offset = 0
    for i, (base, path) in enumerate(segments):
        with open(path, "rb") as f:
            data = f.read()
        found = scan(data, next_offset, path)
        if found.batches:
            next_offset = max(next_offset, max(b.batch.next_offset for b in found.batches))
        yield base, path, data, found, i == len(segments) - 1


class OffsetChain:
    """Checks, segment by segment, what breaks the chain of offsets: a batch whose base offset is
    not above every offset before it, a segment named below the offsets before it, and a gap
    between a segment's last offset and the next one's base (a segment missing: segments always
    chain, compacted ones included)."""

    def __init__(self) -> None:
        self.expected: int | None = None  # the offset the next batch may start at
        self._previous: str | None = None  # the previous segment, when it read cleanly to its end

    def add(self, base: int, path: str, found: Scan) -> list[str]:
        problems, name, expected = [], os.path.basename(path), self.expected
        if expected is not None:
            if base < expected:
                problems.append(f"{name}: segment base offset {base} is not above offset {expected - 1} before it "
                                "[NON-INCREASING offsets]")
            elif base > expected and self._previous is not None:
                problems.append(f"{self._previous} -> {name}: offsets {expected}..{base - 1} are in neither "
                                "[MISSING segment]")
        expected = base if expected is None else max(expected, base)
        for b in found.batches:
            if b.base_offset < expected:
                problems.append(f"{name} byte {b.position}: batch base offset {b.base_offset} is not above "
                                f"offset {expected - 1} before it [NON-INCREASING offsets]")
            expected = max(expected, b.next_offset)
        self.expected = expected
        # a damaged segment's last offsets may be in the bytes that were skipped: no gap check after it
        self._previous = name if found.tail is None and not found.damage and found.batches else None
        return problems
