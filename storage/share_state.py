"""The share-partition state log (KIP-932's `__share_group_state`, share-groups spec §3.11): one
ShareSnapshot record per write of a share-partition, with Kafka's key and value bytes (key type 0:
GroupId, TopicId, Partition; value v0: snapshot epoch, state epoch, leader epoch, start offset,
timestamps, the state batches), in Kafka v2 record batches in segment files, as the offsets log
stores its records (storage/log.py's batch builder and scanner: CRC-checked, a torn tail cut off).

groupd writes a full snapshot each time (never ShareUpdate deltas: the in-flight window is at most
`group.share.partition.max.record.locks` offsets); replay keeps the last snapshot per key. A segment
is rewritten with only the live snapshots once it holds many times more records than keys.

The state is kept per data partition, with the partition's leader (`partition_directory`: one
directory per topic id and partition, every share group reading it in one log), so that it moves
with the partition's leadership between workers and cluster nodes. Each leader writes a segment of
its own, named by its stamp (cluster mode: its claim's etcd revision, larger for every later leader;
0 elsewhere, where leadership does not move), and starts it with the state it found in the newest
earlier one (`take_over`): what a deposed leader still writes late goes to its own, older file,
which no later leader reads, and a leader that finds a newer stamp than its own knows it is deposed.
Blocking: the runtime calls these off the event loop, one at a time."""

from __future__ import annotations

import io
import os
import struct
import uuid
from collections.abc import Iterable

from .files import fsync_dir
from .log import build_batch
from .scanner import scan
from .wire import uvarint

SNAPSHOT_KEY_TYPE = 0
COMPACT_FACTOR = 4  # rewrite when the segment holds this many times more records than live keys (and > 1000)

Key = tuple[str, uuid.UUID, int]
Snapshot = tuple[int, int, int, list[tuple[int, int, int, int]]]  # snapshot epoch, state epoch, start, batches


ROOT = "__share_group_state-0"  # Kafka's internal topic's name


class Deposed(Exception):
    """A later leader of the data partition already wrote its share state: this node no longer leads it."""


def partition_directory(data_dir: str, topic_id: uuid.UUID, partition: int) -> str:
    return os.path.join(data_dir, ROOT, f"{topic_id}-{partition}")


def partition_directories(data_dir: str) -> list[tuple[uuid.UUID, int]]:
    """The (topic id, partition) of every data partition with share state in the data dir."""
    root = os.path.join(data_dir, ROOT)
    found = []
    for name in os.listdir(root) if os.path.isdir(root) else ():
        tid, _, p = name.rpartition("-")
        try:
            found.append((uuid.UUID(tid), int(p)))
        except ValueError:
            continue
    return found


def _stamps(directory: str) -> list[int]:
    names = os.listdir(directory) if os.path.isdir(directory) else ()
    return sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())


def read_latest(directory: str) -> dict[Key, Snapshot]:
    """The live snapshots of the newest segment, read as it is (never changed): what its leader last
    wrote durably, for a reader that does not lead the partition (DescribeShareGroupOffsets)."""
    for _ in range(3):  # a new leader removes the segment it took over from: look again
        stamps = _stamps(directory)
        if not stamps:
            return {}
        segment = ShareStateLog(directory, stamps[-1])
        try:
            if os.path.exists(segment.path):
                return segment.load(repair=False)
        except FileNotFoundError:
            pass
    return {}


def take_over(directory: str, stamp: int, now_ms: int) -> ShareStateLog:
    """The log the leader of stamp `stamp` writes: its own segment if it has one, else one started
    (written and fsynced before this returns) with the live snapshots of the newest earlier leader's
    segment, read as it is now and never changed; older segments are removed after. Raises `Deposed`
    when a later leader's segment exists."""
    stamps = _stamps(directory)
    if stamps and stamps[-1] > stamp:
        raise Deposed(f"share state of stamp {stamps[-1]} found by the leader of stamp {stamp}")
    own = ShareStateLog(directory, stamp)
    if stamp in stamps:
        own.load()
    else:
        earlier = [s for s in stamps if s < stamp]
        if earlier:
            own.live = ShareStateLog(directory, earlier[-1]).load(repair=False)
        own._compact(now_ms)
    for old in stamps:
        if old < stamp:
            try:
                os.remove(os.path.join(directory, f"{old:020d}.log"))
            except OSError:
                pass  # a later leader ignores it either way
    return own


def encode_key(key: Key) -> bytes:
    group, topic_id, partition = key
    g = group.encode()
    return struct.pack(">hh", SNAPSHOT_KEY_TYPE, len(g)) + g + topic_id.bytes + struct.pack(">i", partition)


