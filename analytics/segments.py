"""The offsets log of a data directory as rows: which segments there are, and the decoded records
of one segment. Pure Python (no pyspark, no pyarrow), so it is what the Spark data source runs
on each executor and what tests can call directly.

The bytes are read exactly as the server reads them: `storage.scanner.scan` checks every
batch's CRC, steps over corrupt bytes to the next valid batch and applies the torn-tail rule;
`storage.records.decode_key`/`decode_value` decode keys and values (each distinct key once per
segment; `storage.log.records_of` is not used because it drops the record timestamps). As the
server does:

- bad bytes at the end of the *last* segment of a partition are a torn tail (a write in progress
  on a live directory, or a crash): the records before them are read;
- corrupt bytes elsewhere are stepped over, the valid batches around them are read, and
  `ReadStats.corrupt` says what was skipped (the server loads those batches too);
- a segment that vanished between listing and reading was removed by compaction (every record in
  it was superseded, so nothing the compacted view needs is lost): it is skipped;
- `*.log.cleaned` files (a compaction's rewrite before its rename) are never listed.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterator

from groupd.protocol.consumer import BadConsumerProtocol, assigned_partitions, subscribed_topics
from groupd.storage.consumer_records import (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    decode_key,
    decode_value,
)
from groupd.storage.inspect import partitions as offsets_partitions
from groupd.storage.log import list_segments, partition_dir
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from groupd.storage.scanner import scan

# record kinds
OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
TOMBSTONE = "tombstone"  # a null value: the key's topic is set for an offset key, null for a group key
CONSUMER_GROUP_EPOCH = "consumer_group_epoch"  # a consumer group's (KIP-848) epoch record: `generation` = epoch
CONSUMER_MEMBER = "consumer_member"  # a consumer group member's metadata: `members` holds that one member
UNKNOWN = "unknown"      # a record type not read here (KIP-848 assignments, share groups): counted, not decoded

# one row per record, in this order (analytics.source gives the Spark types)
COLUMNS = (
    "offsets_partition",  # int: the __consumer_offsets partition
    "log_offset",         # bigint: the record's offset in that partition
    "timestamp",          # timestamp: the record's timestamp (when the server appended its batch)
    "kind",               # string: offset_commit | group_metadata | tombstone | unknown
    "key_type",           # smallint: the key's record type (0/1 offset commit, 2 group metadata, …)
    "group",              # string
    "topic",              # string (offset keys)
    "partition",          # int (offset keys)
    "committed_offset",   # bigint
    "leader_epoch",       # int, -1 = none
    "metadata",           # string: the commit's metadata
    "commit_timestamp",   # bigint ms
    "expire_timestamp",   # bigint ms, -1 = none (only OffsetCommitValue v1 carries one)
    "generation",         # int: a classic group's generation, a consumer group's epoch
    "protocol_type",      # string ("" = none)
    "protocol",           # string: the selected protocol's name (e.g. range), null when none
    "leader",             # string: the leader's member id
    "state_timestamp",    # bigint ms, -1 = unknown: when the group entered its current state
    "members",            # array<struct>: see MEMBER_FIELDS (a consumer_member row, or a tombstone of a
                          # member's metadata: that one member, only its member id for a tombstone)
)
MEMBER_FIELDS = (
    "member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout", "session_timeout",
    "subscription",        # array<string>: the subscribed topics (consumer protocol), else null
    "assignment",          # array<struct<topic, partitions array<int>>> (consumer protocol), else null
    "subscription_bytes",  # binary: the member's metadata for the group's protocol, as stored
    "assignment_bytes",    # binary: the member's assignment, as stored
)
_KEY_TYPE = struct.Struct(">h")


@dataclasses.dataclass(frozen=True, slots=True)
class Segment:
    partition: int   # the __consumer_offsets partition
    base_offset: int
    path: str
    last: bool       # the partition's active segment when listed: a torn tail here is expected
    size: int = 0    # bytes when listed (0: nothing to read; every partition the server loads has one)


def list_data_dir(data_dir: str) -> list[Segment]:
    """Every segment of every `__consumer_offsets-<p>` directory, partition by partition, oldest
    first, with its size. Raises FileNotFoundError / NotADirectoryError for a path that is not a
    directory."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"{data_dir}: no such directory")
    out = []
    for p in offsets_partitions(data_dir):
        segments = list_segments(partition_dir(data_dir, p))
        for i, (base, path) in enumerate(segments):
            try:
                size = os.path.getsize(path)
            except FileNotFoundError:  # compacted away since the listing: all of it was superseded
                continue
            out.append(Segment(p, base, path, i == len(segments) - 1, size))
    return out


def with_records(segments: list[Segment]) -> list[Segment]:
    """The segments that hold bytes: the server creates an empty active segment for every
    partition it loads, so a data dir of 50 partitions and a few groups is mostly empty files."""
    return [s for s in segments if s.size > 0]


@dataclasses.dataclass(slots=True)
class ReadStats:
    records: int = 0
    torn_tail: str | None = None  # why reading stopped early in a last segment
    corrupt: list[str] = dataclasses.field(default_factory=list)  # corrupt ranges stepped over
    vanished: bool = False        # the file was gone when it was opened


