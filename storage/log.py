"""One `__consumer_offsets` partition on disk: a directory of segments, each a sequence of Kafka
record batches (magic 2, CRC32C, built and read with aiokafka's codec).

    <data.dir>/__consumer_offsets-<p>/<20-digit base offset>.log

Blocking file work happens here, in plain functions and methods that the runtime calls on a
worker thread; nothing in this module touches the event loop.

Recovery (`load`): segments are read with `storage.scanner`, which checks every batch's CRC. A
torn tail of the last segment is truncated (a crash mid-write leaves exactly that). Corrupt bytes
anywhere else are stepped over: every valid batch after them still loads, and the skipped ranges
are logged and returned in `LoadResult.damage` (`groupd log repair` rewrites them away).
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from .aiokafka_record_code import DefaultRecordBatch, DefaultRecordBatchBuilder
from .batch_crc import set_crc
from .consumer_records import decode, encode_key, encode_value
from .files import fsync_dir
from .records import KeyCache, OffsetCommitKey, Record
from .scanner import Damage, record_count, scan_segments
from .syncfs import syncfs
from .txn_records import TxnMarkerKey, TxnOffsetKey, marker_key, marker_value, read_marker

log = logging.getLogger("groupd.storage")

SEGMENT_SUFFIX = ".log"
CLEANED_SUFFIX = ".log.cleaned"


def partition_dir(data_dir: str, partition: int) -> str:
    return os.path.join(data_dir, f"__consumer_offsets-{partition}")


def segment_name(base_offset: int, stamp: int = 0) -> str:
    """`<base>.log`; in cluster mode an owner's own segments are `<base>-<stamp>.log` (storage/owned_log.py)."""
    return f"{base_offset:020d}{f'-{stamp}' if stamp else ''}{SEGMENT_SUFFIX}"


def list_segments(directory: str) -> list[tuple[int, str]]:
    """(base offset, path) of every segment, oldest first."""
    if not os.path.isdir(directory):
        return []
    out = []
    for name in os.listdir(directory):
        if name.endswith(SEGMENT_SUFFIX) and name[:-len(SEGMENT_SUFFIX)].isdigit():
            out.append((int(name[:-len(SEGMENT_SUFFIX)]), os.path.join(directory, name)))
    return sorted(out)


# What batch a run of records needs: None (a plain one) or (producer id, epoch, control): the
# transactional batch of a producer's offsets, or the control batch of its marker
BatchKind = tuple[int, int, bool] | None
_CONTROL_ATTRIBUTE = 0x20


def batch_kind(records: list[Record]) -> BatchKind:
    """The batch `records` (one request's) go in: a transaction's records never share a batch."""
    key = records[0].key if records else None
    if isinstance(key, TxnOffsetKey):
        return key.producer_id, key.producer_epoch, False
    if isinstance(key, TxnMarkerKey):
        return key.producer_id, key.producer_epoch, True
    return None


def _encode_one(record: Record) -> tuple[bytes, bytes | None]:
    key = record.key
    if isinstance(key, TxnOffsetKey):
        return encode_key(key.key), encode_value(record.value)
    if isinstance(key, TxnMarkerKey):
        return marker_key(key.commit), marker_value(key.coordinator_epoch)
    return encode_key(key), encode_value(record.value)


def encode(records: list[Record]) -> list[tuple[bytes, bytes | None]]:
    """Each record's key and value bytes (raises on a record that cannot be encoded)."""
    return [_encode_one(record) for record in records]


def build_batch(encoded: list[tuple[bytes, bytes | None]], base_offset: int, timestamp_ms: int,
                kind: BatchKind = None) -> bytes:
    producer_id, producer_epoch, control = kind if kind is not None else (-1, -1, False)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(kind is not None),
                                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                                        batch_size=1 << 30)
    for delta, (key, value) in enumerate(encoded):
        builder.append(delta, timestamp=timestamp_ms, key=key, value=value, headers=[])
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base_offset)  # outside the CRC, which covers attributes onward
    if control:  # aiokafka's builder has no control flag: set it, then the CRC again
        struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | _CONTROL_ATTRIBUTE)
        set_crc(buf)
    return bytes(buf)


