"""Cluster mode's offsets partition on the shared data dir: every owner writes segments of its own,
stamped with the etcd revision of its claim (`<base offset>-<stamp>.log`), and the partition's
manifest in etcd (`Ownership.counted`) says which stamps count and up to which offset, so what a
deposed owner writes late is never loaded and no two owners write the same file.

A lone node's segments (no stamp) are stamp 0. `list_segments` (compaction, repair, inspect) sees
only those; cluster mode does not compact (README "Cluster mode").
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from .log import SEGMENT_SUFFIX, LoadResult, PartitionLog, records_of
from .scanner import scan_segments

log = logging.getLogger("groupd.storage")


@dataclass(frozen=True)
class Ownership:
    """This owner's `stamp` (the etcd revision of its claim) and `counted`, the manifest: the earlier
    owners' stamps in order, each with the offset its segments count up to (None: all that is on
    disk, for the one this claim deposed)."""
    stamp: int
    counted: tuple[tuple[int, int | None], ...] = ()


def stamped_segments(directory: str) -> dict[int, list[tuple[int, str]]]:
    """stamp → (base offset, path) of its segments, oldest first."""
    out: dict[int, list[tuple[int, str]]] = {}
    if not os.path.isdir(directory):
        return out
    for name in os.listdir(directory):
        base, _, stamp = name[:-len(SEGMENT_SUFFIX)].partition("-")
        if name.endswith(SEGMENT_SUFFIX) and base.isdigit() and (stamp.isdigit() or not stamp):
            out.setdefault(int(stamp or 0), []).append((int(base), os.path.join(directory, name)))
    return {stamp: sorted(segments) for stamp, segments in out.items()}


class OwnedPartitionLog(PartitionLog):
    """A partition as one owner holds it: it loads the manifest's segments, reading but never
    changing them (other owners' files: a torn tail is where their valid batches end, not truncated),
    then appends to segments of its own stamp only, starting at the next offset."""

    def __init__(self, data_dir: str, partition: int, segment_bytes: int, ownership: Ownership) -> None:
        super().__init__(data_dir, partition, segment_bytes)
        self.ownership = ownership
        self.stamp = ownership.stamp

    def load(self, apply) -> LoadResult:
        os.makedirs(self.directory, exist_ok=True)
        result = LoadResult()
        stamped = stamped_segments(self.directory)
        for stamp, end in self.ownership.counted:
            for _, _, _, found, last in scan_segments(stamped.get(stamp, [])):
                for b in found.batches:
                    counted = [(offset, record) for offset, record, _ in records_of(b.batch)
                               if end is None or offset < end]
                    for _, record in counted:
                        if record is not None:
                            apply(record)
                    if counted:
                        result.records += len(counted)
                        result.skipped += sum(record is None for _, record in counted)
                        result.next_offset = max(result.next_offset, counted[-1][0] + 1)
                        result.bytes += b.size
                for damage in found.corruption(last):
                    result.damage.append(damage)
                    log.error("partition %d: corrupt log bytes skipped (stamp %d): %s", self.partition, stamp,
                              damage.describe())
        self.next_offset = result.next_offset
        self._roll(self.next_offset)
        return result