def decode_key(data: bytes) -> Key | None:
    kind, n = struct.unpack_from(">hh", data, 0)
    if kind != SNAPSHOT_KEY_TYPE:
        return None  # a ShareUpdate (type 1): groupd writes none
    group = data[4:4 + n].decode()
    topic_id = uuid.UUID(bytes=bytes(data[4 + n:20 + n]))
    (partition,) = struct.unpack_from(">i", data, 20 + n)
    return group, topic_id, partition


def _read_uvarint(buf: io.BytesIO) -> int:
    value = shift = 0
    while True:
        b = buf.read(1)[0]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


def encode_value(snapshot: Snapshot, now_ms: int) -> bytes:
    """ShareSnapshotValue v0 (flexible): no DeliveryCompleteCount tag (Kafka writes it only when known)."""
    snapshot_epoch, state_epoch, start, batches = snapshot
    out = [struct.pack(">hiiiqqq", 0, snapshot_epoch, state_epoch, 0, start, now_ms, now_ms),
           uvarint(len(batches) + 1)]
    out += [struct.pack(">qqbh", first, last, state, count) + b"\x00" for first, last, state, count in batches]
    out.append(b"\x00")
    return b"".join(out)


def decode_value(data: bytes) -> Snapshot:
    buf = io.BytesIO(data)
    _version, snapshot_epoch, state_epoch, _leader_epoch, start, _created, _written = struct.unpack(
        ">hiiiqqq", buf.read(38))
    batches = []
    for _ in range(_read_uvarint(buf) - 1):
        first, last, state, count = struct.unpack(">qqbh", buf.read(19))
        for _tag in range(_read_uvarint(buf)):  # each batch's tag section: skip what is there
            _read_uvarint(buf)
            buf.read(_read_uvarint(buf))
        batches.append((first, last, state, count))
    return snapshot_epoch, state_epoch, start, batches


class ShareStateLog:
    def __init__(self, directory: str, stamp: int = 0) -> None:
        self.directory = directory
        self.path = os.path.join(self.directory, f"{stamp:020d}.log")
        self.next_offset = 0
        self.records = 0  # records in the segment
        self.live: dict[Key, Snapshot] = {}

    def load(self, repair: bool = True) -> dict[Key, Snapshot]:
        """Replay the segment: the last snapshot per key (a tombstone removes it); a torn tail is cut
        (`repair`: the segment is this node's to write)."""
        if repair:
            os.makedirs(self.directory, exist_ok=True)
        if not os.path.exists(self.path):
            return {}
        with open(self.path, "rb") as f:
            data = f.read()
        found = scan(data, 0, self.path)
        end = 0
        for b in found.batches:
            for r in b.batch:
                key = decode_key(bytes(r.key))
                if key is None:
                    continue
                self.records += 1
                if r.value is None:
                    self.live.pop(key, None)
                else:
                    self.live[key] = decode_value(bytes(r.value))
            self.next_offset = max(self.next_offset, b.batch.next_offset)
            end = max(end, b.position + b.size)
        if end < len(data) and repair:
            with open(self.path, "r+b") as f:
                f.truncate(end)
                os.fsync(f.fileno())
        return dict(self.live)

    def write(self, snapshots: Iterable[tuple[Key, Snapshot | None]], now_ms: int) -> None:
        """Append the snapshots (None: a tombstone, the state deleted) as one batch and fsync; on
        failure the segment is cut back and the error raised (the caller answers with it)."""
        snapshots = list(snapshots)
        if not snapshots:
            return
        encoded = [(encode_key(k), None if s is None else encode_value(s, now_ms)) for k, s in snapshots]
        batch = build_batch(encoded, self.next_offset, now_ms)
        os.makedirs(self.directory, exist_ok=True)
        created = not os.path.exists(self.path)
        with open(self.path, "ab") as f:
            size = f.tell()
            try:
                f.write(batch)
                f.flush()
                os.fsync(f.fileno())
            except OSError:
                f.truncate(size)
                raise
        if created:
            fsync_dir(self.directory)
        self.next_offset += len(encoded)
        self.records += len(encoded)
        for key, snapshot in snapshots:
            if snapshot is None:
                self.live.pop(key, None)
            else:
                self.live[key] = snapshot
        if self.records > 1000 and self.records > COMPACT_FACTOR * len(self.live):
            self._compact(now_ms)

    def _compact(self, now_ms: int) -> None:
        """Rewrite the segment with only the live snapshots (write, fsync, rename)."""
        items = list(self.live.items())
        encoded = [(encode_key(k), encode_value(s, now_ms)) for k, s in items]
        tmp = self.path + ".cleaned"
        created = not os.path.isdir(self.directory)
        os.makedirs(self.directory, exist_ok=True)
        with open(tmp, "wb") as f:
            if encoded:
                f.write(build_batch(encoded, 0, now_ms))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.directory)
        if created:  # the new directory's own entry (and the root's, new with the first one)
            parent = os.path.dirname(self.directory)
            fsync_dir(parent)
            fsync_dir(os.path.dirname(parent))
        self.next_offset = self.records = len(encoded)
