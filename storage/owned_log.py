"""Cluster mode's offsets partition on the shared data dir: every owner writes segments of its own,
stamped with the etcd revision of its claim (`<base offset>-<stamp>.log`), and the partition's
manifest in etcd (`Ownership.counted`) says which stamps count and up to which offset, so what a
deposed owner writes late is never loaded and no two owners write the same file.

A manifest entry counts its stamp's records from the previous entry's end up to its own, so a
compaction (storage/owned_compaction.py) replaces a prefix of the manifest with one entry of its own
stamp. A lone node's segments (no stamp) are stamp 0; `list_segments` (lone-node compaction, repair)
sees only those.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from .files import remove_files
from .log import SEGMENT_SUFFIX, LoadResult, PartitionLog, records_of
from .scanner import scan_segments

log = logging.getLogger("groupd.storage")


@dataclass(frozen=True)
class Ownership:
    """This owner's `stamp` (the etcd revision of its claim) and `counted`, the manifest: the earlier
    owners' (and compactions') stamps in order, each with the offset its segments count up to (None:
    all that is on disk, for the one this claim deposed)."""
    stamp: int
    counted: tuple[tuple[int, int | None], ...] = ()

    def ranges(self) -> list[tuple[int, int, int | None]]:
        """(stamp, lo, hi) per entry: its records in [lo, hi) count (hi None: no bound)."""
        out, lo = [], 0
        for stamp, end in self.counted:
            out.append((stamp, lo, end))
            lo = lo if end is None else end
        return out


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


def counted_segments(directory: str, counted: tuple[tuple[int, int | None], ...],
                     stamped: dict[int, list[tuple[int, str]]] | None = None
                     ) -> list[tuple[int, int | None, list[tuple[int, str]]]]:
    """(lo, hi, segments) per entry of the manifest `counted`: the segments (base, path) of its
    stamp that hold records it counts, those in [lo, hi) (hi None: no bound). A segment wholly
    before lo (a compaction's input) or from hi on (a deposed owner's late writes) is left out."""
    stamped = stamped_segments(directory) if stamped is None else stamped
    out = []
    for stamp, lo, hi in Ownership(0, counted).ranges():
        segments = stamped.get(stamp, [])
        out.append((lo, hi, [(base, path) for i, (base, path) in enumerate(segments)
                             if not (i + 1 < len(segments) and segments[i + 1][0] <= lo)
                             and (hi is None or base < hi)]))
    return out


def unlisted_segments(directory: str, counted: tuple[tuple[int, int | None], ...], below: int) -> list[str]:
    """Segments of stamps under `below` that the manifest `counted` does not count: `below` is a
    claim's or a compaction's etcd revision, `counted` the manifest as of then, while the claim held.
    No later manifest counts them (a stamp under `below` that is not listed can no longer be added,
    and an entry's start only moves on); a later stamp (a newer claim's segments, a compaction under
    way) is never among them."""
    stamped = stamped_segments(directory)
    keep = {path for _, _, segments in counted_segments(directory, counted, stamped) for _, path in segments}
    return [path for stamp, segments in stamped.items() if stamp < below for _, path in segments if path not in keep]


class OwnedPartitionLog(PartitionLog):
    """A partition as one owner holds it: it loads the manifest's segments, reading but never
    changing them (other owners' files: a torn tail is where their valid batches end, not truncated),
    then appends to segments of its own stamp only, starting at the next offset."""

    def __init__(self, data_dir: str, partition: int, segment_bytes: int, ownership: Ownership) -> None:
        super().__init__(data_dir, partition, segment_bytes)
        self.ownership = ownership
        self.stamp = ownership.stamp

    def load(self, apply) -> LoadResult:
        """Replay the records the manifest counts; first delete the segments no manifest will count
        again (`unlisted_segments`: a crashed compaction's output, its inputs once replaced)."""
        os.makedirs(self.directory, exist_ok=True)
        unlisted = unlisted_segments(self.directory, self.ownership.counted, self.stamp)
        if unlisted:
            remove_files(unlisted)
            log.info("partition %d: removed %d segments the manifest no longer counts: %s", self.partition,
                     len(unlisted), " ".join(sorted(map(os.path.basename, unlisted))))
        result = LoadResult()
        for lo, hi, segments in counted_segments(self.directory, self.ownership.counted):
            for _, path, _, found, last in scan_segments(segments):
                for b in found.batches:
                    counted = [(offset, record) for offset, record, _ in records_of(b.batch)
                               if lo <= offset and (hi is None or offset < hi)]
                    for _, record in counted:
                        if record is not None:
                            apply(record)
                    if counted:
                        result.records += len(counted)
                        result.skipped += sum(record is None for _, record in counted)
                        result.next_offset = max(result.next_offset, counted[-1][0] + 1)
                        result.bytes += b.size
                    elif lo <= b.base_offset and (hi is None or b.batch.next_offset <= hi):
                        result.next_offset = max(result.next_offset, b.batch.next_offset)  # an empty batch header
                for damage in found.corruption(last):
                    result.damage.append(damage)
                    log.error("partition %d: corrupt log bytes skipped (%s): %s", self.partition,
                              os.path.basename(path), damage.describe())
        # offsets under an entry's end are taken even when compaction removed their records
        result.next_offset = max([result.next_offset] + [end for _, end in self.ownership.counted if end is not None])
        self.next_offset = result.next_offset
        self._roll(self.next_offset)
        return result
