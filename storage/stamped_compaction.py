"""Compaction of a cluster-mode `__transaction_state` partition (storage/transaction_log.py
`StampedTransactionLog`) by its owner: the lone node's cleaner (storage/compaction.py) over the
records the stamp rule counts, each segment rewritten in place under its own name.

A stamp's segments count below the first offset of any later stamp, so names are what say which
records count: keeping every segment's name keeps that rule as it was, and a segment's records past
its stamp's bound (a deposed owner's late writes, which no load reads) are dropped when it is
rewritten. The owner's active segment is never touched; earlier owners' segments are rewritten
only to what already counted. As in the lone node's cleaner, a rewrite is `<segment>.cleaned-<owner
stamp>`, fsynced, renamed over the segment, oldest first, so a crash leaves each segment old or
cleaned and a dropped tombstone never uncovers an older value; a load reading meanwhile (the
partition moved) sees either version of each, which replay to the same state. The temporary name
carries the owner's stamp because a deposed owner's compaction may still run beside its successor's.
"""

from __future__ import annotations

import os

from .compaction import CompactionResult, clean, latest_offsets, write_synced
from .files import fsync_dir
from .log import SEGMENT_SUFFIX
from .owned_log import stamped_segments
from .scanner import scan

END = 1 << 62


def counted_inputs(directory: str, stamp: int, active_base: int) -> list[tuple[int, str, int, bool]]:
    """(base, path, bound, last of its stamp) of the segments owner `stamp` compacts, oldest first:
    those of its stamp and earlier ones that hold records counted below `bound` (the first offset
    of any later stamp; for its own stamp also its active segment's base)."""
    chains = sorted(stamped_segments(directory).items())
    out = []
    for i, (s, segments) in enumerate(chains):
        if s > stamp:
            break
        bound = min([segs[0][0] for _, segs in chains[i + 1:]], default=END)
        if s == stamp:
            bound = min(bound, active_base)
        out.extend((base, path, bound, j == len(segments) - 1) for j, (base, path) in enumerate(segments)
                   if base < bound)
    return sorted(out)


def compact_stamped(directory: str, stamp: int, active_base: int, now_ms: int,
                    delete_retention_ms: int) -> CompactionResult:
    """Compact what owner `stamp` counts below its active segment (`counted_inputs`)."""
    suffix = f".cleaned-{stamp}"
    for name in os.listdir(directory):
        # a rewrite cut short by a crash, this owner's or an earlier one's (a later owner always has a higher
        # stamp; a deposed owner still rewriting loses its file, and its rename fails and is logged)
        left = name.rpartition(SEGMENT_SUFFIX + ".cleaned-")[2]
        if left != name and left.isdigit() and int(left) <= stamp:
            os.remove(os.path.join(directory, name))
    inputs = counted_inputs(directory, stamp, active_base)
    result = CompactionResult()
    # the lone node's cleaner steps around a corrupt segment; here nothing is rewritten while one
    # is (what it holds may be the value a dropped record would uncover): `groupd log repair` first
    result.segments_corrupt = sum(_read(path, last)[2] for _, path, _, last in inputs)
    if result.segments_corrupt:
        return result
    latest = latest_offsets(((path, 0, bound) for _, path, bound, _ in inputs), transactional=False)
    horizon = now_ms - delete_retention_ms
    for _, path, bound, last in inputs:  # one segment in memory at a time
        data, batches, _ = _read(path, last)
        out, total, kept = clean(data, batches, latest, horizon, 0, bound)
        cleaned = b"".join(out)
        result.records_before += total
        result.records_after += kept
        result.bytes_before += len(data)
        if kept == total and cleaned == data:
            result.bytes_after += len(data)
            continue
        write_synced(path + suffix, cleaned)
        os.replace(path + suffix, path)
        fsync_dir(directory)
        result.bytes_after += len(cleaned)
        result.segments_cleaned += 1
    return result


def _read(path: str, last: bool):
    """(data, valid batches, whether it holds bytes no crash explains): a torn tail is only the
    last segment of its stamp's (its owner died mid-write), which the rewrite leaves out."""
    with open(path, "rb") as f:
        data = f.read()
    found = scan(data, path=path)
    return data, found.batches, bool(found.corruption(last))
