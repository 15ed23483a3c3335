"""The share-partition state log (KIP-932's `__share_group_state`, share-groups spec §3.11): one
ShareSnapshot record per write of a share-partition, with Kafka's key and value bytes (key type 0:
GroupId, TopicId, Partition; value v0: snapshot epoch, state epoch, leader epoch, start offset,
timestamps, the state batches), in Kafka v2 record batches in segment files, as the offsets log
stores its records (storage/log.py's batch builder and scanner: CRC-checked, a torn tail cut off).

groupd writes a full snapshot each time (never ShareUpdate deltas: the in-flight window is at most
`group.share.partition.max.record.locks` offsets); replay keeps the last snapshot per key. The one
segment is rewritten with only the live snapshots once it holds many times more records than keys.
Blocking: the runtime calls `load` and `write` off the event loop, one at a time."""

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
SEGMENT = "00000000000000000000.log"
COMPACT_FACTOR = 4  # rewrite when the segment holds this many times more records than live keys (and > 1000)

Key = tuple[str, uuid.UUID, int]
Snapshot = tuple[int, int, int, list[tuple[int, int, int, int]]]  # snapshot epoch, state epoch, start, batches


def directory(data_dir: str, node_id: int = 0) -> str:
    """Kafka's topic name; another node (a worker) sharing the data dir keeps its own."""
    return os.path.join(data_dir, "__share_group_state-0" + (f".node{node_id}" if node_id else ""))


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
    def __init__(self, data_dir: str, node_id: int = 0) -> None:
        self.directory = directory(data_dir, node_id)
        self.path = os.path.join(self.directory, SEGMENT)
        self.next_offset = 0
        self.records = 0  # records in the segment
        self.live: dict[Key, Snapshot] = {}

    def load(self) -> dict[Key, Snapshot]:
        """Replay the segment: the last snapshot per key (a tombstone removes it); a torn tail is cut."""
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
        if end < len(data):
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
        with open(tmp, "wb") as f:
            if encoded:
                f.write(build_batch(encoded, 0, now_ms))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.directory)
        self.next_offset = self.records = len(encoded)
