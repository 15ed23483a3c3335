"""One data partition on disk (`records.plane: disk`): a directory of segments holding the record
batches producers sent, as stored by Kafka, and a sparse in-memory index to find them.

    <data.dir>/<topic>-<p>/<20-digit base offset>.log
    <data.dir>/<topic>-<p>/partition.metadata          the topic id (Kafka's file of that name)
    <data.dir>/<topic>-<p>/log-start-offset-checkpoint  the log start DeleteRecords set (Kafka's format)
    <data.dir>/<topic>-<p>/leader-epoch-checkpoint      each leader epoch's start offset (leader_epochs.py)

Segments, rolling, the torn-tail and corrupt-batch rules and the write that leaves nothing behind
when it fails are the offsets log's (`storage.log.PartitionLog`, `storage.scanner`); this module
adds what data partitions need: batches written as the producer built them (offsets already
stamped), an index of (offset, byte position) every `INDEX_INTERVAL` bytes per segment, each
interval's largest timestamp (ListOffsets by time reads one interval), and reads of whole batches
from a byte position (Fetch). Blocking file work only: reads run off the event loop; `write_batches`
is the loop's one unbuffered write to the page cache, as the offsets log's writer does.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..files import atomic_write
from ..log import CLEANED_SUFFIX, SEGMENT_SUFFIX, LoadResult, PartitionLog
from ..owned_log import stamped_segments
from ..scanner import scan_segments
from .batches import first_record_at_or_after, record_with_max_timestamp
from .leader_epochs import LeaderEpochs, read_epochs, write_epochs
from .rolling import time_to_roll
from .transactions import marker_of

log = logging.getLogger("groupd.storage")

INDEX_INTERVAL = 4096  # Kafka's index.interval.bytes: one index entry per this many bytes of batches
METADATA_FILE = "partition.metadata"
# Kafka keeps one such file per log dir; here each partition keeps its own, so it moves with the
# directory between workers and cluster nodes. Same text: version 0, one entry "topic partition offset".
LOG_START_FILE = "log-start-offset-checkpoint"
_HEAD = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")  # bytes 23..27
_MAX_TS = struct.Struct(">q")  # bytes 35..43
_HEAD_BYTES = 61
READ_SLACK = 64 << 10  # bytes read beyond max_bytes at once, so one read finds the first batch and more


def data_partition_dir(data_dir: str, topic: str, partition: int) -> str:
    return os.path.join(data_dir, f"{topic}-{partition}")


@dataclass(slots=True)
class SegmentIndex:
    """Sparse index of one segment: entry i is the batch at `positions[i]` with base offset
    `offsets[i]`; `max_ts[i]` is the largest timestamp from it to entry i + 1."""
    offsets: array = field(default_factory=lambda: array("q"))
    positions: array = field(default_factory=lambda: array("q"))
    max_ts: array = field(default_factory=lambda: array("q"))
    last_entry_at: int = -INDEX_INTERVAL  # byte position of the last entry
    largest_ts: int = -1
    largest_ts_position: int = -1  # byte position of a batch carrying `largest_ts`
    first_ts: int = -1  # the first batch's max timestamp (max.compaction.lag.ms counts from it)
    # the file's inode: a read planned with these positions that opens another file (compaction
    # replaced the segment meanwhile) reads it from its start instead (0: unknown, not checked)
    inode: int = 0

    def add(self, offset: int, position: int, max_ts: int) -> None:
        if not self.offsets:
            self.first_ts = max_ts
        if position - self.last_entry_at >= INDEX_INTERVAL or not self.offsets:
            self.offsets.append(offset)
            self.positions.append(position)
            self.max_ts.append(max_ts)
            self.last_entry_at = position
        elif max_ts > self.max_ts[-1]:
            self.max_ts[-1] = max_ts
        if max_ts > self.largest_ts:
            self.largest_ts, self.largest_ts_position = max_ts, position

    def position_for(self, offset: int) -> int:
        """A byte position at or before the batch holding `offset`."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def cut(self, offset: int) -> None:
        """Forget entries of batches at or after `offset` (a write cut back)."""
        i = bisect.bisect_left(self.offsets, offset)
        del self.offsets[i:], self.positions[i:], self.max_ts[i:]
        self.last_entry_at = self.positions[-1] if self.positions else -INDEX_INTERVAL


