"""Compaction of one partition's closed segments, as Kafka's log cleaner does for
`__consumer_offsets`: keep the latest record per key, drop tombstones older than
`log.cleaner.delete.retention.ms`. Offsets are kept (batches may have gaps), so consumers of the
log, like the analytics pipeline, still see each record at its original offset.

Each closed segment is rewritten on its own, oldest first: write `<segment>.cleaned`, fsync it,
rename it over the segment, fsync the directory. A crash at any moment leaves every segment
either old or cleaned (a leftover `.cleaned` file is deleted on load), and cleaning oldest first
means a dropped tombstone never uncovers an older value of its key. The active segment is never
touched, so appends carry on meanwhile. A segment keeps its last offset (an empty batch header
when its last records go, as Kafka's cleaner does), so segments always chain: each ends where the
next one begins, and a gap means a segment is missing (`groupd log verify`). A segment holding
corrupt bytes is left as it is for `groupd log repair`, and the others are compacted around it.
"""

from __future__ import annotations

import dataclasses
import os
import signal

from .aiokafka_record_code import DefaultRecordBatchBuilder
from .files import fsync_dir
from .log import CLEANED_SUFFIX, list_segments
from .scanner import scan


@dataclasses.dataclass(slots=True)
class CompactionResult:
    segments_cleaned: int = 0
    records_before: int = 0
    records_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    segments_corrupt: int = 0  # closed segments holding corrupt bytes: not rewritten (`groupd log repair`)

    @property
    def reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Run in a compaction process as it starts: it gets SIGKILL when the server dies (Linux), so a
    `kill -9` of the server never leaves a cleaner at work beside the next server's. Killed
    mid-rewrite it leaves a `.cleaned` file, which the next load deletes. (A worker process asks for
    SIGTERM: it drains as a server does when its supervisor dies.)"""
    import ctypes  # here: only compaction and worker processes call this (a server's start-up skips ctypes)

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the process outlives a killed server
        pass
    if os.getppid() == 1:  # the server died before the call above took effect
        os._exit(1)


def closed_bytes(directory: str) -> int:
    """Bytes in the segments compaction may rewrite (all but the active one)."""
    return sum(os.path.getsize(path) for _, path in list_segments(directory)[:-1])


def compact(directory: str, now_ms: int, delete_retention_ms: int, crash_after: int | None = None) -> CompactionResult:
    """Compact the closed segments of `directory`. `crash_after` (tests only) stops after that many
    segments have been rewritten, leaving the next one's `.cleaned` file before its rename, as a
    crash would.

    Two passes, as Kafka's cleaner makes: the first maps every key to its latest offset, the second
    rewrites one segment at a time, one batch at a time, so memory holds the key map and one
    segment, not the partition. The map is built from the closed segments only, since Kafka's
    cleaner stops at the active segment too: its tail may not be durable yet (interval mode, or an
    fsync in flight), so a newer value there must not cost a key its older, durable one."""
    segments = list_segments(directory)
    result = CompactionResult()
    if len(segments) < 2:
        return result
    closed = [path for _, path in segments[:-1]]
    latest = latest_offsets(((path, 0, None) for path in closed), transactional=False)
    horizon = now_ms - delete_retention_ms
    for path in closed:
        data, batches, corrupt = read_closed(path)
        if corrupt:
            # left as it is, bad bytes included, for `groupd log repair` (which keeps a copy); the
            # tombstones after it stay, since dropping one could uncover an older value kept here
            result.segments_corrupt += 1
            horizon = None
            continue
        out, total, kept = clean(data, batches, latest, horizon, 0, None)
        size = len(data)
        del data, batches
        result.records_before += total
        result.records_after += kept
        result.bytes_before += size
        if kept == total:
            result.bytes_after += size
            continue
        cleaned = b"".join(out)
        if crash_after is not None and result.segments_cleaned >= crash_after:
            write_synced(path + CLEANED_SUFFIX, cleaned)
            raise RuntimeError("injected crash before rename")
        write_synced(path + CLEANED_SUFFIX, cleaned)
        os.replace(path + CLEANED_SUFFIX, path)
        fsync_dir(directory)
        result.bytes_after += len(cleaned)
        result.segments_cleaned += 1
    return result


def latest_offsets(inputs, producers: dict[int, int] | None = None, skip=None,
                   transactional: bool = True) -> dict[bytes, int]:
    """key → its latest offset over `inputs`, (path, lo, hi): a segment's records in [lo, hi) (hi
    None: no bound). Records without a key are left out (a data topic's, written before it was
    compacted); `producers`, when given, gets each producer id's last batch (its last offset);
    batches for which `skip(batch)` holds (an aborted transaction's) are left out too.
    `transactional` False: the records of transactional batches are left out too (the offsets
    log's, see `clean`)."""
    latest: dict[bytes, int] = {}
    for path, lo, hi in inputs:
        for b in read_closed(path)[1]:
            batch = b.batch
            if producers is not None and batch.producer_id >= 0:
                producers[batch.producer_id] = batch.next_offset - 1
            if batch.is_control_batch or (skip is not None and skip(batch)) or (
                    not transactional and batch.is_transactional):
                continue
            try:
                for r in batch:
                    if r.key is not None and lo <= r.offset and (hi is None or r.offset < hi):
                        latest[bytes(r.key)] = r.offset
            except Exception:  # a codec this process lacks (a data batch): its keys stay unknown
                if producers is None:
                    raise
    return latest


def clean(data: bytes, batches, latest: dict[bytes, int], horizon: int | None, lo: int,
          hi: int | None) -> tuple[list[bytes], int, int]:
    """The batches of one segment's records in [lo, hi) that survive (the latest value per key; a
    tombstone only while its batch is newer than `horizon`), as (batches, records, records kept).
    A batch wholly kept is copied as it was, and the last offset is kept in an empty batch header
    when its records go, as Kafka's cleaner does (`writeEmptyHeader`): each segment still ends
    where the next one begins, so a lost segment shows as a gap.

    Transactions (`latest` built without their records): a transaction marker is always kept, and
    an offset of a transaction unless a later non-transactional record of its key (a commit or a
    tombstone) supersedes it, whatever the transaction's outcome; it never supersedes an earlier
    one itself, since its transaction may still abort. So open transactions keep their records
    and markers, and a replay gives what the log gave before (spec transactions §2 rule 7)."""
    kept, total, out, end, last = 0, 0, [], 0, None
    for b in batches:
        batch = b.batch
        whole = lo <= batch.base_offset and (hi is None or batch.next_offset <= hi)
        records = [r for r in batch if whole or (lo <= r.offset and (hi is None or r.offset < hi))]
        if not whole and not records:
            continue
        last = batch.next_offset - 1 if whole else records[-1].offset
        if batch.is_control_batch:
            survivors = records
        elif batch.is_transactional:
            survivors = [r for r in records if latest.get(bytes(r.key), -1) < r.offset]
        else:
            survivors = [r for r in records if latest[bytes(r.key)] == r.offset
                         and not (r.value is None and horizon is not None and batch.max_timestamp < horizon)]
        total += len(records)
        kept += len(survivors)
        if whole and len(survivors) == len(records):
            out.append(data[b.position:b.position + b.size])  # unchanged: the batch as it was
            end = batch.next_offset
        elif survivors:
            out.append(_rebuild(batch.base_offset if whole else survivors[0].offset, survivors,
                                batch.producer_id if batch.is_transactional else -1, batch.producer_epoch))
            end = survivors[-1].offset + 1
    if last is not None and end <= last:
        out.append(empty_batch(last))
    return out, total, kept


def read_closed(path: str):
    """(data, valid batches, whether it holds corrupt bytes) of a closed segment."""
    with open(path, "rb") as f:
        data = f.read()
    found = scan(data, path=path)
    return data, found.batches, bool(found.corruption(last=False))


def _rebuild(base_offset: int, records, producer_id: int = -1, producer_epoch: int = -1) -> bytes:
    """A batch of `records`; a transaction's (producer id set) stays transactional."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(producer_id >= 0),
                                        producer_id=producer_id, producer_epoch=producer_epoch if producer_id >= 0
                                        else -1, base_sequence=-1, batch_size=1 << 30)
    for r in records:
        builder.append(r.offset - base_offset, timestamp=r.timestamp, key=bytes(r.key),
                       value=None if r.value is None else bytes(r.value), headers=[])
    buf = builder.build()
    buf[0:8] = base_offset.to_bytes(8, "big", signed=True)
    return bytes(buf)


def empty_batch(offset: int) -> bytes:
    """A batch of no records that holds `offset` (Kafka's empty batch header): it keeps a
    segment's last offset when its records are gone."""
    return _rebuild(offset, [])


def write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