def transactional_record(batch, r, keys: KeyCache | None = None) -> Record:
    """Record `r` of a transaction's batch (control, or with a producer id) as the coordinator
    applies it: a control batch's marker as a TxnMarkerKey record, a producer's offset as a
    TxnOffsetKey record (raises on what it cannot decode, as `decode` does)."""
    if batch.is_control_batch:
        commit, coordinator_epoch = read_marker(bytes(r.key), None if r.value is None else bytes(r.value))
        return Record(TxnMarkerKey(batch.producer_id, batch.producer_epoch, commit, coordinator_epoch), None)
    record = decode(r.key, r.value, keys)
    if isinstance(record.key, OffsetCommitKey):
        return Record(TxnOffsetKey(batch.producer_id, batch.producer_epoch, record.key), record.value)
    return record


def is_transactional(batch) -> bool:
    """A transaction's batch: a marker, or a producer's records (groupd's plain batches have none)."""
    return batch.is_control_batch or batch.producer_id >= 0


def records_of(batch: DefaultRecordBatch) -> Iterator[tuple[int, Record | None, bytes]]:
    """(offset, record or None when its key type is unknown, raw key) per record."""
    keys = KeyCache()  # a commit's partitions share their group's and topic's strings
    if is_transactional(batch):  # a transaction's: keys say which producer
        for r in batch:
            try:
                yield r.offset, transactional_record(batch, r, keys), r.key
            except Exception:
                yield r.offset, None, r.key
        return
    for r in batch:
        try:
            yield r.offset, decode(bytes(r.key), None if r.value is None else bytes(r.value), keys), r.key
        except Exception:  # unknown key types (KIP-848, share groups) are skipped by the loader
            yield r.offset, None, r.key


_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_HEAD_BYTES = 27  # through lastOffsetDelta (bytes 23–26)


def read_batches(segments: list[tuple[int, str]], offset: int, end: int, max_bytes: int) -> bytes:
    """Whole batches, as stored, from the one holding `offset` up to `end` (the log end when the
    caller looked), at most `max_bytes` except that the first batch always comes whole (KIP-74):
    what a Fetch of `__consumer_offsets` returns. Blocking (run it off the loop); a segment that
    compaction replaced meanwhile is read as the new file, one it removed is skipped."""
    out: list[bytes] = []
    used = 0
    start = max(bisect.bisect_right([base for base, _ in segments], offset) - 1, 0)
    for _, path in segments[start:]:
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            continue
        with f:
            while True:
                head = f.read(_HEAD_BYTES)
                if len(head) < _HEAD_BYTES:
                    break  # end of the segment (or a batch still being written)
                base, length = _BATCH_HEAD.unpack_from(head)
                if base >= end:
                    return b"".join(out)
                size = 12 + length
                (last_delta,) = struct.unpack_from(">i", head, 23)
                if base + last_delta < offset:
                    f.seek(size - _HEAD_BYTES, os.SEEK_CUR)
                    continue
                if out and used + size > max_bytes:
                    return b"".join(out)
                rest = f.read(size - _HEAD_BYTES)
                if len(rest) < size - _HEAD_BYTES:
                    break
                out.append(head + rest)
                used += size
    return b"".join(out)


@dataclass(slots=True)
class LoadResult:
    records: int = 0
    bytes: int = 0
    truncated: str | None = None
    skipped: int = 0  # records of key types this coordinator does not know (KIP-848, share groups)
    next_offset: int = 0
    damage: list[Damage] = field(default_factory=list)  # corrupt ranges stepped over (kept on disk)

    @property
    def corrupt_bytes(self) -> int:
        return sum(d.size for d in self.damage)

    @property
    def corrupt_batches(self) -> int:
        """Batches lost to corruption (a range whose frames do not chain counts as one)."""
        return sum(d.batches or 1 for d in self.damage)