@dataclass(slots=True)
class ScannedBatch:
    """What loading learns from one batch header (the producer state is rebuilt from these)."""
    base_offset: int
    count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int
    transactional: bool = False
    marker: tuple[int, int] | None = None  # an end-transaction marker: (ABORT or COMMIT, coordinator epoch)


class DataLog(PartitionLog):
    """The segments of one data partition, opened for append. One writer (the loop), readers on
    other threads read the files through their own descriptors, up to an offset the loop gave them."""

    def __init__(self, data_dir: str, topic: str, partition: int, topic_id, segment_bytes: int,
                 stamp: int = 0) -> None:
        super().__init__(data_dir, partition, segment_bytes)
        self.stamp = stamp  # cluster mode: the leader's claim; its segments are `<base>-<stamp>.log`
        # the epoch this node leads the partition in (the stamp: 0 on a lone node, the claim's etcd
        # revision in cluster mode, which grows with each new leader); its appends are stamped with it,
        # and it begins at the log end found on loading (`epochs`, the partition's leader-epoch-checkpoint)
        self.leader_epoch = stamp
        self.epochs = LeaderEpochs()
        self.topic = topic
        self.topic_id = topic_id
        self.directory = data_partition_dir(data_dir, topic, partition)
        self.indexes: dict[str, SegmentIndex] = {}  # by segment path
        # cluster mode: segments of an earlier stamp count below the next stamp's first offset
        self.caps: dict[str, int] = {}
        self.start_checkpoint = 0  # the log start DeleteRecords made durable (LOG_START_FILE)
        # when the active segment was created or opened (Kafka's LogSegment.created: a segment.ms roll
        # of a segment whose first batch has no timestamp counts from it)
        self.active_created_ms = 0

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start(self) -> int:
        """The first offset readers may fetch: the first segment's base, or further where DeleteRecords
        moved it (within a segment: the records below it stay in the file until the segment goes)."""
        return max(self.segments[0][0] if self.segments else self.next_offset, self.start_checkpoint)

    # -- recovery --------------------------------------------------------------------------------

    def _claim_directory(self) -> None:
        """The directory is this topic's: a directory left by a deleted topic of the same name (another
        topic id in partition.metadata) is removed first, as Kafka deletes a deleted topic's logs."""
        meta = os.path.join(self.directory, METADATA_FILE)
        wanted = f"version: 0\ntopic_id: {self.topic_id}\n"
        if os.path.exists(meta):
            with open(meta, encoding="utf-8") as f:
                found = f.read()
            if found == wanted:
                return
            log.warning("partition %s: the directory belongs to a deleted topic of the same name (%s); "
                        "its records are removed", self.name, found.strip().replace("\n", " "))
            shutil.rmtree(self.directory)
        os.makedirs(self.directory, exist_ok=True)
        atomic_write(meta, wanted.encode())

    def load_batches(self, on_batch=None) -> LoadResult:
        """Scan every segment (CRC-checked), build the index, truncate a torn tail, step over corrupt
        bytes (logged; `groupd log repair` removes them); `on_batch(ScannedBatch)` per batch."""
        self._claim_directory()
        self.start_checkpoint = read_log_start(self.directory)
        for name in os.listdir(self.directory):
            if name.endswith(CLEANED_SUFFIX):
                os.remove(os.path.join(self.directory, name))
        chain = counted_chain(self.directory)
        self.segments = [(base, path) for base, path, _, _ in chain]
        self.caps = {path: cap for _, path, _, cap in chain if cap is not None}
        stamps = {path: stamp for _, path, stamp, _ in chain}
        self.indexes = {}
        result = LoadResult()
        for base, path, data, found, last in scan_segments(self.segments):
            index = self.indexes[path] = SegmentIndex(inode=_inode(path))
            cap = self.caps.get(path)
            for b in found.batches:
                batch = b.batch
                if cap is not None and batch.base_offset >= cap:
                    break  # a deposed leader's late writes: the next stamp holds these offsets
                index.add(batch.base_offset, b.position, batch.max_timestamp)
                result.next_offset = max(result.next_offset, batch.next_offset)
                result.bytes += b.size
                if on_batch is not None:
                    on_batch(ScannedBatch(batch.base_offset, batch.last_offset_delta + 1, batch.producer_id,
                                          batch.producer_epoch, batch.base_sequence, batch.max_timestamp,
                                          bool(batch.is_transactional),
                                          marker_of(batch) if batch.is_control_batch else None))
            del data
            if stamps[path] == self.stamp and cap is None:
                self._settle(path, found, last, result)
            # another leader's segment is read, never changed: bad bytes at its end are where it stopped
        if self.stamp:  # cluster mode: this leader's own segments, from the offset it found on
            self.next_offset = max(result.next_offset, self.segments[-1][0] if self.segments else 0)
            if self.segments and self.own(self.segments[-1][1]):
                self._open_active()
            else:
                self._roll(self.next_offset)
        else:
            self._open_end(result)
        if self.start_checkpoint > self.next_offset:
            self._start_empty_at(self.start_checkpoint)
        self._lead_epoch()
        return result

    def _lead_epoch(self) -> None:
        """Kafka's recovery then `makeLeader`: the history forgets epochs that began past the log end
        (a lost tail), and this leader's epoch begins at the log end (saved before anything is written
        in it). An epoch below the history's latest (a stale leader) changes nothing."""
        epochs = read_epochs(self.directory)
        saved = list(epochs.entries)
        epochs.truncate_from_end(self.next_offset)
        if self.leader_epoch >= epochs.latest:
            epochs.assign(self.leader_epoch, self.next_offset)
        if epochs.entries != saved:  # (an epoch begun at the log end is cut and assigned again: unchanged)
            write_epochs(self.directory, epochs)
        self.epochs = epochs

    def _start_empty_at(self, offset: int) -> None:
        """The log ends below its checkpointed start (its tail was lost, e.g. a power cut in
        `log.flush.interval.ms` mode): every segment goes and the log starts, empty, at the start,
        as Kafka's loader does, so no offset below it is handed out again."""
        log.warning("partition %s: log end %d is below the log start %d of %s; its segments are deleted and "
                    "the log starts empty at %d", self.name, self.next_offset, offset, LOG_START_FILE, offset)
        if self._active is not None:
            self._active.close()
            self._active = None
        for _, path in self.segments:
            os.remove(path)
        self.segments, self.indexes, self.caps = [], {}, {}
        self.next_offset = offset
        self._roll(offset)

    def own(self, path: str) -> bool:
        """Whether the segment is this leader's (its stamp; every segment of a lone node)."""
        return _stamp_of(path) == self.stamp

    def _open_active(self) -> None:
        super()._open_active()
        self.active_created_ms = int(time.time() * 1000)

    def _roll(self, base_offset: int) -> None:
        super()._roll(base_offset)
        self.active_created_ms = int(time.time() * 1000)

    # -- appends (on the loop) -------------------------------------------------------------------

    def roll(self, base_offset: int) -> None:
        """Start a new segment at `base_offset` (blocking: fsyncs the old one; run it off the loop)."""
        self._roll(base_offset)

    @property
    def active_bytes(self) -> int:
        return self._active_size

    def time_to_roll(self, incoming_max_ts: int, now_ms: int, segment_ms: int, jitter_ms: int) -> bool:
        """Whether the active segment rolls by time before an append whose largest timestamp is
        `incoming_max_ts` (Kafka's `LogSegment.shouldRoll`: never an empty one; storage/records_plane/rolling.py)."""
        if not self._active_size or not self.segments:
            return False
        index = self.indexes.get(self.segments[-1][1])
        first_ts = index.first_ts if index is not None and index.offsets else -1
        return time_to_roll(first_ts, self.active_created_ms, incoming_max_ts, now_ms, segment_ms, jitter_ms)

    def write_batches(self, data: bytes, records: int, bases: list[tuple[int, int, int]]) -> int:
        """Append stamped batches (their bytes joined) to the active segment and index them; `bases`
        is (base offset, size, max timestamp) per batch. Returns the byte where they start; a failure
        leaves nothing behind (`PartitionLog.write`)."""
        start = self.write(data, records)
        path = self.segments[-1][1]
        index = self.indexes.get(path)
        if index is None:
            index = self.indexes[path] = SegmentIndex(inode=_inode(path))
        position = start
        for offset, size, max_ts in bases:
            index.add(offset, position, max_ts)
            position += size
        return start

    def cut(self, position: int, next_offset: int) -> None:
        super().cut(position, next_offset)
        index = self.indexes.get(self.segments[-1][1]) if self.segments else None
        if index is not None:
            index.cut(next_offset)

    # -- log start, retention --------------------------------------------------------------------

    def save_log_start(self, offset: int) -> None:
        """Make `offset` the durable log start (blocking: run it off the loop); the caller then
        `advance_log_start`s on the loop."""
        write_log_start(self.directory, self.topic, self.partition, offset)

    def advance_log_start(self, offset: int) -> list[str]:
        """Move the log start to `offset` (saved already) and forget the closed segments wholly below
        it: their paths, for the caller to remove off the loop (Kafka's retention deletes them)."""
        self.start_checkpoint = max(self.start_checkpoint, offset)
        return self.drop_segments(len(self._below_start()))

    def _below_start(self) -> list[tuple[int, str]]:
        """The oldest closed segments whose records all lie below the log start (the next one starts
        at or before it): Kafka's log-start-offset breach."""
        start, segs = self.log_start, self.segments
        return [segs[i] for i in range(len(segs) - 1) if segs[i + 1][0] <= start]

    def expired_segments(self, retention_bytes: int, retention_ms: int, now_ms: int,
                         high_watermark: int | None = None) -> list[tuple[int, str]]:
        """The oldest segments that retention no longer keeps (Kafka's `UnifiedLog.deletableSegments`,
        whole segments): closed ones wholly below the log start; by bytes while the log without the
        segment still holds `retention_bytes` (-1: no limit); by time while the segment's largest
        timestamp (its file's modification time when it has none) is more than `retention_ms` old (-1:
        no limit). The active segment too when it is not empty: the caller then rolls an empty one
        before deleting (a log always keeps a segment). A segment is kept while it holds offsets at or
        beyond `high_watermark` (the durable end; default: the log end)."""
        hw = self.next_offset if high_watermark is None else high_watermark
        segs = self.segments
        sizes = [_size(path) for _, path in segs[:-1]] + [self._active_size] if segs else []
        total = sum(sizes)
        below = len(self._below_start())
        out = []
        for i, ((base, path), size) in enumerate(zip(segs, sizes)):
            last = i == len(segs) - 1
            upper = self.next_offset if last else segs[i + 1][0]
            if (last and size == 0) or upper > hw:
                break
            too_big = retention_bytes >= 0 and total - size >= retention_bytes
            too_old = retention_ms >= 0 and now_ms - self._largest_ts(path) > retention_ms
            if not (i < below or too_big or too_old):
                break
            out.append((base, path))
            total -= size
        return out

    def _largest_ts(self, path: str) -> int:
        """Kafka's `LogSegment.largestTimestamp`: its largest record timestamp, else the file's mtime."""
        index = self.indexes.get(path)
        if index is not None and index.largest_ts >= 0:
            return index.largest_ts
        try:
            return int(os.path.getmtime(path) * 1000)
        except OSError:
            return 2**63 - 1  # gone meanwhile: not aged by time

    def drop_segments(self, count: int) -> list[str]:
        """Forget the oldest `count` segments (the loop, before their files are removed off it)."""
        dropped, self.segments = self.segments[:count], self.segments[count:]
        for _, path in dropped:
            self.indexes.pop(path, None)
            self.caps.pop(path, None)
        return [path for _, path in dropped]

    # -- reading (plans on the loop, reads anywhere) ---------------------------------------------

    def plan_read(self, offset: int) -> tuple[str, int, int | None, int] | None:
        """(segment path, a byte position at or before the batch holding `offset`, the offset its
        records count up to or None, the inode the position belongs to)."""
        if not self.segments:
            return None
        i = max(bisect.bisect_right([base for base, _ in self.segments], offset) - 1, 0)
        base, path = self.segments[i]
        index = self.indexes.get(path)
        if index is None:
            return path, 0, self.caps.get(path), 0
        return path, index.position_for(offset), self.caps.get(path), index.inode

    def following(self, path: str) -> list[tuple[str, int | None]]:
        """(path, cap) of the segments after `path` (a read that found nothing ≥ its offset there
        moves on)."""
        paths = [p for _, p in self.segments]
        return [(p, self.caps.get(p)) for p in paths[paths.index(path) + 1:]] if path in paths else []

    def timestamp_plan(self, timestamp: int) -> list[tuple[str, int, int, int | None, int]]:
        """(path, start, end position or -1, cap, inode) of the index intervals whose largest timestamp
        reaches `timestamp`, oldest first (ListOffsets by time reads them until a record is found)."""
        out = []
        for base, path in self.segments:
            index = self.indexes.get(path)
            if index is None or index.largest_ts < timestamp:
                continue
            for i, ts in enumerate(index.max_ts):
                if ts >= timestamp:
                    end = index.positions[i + 1] if i + 1 < len(index.positions) else -1
                    out.append((path, index.positions[i], end, self.caps.get(path), index.inode))
        return out

    def max_timestamp_plan(self) -> tuple[str, int, int] | None:
        """(path, position, inode) of a batch with the log's largest timestamp (the first such segment)."""
        best = None
        for base, path in self.segments:
            index = self.indexes.get(path)
            if index is not None and index.largest_ts >= 0 and (best is None or index.largest_ts > best[0]):
                best = (index.largest_ts, path, index.largest_ts_position, index.inode)
        return None if best is None else best[1:]

    @property
    def size(self) -> int:
        return sum(_size(p) for _, p in self.segments[:-1]) + self._active_size