def read_segment(segment: Segment, stats: ReadStats | None = None) -> Iterator[tuple]:
    """One tuple per record of `segment` (COLUMNS order), in log order."""
    stats = stats if stats is not None else ReadStats()
    try:
        with open(segment.path, "rb") as f:
            data = f.read()
    except FileNotFoundError:  # compaction removed it after the listing: all of it was superseded
        stats.vanished = True
        return
    found = scan(data, path=segment.path)
    del data
    torn = found.torn_tail(segment.last)
    if torn is not None:
        stats.torn_tail = f"{segment.path}: stopped at byte {torn.position} of {found.size} ({torn.reason})"
    stats.corrupt += [d.describe() for d in found.corruption(segment.last)]
    p = segment.partition
    keys: dict[bytes, tuple] = {}  # a group commits the same keys over and over: decode each once
    for b in found.batches:
        if b.batch.is_control_batch:  # a transaction's marker: no offsets-log record type
            for r in b.batch:
                stats.records += 1
                yield (p, r.offset, r.timestamp, UNKNOWN, None) + (None,) * 14
            continue
        for r in b.batch:
            stats.records += 1
            raw = r.key
            raw = b"" if raw is None else bytes(raw)
            key = keys.get(raw)
            if key is None:
                key = _key(raw)
                if len(keys) < _KEY_CACHE:
                    keys[raw] = key
            yield _row(p, r.offset, r.timestamp, key, r.value)


_KEY_CACHE = 100_000
_UNKNOWN = object()


def _key(raw: bytes) -> tuple:
    """(decoded key or _UNKNOWN, key type)."""
    key_type = _KEY_TYPE.unpack_from(raw)[0] if len(raw) >= 2 else None
    try:
        k = decode_key(raw)
    except Exception:  # unknown key types (share groups, ...), skipped by the loader too
        return _UNKNOWN, key_type
    if key_type not in _READ_TYPES:
        return _UNKNOWN, key_type  # KIP-848 records the tables do not use (assignments, regexes, ...)
    return k, key_type


_READ_TYPES = (0, 1, 2, 3, 5)  # offset commits, classic groups, consumer group epochs and members


def _row(p: int, offset: int, timestamp: int, key: tuple, value) -> tuple:
    k, key_type = key
    if k is _UNKNOWN:
        return (p, offset, timestamp, UNKNOWN, key_type) + (None,) * 14
    try:
        v = decode_value(k, None if value is None else bytes(value))
    except Exception:  # a value the codec cannot read: the server's loader skips it too
        return (p, offset, timestamp, UNKNOWN, key_type) + (None,) * 14
    if isinstance(k, OffsetCommitKey):
        if isinstance(v, OffsetCommitValue):
            return (p, offset, timestamp, OFFSET_COMMIT, key_type, k.group, k.topic, k.partition, v.offset,
                    v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp,
                    None, None, None, None, None, None)
        return (p, offset, timestamp, TOMBSTONE, key_type, k.group, k.topic, k.partition) + (None,) * 11
    if isinstance(k, (ConsumerGroupMetadataKey, ConsumerGroupMemberMetadataKey)):
        return _consumer_row(p, offset, timestamp, key_type, k, v)
    assert isinstance(k, GroupMetadataKey)
    if v is None:
        return (p, offset, timestamp, TOMBSTONE, key_type, k.group) + (None,) * 13
    assert isinstance(v, GroupMetadataValue)
    consumer = v.protocol_type == "consumer"
    members = [_member(m, consumer) for m in v.members]
    return (p, offset, timestamp, GROUP_METADATA, key_type, k.group, None, None, None, None, None, None, None,
            v.generation, v.protocol_type, v.protocol, v.leader, v.current_state_timestamp, members)


def _consumer_row(p: int, offset: int, timestamp: int, key_type: int, k, v) -> tuple:
    """A consumer group's epoch record, or one member's metadata (a tombstone: the member left)."""
    if isinstance(k, ConsumerGroupMetadataKey):
        if v is None:
            return (p, offset, timestamp, TOMBSTONE, key_type, k.group_id) + (None,) * 13
        assert isinstance(v, ConsumerGroupMetadataValue)
        return (p, offset, timestamp, CONSUMER_GROUP_EPOCH, key_type, k.group_id) + (None,) * 7 + (
            v.epoch, "consumer", None, None, None, None)
    member = dict.fromkeys(MEMBER_FIELDS)
    member["member_id"] = k.member_id
    if v is not None:
        assert isinstance(v, ConsumerGroupMemberMetadataValue)
        member.update(group_instance_id=v.instance_id, client_id=v.client_id, client_host=v.client_host,
                      rebalance_timeout=v.rebalance_timeout_ms, subscription=list(v.subscribed_topic_names))
    kind = CONSUMER_MEMBER if v is not None else TOMBSTONE
    return (p, offset, timestamp, kind, key_type, k.group_id) + (None,) * 12 + ([member],)


def _member(m, consumer: bool) -> dict:
    subscription = assignment = None
    if consumer:
        try:
            subscription = subscribed_topics(m.subscription)
        except BadConsumerProtocol:
            pass
        try:
            assignment = [{"topic": t, "partitions": ps} for t, ps in assigned_partitions(m.assignment).items()]
        except BadConsumerProtocol:
            pass
    return {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
            "session_timeout": m.session_timeout, "subscription": subscription, "assignment": assignment,
            "subscription_bytes": m.subscription, "assignment_bytes": m.assignment}
