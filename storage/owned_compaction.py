"""Compaction of a cluster-mode partition (storage/owned_log.py) by its current owner: the records
the manifest counts below the owner's active segment are rewritten, with the semantics of
storage/compaction.py, into new segments of a fresh stamp (an etcd revision taken while the claim
held); nothing existing is changed. The switch is the manifest's compare-and-swap (coordinator/
etcd_cluster.py): `[[stamp, end], [owner, None]]`, which holds only while the claim does. Until it
succeeds the new files count for nobody (the next load by an owner removes them); after it, the
old ones count for nobody and go (`unlisted_segments`).
"""

from __future__ import annotations

import dataclasses
import os

from .compaction import CompactionResult, clean, latest_offsets, read_closed, write_synced
from .files import fsync_dir, remove_files
from .log import segment_name
from .owned_log import counted_segments


@dataclasses.dataclass(slots=True)
class OwnedCompaction(CompactionResult):
    end: int = 0  # the new stamp's entry counts offsets below this (the owner's active segment's base)
    written: list[str] = dataclasses.field(default_factory=list)  # the new stamp's segments


def counted_closed(directory: str, counted, active_base: int) -> list[tuple[int, str, int, int]]:
    """(base, path, lo, hi) of the segments a compaction reads: what the manifest `counted` counts
    below `active_base` (the owner's active segment, which may hold records not durable yet)."""
    out = []
    for lo, hi, segments in counted_segments(directory, counted):
        hi = active_base if hi is None else min(hi, active_base)
        out.extend((base, path, lo, hi) for base, path in segments if base < hi and lo < hi)
    return out


def closed_counted_bytes(directory: str, counted, active_base: int) -> int:
    """Bytes in the segments a compaction would read (the dirty ratio's whole)."""
    return sum(os.path.getsize(path) for _, path, _, _ in counted_closed(directory, counted, active_base))


def compact_owned(directory: str, counted, active_base: int, stamp: int, now_ms: int,
                  delete_retention_ms: int) -> OwnedCompaction:
    """Write the compacted records that `counted` counts below `active_base` as segments of `stamp`,
    one per segment read, under its name (fsynced, then the directory); returns what it wrote. A
    segment holding corrupt bytes stops it before anything is written (`groupd log repair` first)."""
    inputs = counted_closed(directory, counted, active_base)
    result = OwnedCompaction(end=active_base)
    result.segments_corrupt = sum(read_closed(path)[2] for _, path, _, _ in inputs)
    if result.segments_corrupt:
        return result
    latest = latest_offsets(((path, lo, hi) for _, path, lo, hi in inputs), transactional=False)
    horizon = now_ms - delete_retention_ms
    try:
        for base, path, lo, hi in inputs:
            data, batches, _ = read_closed(path)
            out, total, kept = clean(data, batches, latest, horizon, lo, hi)
            result.records_before += total
            result.records_after += kept
            result.bytes_before += len(data)
            del data
            if not out:
                continue  # nothing it holds counts
            # named where its counted offsets begin, as the segment it replaces: the segments chain
            written = os.path.join(directory, segment_name(max(base, lo), stamp))
            result.written.append(written)
            write_synced(written, b"".join(out))
            result.bytes_after += os.path.getsize(written)
            result.segments_cleaned += 1
        fsync_dir(directory)
    except BaseException:
        remove_files(result.written)
        raise
    return result