def read_log_start(directory: str) -> int:
    """The log start in the partition's LOG_START_FILE, 0 without one. A damaged file stops the load
    of the partition (OSError naming it): guessing could serve records a client deleted."""
    path = os.path.join(directory, LOG_START_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return 0
    lines = text.split("\n")
    try:
        if lines[0] != "0" or lines[1] != "1":
            raise ValueError(f"version {lines[0]!r} with {lines[1]!r} entries, expected version 0 with 1")
        offset = int(lines[2].rsplit(" ", 1)[1])
        if offset < 0:
            raise ValueError(f"negative offset {offset}")
    except (IndexError, ValueError) as e:
        raise OSError(f"{path} is damaged ({e}): fix it as `0`, `1`, `<topic> <partition> <offset>` lines, or "
                      "delete it (the log then starts at its first segment)") from None
    return offset


def write_log_start(directory: str, topic: str, partition: int, offset: int) -> None:
    atomic_write(os.path.join(directory, LOG_START_FILE), f"0\n1\n{topic} {partition} {offset}\n".encode())


def _stamp_of(path: str) -> int:
    stamp = os.path.basename(path)[:-len(SEGMENT_SUFFIX)].partition("-")[2]
    return int(stamp) if stamp else 0


def counted_chain(directory: str) -> list[tuple[int, str, int, int | None]]:
    """(base, path, stamp, cap) of the segments whose records count, in offset order. A lone node's
    segments are stamp 0; in cluster mode each leader writes segments of its claim's stamp (an etcd
    revision: later leaders, higher stamps) from the offset it found on, so a stamp's records count
    below the first offset of any later stamp (`cap`): what a deposed leader still wrote after the
    next one loaded is never read."""
    stamped = stamped_segments(directory)
    stamps = sorted(stamped)
    out = []
    for i, stamp in enumerate(stamps):
        later = [stamped[s][0][0] for s in stamps[i + 1:] if stamped[s]]
        cap = min(later) if later else None
        out += [(base, path, stamp, cap) for base, path in stamped[stamp] if cap is None or base < cap]
    return out


def _inode(path: str) -> int:
    try:
        return os.stat(path).st_ino
    except OSError:
        return 0


def _moved(f, inode: int) -> bool:
    """Whether the open file is not the one a plan's byte positions belong to (compaction replaced
    the segment between the plan on the loop and this read): the read starts from byte 0 then."""
    return inode != 0 and os.fstat(f.fileno()).st_ino != inode


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def read_from(path: str, position: int, offset: int, end: int, max_bytes: int, whole_first: bool,
              following: list[tuple[str, int | None]] = (), cap: int | None = None, inode: int = 0) -> bytes:
    """Whole batches from the one holding `offset` (starting the walk at byte `position`), below
    offset `end`, at most `max_bytes` except that with `whole_first` the first batch comes whole
    (KIP-74). One segment per read, as Kafka's: the next segment only when this one holds nothing
    at or after `offset`. A segment removed meanwhile (retention) reads as empty. A segment's cap
    (cluster mode: where the next stamp's records begin) ends it like `end`. `inode`: the file
    `position` belongs to (a segment compaction replaced is read from its start)."""
    for seg, seg_cap in ((path, cap), *following):
        try:
            f = open(seg, "rb", buffering=0)
        except FileNotFoundError:
            position = 0
            continue
        with f:
            if position and _moved(f, inode):
                position = 0
            found = _read_segment(f, position, offset, end if seg_cap is None else min(end, seg_cap), max_bytes,
                                  whole_first)
        if found is not None and (found or seg_cap is None or offset < seg_cap):
            return found
        position = 0
    return b""


def _read_segment(f, position: int, offset: int, end: int, max_bytes: int, whole_first: bool) -> bytes | None:
    """The batches of one segment for `read_from`; None when the segment ends before `offset`."""
    want = max(max_bytes, 0) + READ_SLACK
    while True:
        f.seek(position)
        chunk = f.read(want)
        n, pos, start = len(chunk), 0, None
        while pos + _HEAD_BYTES <= n:
            base, length = _HEAD.unpack_from(chunk, pos)
            size = 12 + length
            if base >= end:
                return b"" if start is None else chunk[start:pos]
            if start is None:
                (delta,) = _LAST_DELTA.unpack_from(chunk, pos + 23)
                if base + delta < offset:
                    pos += size
                    continue
                start = pos
            if pos + size > n:  # this batch runs past what was read
                if pos != start:
                    return chunk[start:pos]
                if pos > 0:
                    break  # read again from this batch
                if not whole_first:
                    return b""
                f.seek(position)  # KIP-74: the first batch whole, however large
                whole = f.read(size)
                return whole if len(whole) == size else b""
            if pos + size - start > max_bytes and not (whole_first and pos == start):
                return chunk[start:pos]
            pos += size
        if start is not None and start != pos:
            return chunk[start:pos]
        if n < want:
            return None  # the end of the segment (or a batch still being written, past `end`)
        position += pos


def batch_at(path: str, position: int, inode: int = 0) -> bytes:
    with open(path, "rb", buffering=0) as f:
        if _moved(f, inode):  # compaction replaced the segment: its batch of the largest timestamp
            best, found, pos = None, b"", 0
            while True:
                f.seek(pos)
                head = f.read(12)
                if len(head) < 12:
                    return found
                _, length = _HEAD.unpack_from(head)
                data = head + f.read(length)
                if len(data) >= 43 and (best is None or _MAX_TS.unpack_from(data, 35)[0] > best):
                    best, found = _MAX_TS.unpack_from(data, 35)[0], data
                pos += 12 + length
        f.seek(position)
        head = f.read(12)
        if len(head) < 12:
            return b""
        _, length = _HEAD.unpack_from(head)
        return head + f.read(length)


def offset_for_timestamp(plan: list[tuple[str, int, int]], timestamp: int, end: int,
                         log_start: int = 0) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after `timestamp` from offset `log_start` below
    offset `end`, reading the planned index intervals (blocking)."""
    for path, position, stop, cap, inode in plan:
        for data in _batches(path, position, stop, inode):
            base = _HEAD.unpack_from(data)[0]
            if cap is not None and base >= cap:
                break  # a deposed leader's late writes
            if base >= end:
                return None
            if _MAX_TS.unpack_from(data, 35)[0] >= timestamp:
                found = first_record_at_or_after(data, timestamp, log_start)
                if found is not None:
                    return found
    return None


def max_timestamp(plan: tuple[str, int] | None) -> tuple[int, int] | None:
    if plan is None:
        return None
    data = batch_at(*plan)
    return record_with_max_timestamp(data) if data else None


def _batches(path: str, start: int, stop: int, inode: int = 0) -> Iterator[bytes]:
    try:
        f = open(path, "rb", buffering=0)
    except FileNotFoundError:
        return
    with f:
        if _moved(f, inode):  # compaction replaced the segment: the whole of it, once
            start, stop = 0, -1
        f.seek(start)
        pos = start
        while stop < 0 or pos < stop:
            head = f.read(12)
            if len(head) < 12:
                return
            _, length = _HEAD.unpack_from(head)
            rest = f.read(length)
            if len(rest) < length:
                return
            yield head + rest
            pos += 12 + length