class PartitionLog:
    """The segments of one partition, opened for append. Not thread-safe: the runtime serialises
    appends per partition and runs them off the event loop."""

    stamp = 0  # cluster mode: the owner's claim, in the names of the segments it starts (storage/owned_log.py)

    def __init__(self, data_dir: str, partition: int, segment_bytes: int) -> None:
        self.partition = partition
        self.directory = partition_dir(data_dir, partition)
        self.segment_bytes = segment_bytes
        self.next_offset = 0
        self.segments: list[tuple[int, str]] = []
        self._active = None  # unbuffered file of the last segment (no bytes queued in user space)
        self._active_size = 0
        self._broken: str | None = None  # why appends are refused (a failed write could not be undone)

    # -- recovery --------------------------------------------------------------------------------

    def load(self, apply) -> LoadResult:
        """Replay every record into `apply(record)`, oldest first; truncate a torn tail."""
        os.makedirs(self.directory, exist_ok=True)
        for name in os.listdir(self.directory):
            if name.endswith(CLEANED_SUFFIX):  # a compaction that crashed before its rename
                os.remove(os.path.join(self.directory, name))
        self.segments = list_segments(self.directory)
        result = LoadResult()
        for base, path, data, found, last in scan_segments(self.segments):
            result.records += sum(record_count(data, b) for b in found.batches)
            del data
            for b in found.batches:
                keys = KeyCache()  # records_of's loop without its generator: a load runs it per record
                if is_transactional(b.batch):
                    self._load_transactional(b.batch, keys, apply, result)
                    result.next_offset = max(result.next_offset, b.batch.next_offset)
                    result.bytes += b.size
                    continue
                for r in b.batch:
                    try:
                        record = decode(r.key, r.value, keys)
                    except Exception:  # unknown key types (KIP-848, share groups) are skipped
                        result.skipped += 1
                    else:
                        apply(record)
                result.next_offset = max(result.next_offset, b.batch.next_offset)
                result.bytes += b.size
            self._settle(path, found, last, result)
        if result.skipped:
            log.warning("partition %d: skipped %d records of unknown key types", self.partition, result.skipped)
        self._open_end(result)
        return result

    @staticmethod
    def _load_transactional(batch, keys: KeyCache, apply, result: LoadResult) -> None:
        for r in batch:
            try:
                record = transactional_record(batch, r, keys)
            except Exception:  # an unknown control record or key type: skipped, as above
                result.skipped += 1
            else:
                apply(record)

    def _open_end(self, result: LoadResult) -> None:
        """After the load: the log end, and the last segment opened for append (a first one made)."""
        self.next_offset = max(result.next_offset, self.segments[-1][0] if self.segments else 0)
        if not self.segments:
            self._roll(0)
        else:
            self._open_active()

    def _settle(self, path: str, found, last: bool, result: LoadResult) -> None:
        """After a segment's scan: log the corrupt ranges stepped over, truncate a torn tail."""
        for damage in found.corruption(last):
            result.damage.append(damage)
            log.error("partition %s: corrupt log bytes skipped, the valid batches around them are loaded: %s; "
                      "`groupd log repair` rewrites the partition without them", self.name, damage.describe())
        torn = found.torn_tail(last)
        if torn is not None:
            result.truncated = f"{path}: truncated {torn.size} bytes at byte {torn.position} ({torn.reason})"
            log.warning("partition %s: torn tail truncated: %s", self.name, result.truncated)
            with open(path, "r+b") as f:
                f.truncate(torn.position)
                os.fsync(f.fileno())

    @property
    def name(self) -> str:
        """How log lines name the partition."""
        return str(self.partition)

    def _open_active(self) -> None:
        base, path = self.segments[-1]
        self._active = open(path, "ab", buffering=0)
        self._active_size = self._active.tell()

    def _roll(self, base_offset: int) -> None:
        """Start a segment at `base_offset`. The old one is fsynced before the new one exists (a
        closed segment is always complete on disk), and stays the active one if any step fails."""
        if self._active is not None:
            os.fsync(self._active.fileno())
        path = os.path.join(self.directory, segment_name(base_offset, self.stamp))
        new = open(path, "ab", buffering=0)
        try:
            fsync_dir(self.directory)
        except BaseException:
            new.close()  # an empty file: harmless, and the next roll reuses it
            raise
        if self._active is not None:
            self._active.close()
        self.segments.append((base_offset, path))
        self._active, self._active_size = new, new.tell()

    # -- appends ---------------------------------------------------------------------------------

    def append(self, records: list[Record], fsync: bool) -> int:
        return self.append_encoded(encode(records), fsync)

    def append_encoded(self, encoded: list[tuple[bytes, bytes | None]], fsync: bool) -> int:
        """Write one batch holding the encoded records (key, value), rolling the segment first if it
        is full, and fsync it if asked; returns its size. A failed write or fsync leaves nothing
        behind (see `write`)."""
        return self.append_runs([(None, encoded)], fsync)

    def append_runs(self, runs: list[tuple[BatchKind, list[tuple[bytes, bytes | None]]]], fsync: bool) -> int:
        """`append_encoded` for runs of records of their batch kinds (`build_runs`)."""
        self._refuse_if_broken()
        batch = self.build_runs(runs)
        count = sum(len(encoded) for _, encoded in runs)
        if not self.fits(len(batch)):
            self._roll(self.next_offset)
        start = self.write(batch, count)
        if fsync:
            try:
                self.fsync_active()
            except OSError:
                self.cut(start, self.next_offset - count)
                raise
        return len(batch)

    def build(self, encoded: list[tuple[bytes, bytes | None]], kind: BatchKind = None) -> bytes:
        """The batch of the encoded records (key, value) at the log end."""
        return build_batch(encoded, self.next_offset, int(time.time() * 1000), kind)

    def build_runs(self, runs: list[tuple[BatchKind, list[tuple[bytes, bytes | None]]]]) -> bytes:
        """The batches of consecutive runs of encoded records, each of its kind, from the log end."""
        now_ms, base, out = int(time.time() * 1000), self.next_offset, []
        for kind, encoded in runs:
            out.append(build_batch(encoded, base, now_ms, kind))
            base += len(encoded)
        return b"".join(out)

    def fits(self, size: int) -> bool:
        """Whether a batch of `size` bytes goes in the active segment (else `append_encoded` rolls)."""
        return not self._active_size or self._active_size + size <= self.segment_bytes

    def write(self, batch: bytes, records: int) -> int:
        """Append a built batch to the active segment without fsync (a page-cache write); returns
        the byte where it starts. On failure the segment is cut back to where it was, so a failed
        write leaves nothing behind (the file is unbuffered: no part of a failed batch can linger in
        a buffer and reach the disk with a later write)."""
        self._refuse_if_broken()
        start = self._active_size
        try:
            view = memoryview(batch)
            while view:  # a raw write may be short (e.g. the disk filled up mid-batch)
                view = view[self._active.write(view):]
        except OSError:
            self.cut(start, self.next_offset)
            raise
        self._active_size = start + len(batch)
        self.next_offset += records
        return start

    def _refuse_if_broken(self) -> None:
        if self._broken is not None:
            raise OSError(f"partition {self.partition}: log is read-only after a failed write ({self._broken})")

    def fsync_active(self) -> None:
        """fsync the active segment, raising on failure (a worker thread may call this while the
        loop writes on: the sync covers at least what was written before it started)."""
        os.fsync(self._active.fileno())

    def sync_file_system(self) -> None:
        """`syncfs` of the file system holding the active segment: what `fsync_active` promises, for
        this log and for every other log written on the same file system before the call started
        (storage/syncfs.py says where it may stand in for an fsync of each)."""
        syncfs(self._active.fileno())

    def cut(self, position: int, next_offset: int) -> None:
        """Forget everything from byte `position` of the active segment on (a failed write or
        fsync: what it covered is not durable). If the cut itself fails, every later append is
        refused, as Kafka takes a log dir offline; the next load truncates the torn tail."""
        self.next_offset = next_offset
        self._active_size = position
        try:
            self._active.truncate(position)
        except OSError as cut:
            self._broken = f"truncating back to byte {position} failed: {cut}"

    def sync(self) -> None:
        """fsync the active segment (interval mode calls this from another thread than appends)."""
        active = self._active
        if active is not None:
            try:
                os.fsync(active.fileno())
            except ValueError:  # closed by a concurrent roll, which fsynced it first
                pass

    def close(self) -> None:
        if self._active is not None:
            try:
                self.sync()
            finally:
                self._active.close()
                self._active = None

    @property
    def size(self) -> int:
        return sum(os.path.getsize(p) for _, p in self.segments if os.path.exists(p))
