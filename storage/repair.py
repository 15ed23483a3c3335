"""`groupd log repair`: rewrite a partition without the bytes its load steps over (corrupt ranges,
a torn tail) and with offsets that only grow, after copying the original segments aside.

What the load serves is what the repaired partition holds: the same valid batches in the same
order (the order is the replay order). A batch whose base offset is not above the offsets before
it (two servers once wrote the directory) gets the next free offset; its records and their order
are unchanged (the base offset lies outside the CRC). Where records were lost, an empty batch
header keeps the segment's last offset, as compaction does, so segments still chain. Offsets
missing between segments (a segment file lost) cannot come back: the report names the gap.

The originals go to `<data dir>/repair-<UTC time>/__consumer_offsets-<p>/` (a data partition's to
`.../<topic>-<p>/`), which the server never reads. Each rewritten segment is written as `<name>.repaired`, fsynced, then renamed into place.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import time

from .compaction import empty_batch
from .files import fsync_dir
from .log import list_segments, partition_dir, segment_name
from .scanner import OffsetChain, scan_segments

REPAIRED_SUFFIX = ".repaired"
_OFFSET = struct.Struct(">q")


@dataclasses.dataclass(slots=True)
class RepairResult:
    partition: int | str  # an offsets partition's number, a data partition's `<topic>-<p>`
    backup: str | None = None     # where the original segments were copied (None: nothing to repair)
    dropped_bytes: int = 0        # corrupt or torn bytes left out
    renumbered: int = 0           # batches given a new base offset
    problems: list[str] = dataclasses.field(default_factory=list)  # what verify found before
    remaining: list[str] = dataclasses.field(default_factory=list)  # what verify finds after

    def describe(self) -> str:
        if self.backup is None:
            return f"partition {self.partition!s:>3}: nothing to repair" + "".join(
                f"\n    {x}" for x in self.remaining)
        return (f"partition {self.partition!s:>3}: repaired, {self.dropped_bytes} bad bytes dropped, "
                f"{self.renumbered} batches renumbered; originals in {self.backup}"
                + "".join(f"\n    was: {x}" for x in self.problems)
                + "".join(f"\n    still: {x}" for x in self.remaining))


def repair_partition(data_dir: str, partition: int | str, stamp: str | None = None) -> RepairResult:
    """Repair one partition of a data directory that no server is using (the caller holds its lock):
    an offsets partition by number, a data partition of the records plane by `<topic>-<p>`."""
    directory = partition_dir(data_dir, partition) if isinstance(partition, int) else \
        os.path.join(data_dir, partition)
    segments = list_segments(directory)
    result = RepairResult(partition)
    plan: list[_Segment] = []
    chain, expected, dirty = OffsetChain(), None, False
    for base, path, data, found, last in scan_segments(segments):
        problems = chain.add(base, path, found)
        bad = found.damage + ([found.tail] if found.tail else [])
        result.problems += [f"{os.path.basename(path)} byte {d.position}: {d.reason} ({d.size} bytes)" for d in bad]
        result.problems += [p for p in problems if "NON-INCREASING" in p]
        dirty = dirty or bool(bad) or any("NON-INCREASING" in p for p in problems)
        result.dropped_bytes += sum(d.size for d in bad)
        kept = []
        for b in found.batches:
            raw = data[b.position:b.position + b.size]
            if expected is not None and b.base_offset < expected:
                raw = bytearray(raw)
                _OFFSET.pack_into(raw, 0, expected)
                raw = bytes(raw)
                result.renumbered += 1
            kept.append(raw)
            expected = (b.next_offset if expected is None or b.base_offset >= expected
                        else expected + b.batch.last_offset_delta + 1)
        plan.append(_Segment(path, base, kept, lost=bool(bad)))
    if dirty:
        result.backup = _back_up(data_dir, partition, [p for _, p in segments], stamp)
        _rewrite(directory, plan)
    after = OffsetChain()
    for base, path, data, found, last in scan_segments(list_segments(directory)):
        result.remaining += after.add(base, path, found)
        result.remaining += [f"{os.path.basename(path)} byte {d.position}: {d.reason}" for d in found.corruption(last)]
    return result


@dataclasses.dataclass(slots=True)
class _Segment:
    path: str
    base: int          # the original's base offset
    kept: list[bytes]  # its valid batches, renumbered where needed
    lost: bool         # bytes of it were dropped


def _back_up(data_dir: str, partition: int | str, paths: list[str], stamp: str | None) -> str:
    stamp = stamp or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = os.path.basename(partition_dir(data_dir, partition)) if isinstance(partition, int) else partition
    backup, n = os.path.join(data_dir, f"repair-{stamp}", name), 1
    while os.path.exists(backup):  # a second repair within the same second
        n += 1
        backup = os.path.join(data_dir, f"repair-{stamp}-{n}", name)
    os.makedirs(backup)
    for path in paths:
        shutil.copy2(path, backup)
        with open(os.path.join(backup, os.path.basename(path)), "rb") as f:
            os.fsync(f.fileno())
    fsync_dir(backup)
    return backup


def _rewrite(directory: str, plan: list[_Segment]) -> None:
    """Write every segment anew, named by its first offset; a segment that lost its last records
    keeps its last offset in an empty batch header, so it still ends where the next one begins."""
    out: list[tuple[str, bytes]] = []
    end = None  # the offset the previous rewritten segment reached
    for i, seg in enumerate(plan):
        kept = seg.kept
        first = _OFFSET.unpack_from(kept[0], 0)[0] if kept else None
        name_at = seg.base if end is None or seg.base >= end else (first if first is not None else end)
        if first is not None and name_at > first:
            name_at = first
        if seg.lost and i + 1 < len(plan):
            next_base = plan[i + 1].base
            if (_reach(kept[-1]) if kept else name_at) < next_base:
                kept = kept + [empty_batch(next_base - 1)]
        if not kept and i + 1 < len(plan):
            continue
        out.append((segment_name(name_at), b"".join(kept)))
        end = _reach(kept[-1]) if kept else name_at
    new_names = {name for name, _ in out}
    for name, data in out:
        with open(os.path.join(directory, name + REPAIRED_SUFFIX), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    fsync_dir(directory)
    for seg in plan:
        if os.path.basename(seg.path) not in new_names:
            os.remove(seg.path)
    for name, _ in out:
        os.replace(os.path.join(directory, name + REPAIRED_SUFFIX), os.path.join(directory, name))
    fsync_dir(directory)


def _reach(batch: bytes) -> int:
    """The offset after a batch's last one (base offset + lastOffsetDelta + 1)."""
    return _OFFSET.unpack_from(batch, 0)[0] + struct.unpack_from(">i", batch, 23)[0] + 1
