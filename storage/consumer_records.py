"""The consumer-group (KIP-848) records of `__consumer_offsets`, byte-identical to Kafka's (spec §10).

key   = int16 record type + key struct (classic, non-flexible strings)
value = int16 version 0 + flexible value struct (compact strings and arrays, a tagged-field
        section ending every struct), or None for a tombstone

    3 ConsumerGroupMetadata              6 ConsumerGroupTargetAssignmentMetadata
    4 ConsumerGroupPartitionMetadata     7 ConsumerGroupTargetAssignmentMember
    5 ConsumerGroupMemberMetadata        8 ConsumerGroupCurrentMemberAssignment
   16 ConsumerGroupRegularExpression

Tagged fields this module knows: ClassicMemberMetadata (type 5, tag 0) and MetadataHash (type 3,
tag 0, Kafka 4.1). Others (later Kafka's AssignmentEpochs, AssignmentTimestamp, ...) are skipped.

`encode_key`/`encode_value` and `decode_key`/`decode_value`/`decode` here write and read every
record type, the classic ones through storage.records: the log uses these.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Union

from . import records
from .records import CorruptRecord, Record, _Reader, _str

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16


# ---------------------------------------------------------------------------------------------
# Keys


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str


ConsumerGroupKey = Union[ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMemberMetadataKey,
                         ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                         ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupRegularExpressionKey]

_KEY_TYPES: dict[type, int] = {
    ConsumerGroupMetadataKey: CONSUMER_GROUP_METADATA,
    ConsumerGroupPartitionMetadataKey: CONSUMER_GROUP_PARTITION_METADATA,
    ConsumerGroupMemberMetadataKey: CONSUMER_GROUP_MEMBER_METADATA,
    ConsumerGroupTargetAssignmentMetadataKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupTargetAssignmentMemberKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    ConsumerGroupCurrentMemberAssignmentKey: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    ConsumerGroupRegularExpressionKey: CONSUMER_GROUP_REGULAR_EXPRESSION,
}
_KEY_CLASSES = {key_type: cls for cls, key_type in _KEY_TYPES.items()}


# ---------------------------------------------------------------------------------------------
# Values


@dataclasses.dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


def topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> tuple[TopicPartitions, ...]:
    """An assignment as the records carry it: topics by id, partitions ascending, empty topics left out."""
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def assignment_of(entries: Iterable[TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    return {e.topic_id: frozenset(e.partitions) for e in entries}


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int  # the group epoch
    metadata_hash: int = 0  # tagged (Kafka 4.1, KIP-1101); 0 = not written


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    racks: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionMetadata, ...] = ()  # Kafka 4.0 writes it empty


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Only for classic-protocol members living in a consumer group."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None  # tagged field 0


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's int8 value (groupd.coordinator.core.consumer.reconciliation)
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int  # the metadata version the regex was resolved against
    timestamp: int  # when it was resolved, ms


ConsumerGroupValue = Union[ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue,
                           ConsumerGroupMemberMetadataValue, ConsumerGroupTargetAssignmentMetadataValue,
                           ConsumerGroupTargetAssignmentMemberValue, ConsumerGroupCurrentMemberAssignmentValue,
                           ConsumerGroupRegularExpressionValue, None]


# ---------------------------------------------------------------------------------------------
# Writing: flexible-version primitives


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstr(s: str) -> bytes:
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _cnstr(s: str | None) -> bytes:
    return b"\x00" if s is None else _cstr(s)


def _cbytes(b: bytes) -> bytes:
    return _uvarint(len(b) + 1) + b


def _carray(items, write: Callable) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(write(item) for item in items)


def _int32s(values: Iterable[int]) -> bytes:
    values = tuple(values)
    return _uvarint(len(values) + 1) + struct.pack(f">{len(values)}i", *values)


def _tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section; every struct ends with one (count 0 when nothing is tagged)."""
    return _uvarint(len(fields)) + b"".join(_uvarint(tag) + _uvarint(len(data)) + data for tag, data in fields)


def _topic_partitions(e: TopicPartitions) -> bytes:
    return e.topic_id.bytes + _int32s(e.partitions) + _tags()


def _partition_metadata(m: PartitionMetadata) -> bytes:
    return struct.pack(">i", m.partition) + _carray(m.racks, _cstr) + _tags()


def _topic_metadata(t: TopicMetadata) -> bytes:
    return (t.topic_id.bytes + _cstr(t.topic_name) + struct.pack(">i", t.num_partitions)
            + _carray(t.partition_metadata, _partition_metadata) + _tags())


def _classic_protocol(p: ClassicProtocol) -> bytes:
    return _cstr(p.name) + _cbytes(p.metadata) + _tags()


def _classic_member_metadata(m: ClassicMemberMetadata) -> bytes:
    # a nullable struct in a tagged field: a varint 1 (present) before the struct itself
    return _uvarint(1) + struct.pack(">i", m.session_timeout_ms) + _carray(m.supported_protocols, _classic_protocol) + _tags()


def encode_key(key: records.Key | ConsumerGroupKey) -> bytes:
    """Every key type this server writes: the consumer-group ones here, the classic ones in records."""
    if type(key) not in _KEY_TYPES:
        return records.encode_key(key)
    # every key field is a (non-flexible) string: GroupId, then MemberId or RegularExpression
    return struct.pack(">h", _KEY_TYPES[type(key)]) + b"".join(_str(f) for f in dataclasses.astuple(key))


def encode_value(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, records.OffsetCommitValue | records.GroupMetadataValue):
        return records.encode_value(value)
    head = struct.pack(">h", 0)
    if isinstance(value, ConsumerGroupMetadataValue):
        hashed = [(0, struct.pack(">q", value.metadata_hash))] if value.metadata_hash != 0 else []
        return head + struct.pack(">i", value.epoch) + _tags(*hashed)
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        return head + _carray(value.topics, _topic_metadata) + _tags()
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        classic = value.classic_member_metadata
        tagged = [(0, _classic_member_metadata(classic))] if classic is not None else []
        return (head + _cnstr(value.instance_id) + _cnstr(value.rack_id) + _cstr(value.client_id)
                + _cstr(value.client_host) + _carray(value.subscribed_topic_names, _cstr)
                + _cnstr(value.subscribed_topic_regex) + struct.pack(">i", value.rebalance_timeout_ms)
                + _cnstr(value.server_assignor) + _tags(*tagged))
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        return head + struct.pack(">i", value.assignment_epoch) + _tags()
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return head + _carray(value.topic_partitions, _topic_partitions) + _tags()
    if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        return (head + struct.pack(">iib", value.member_epoch, value.previous_member_epoch, value.state)
                + _carray(value.assigned_partitions, _topic_partitions)
                + _carray(value.partitions_pending_revocation, _topic_partitions) + _tags())
    if isinstance(value, ConsumerGroupRegularExpressionValue):
        return (head + _carray(value.topics, _cstr) + struct.pack(">qq", value.version, value.timestamp) + _tags())
    raise TypeError(f"not a consumer-group record value: {type(value).__name__}")


# ---------------------------------------------------------------------------------------------
# Reading


def _i8(r: _Reader) -> int:
    return struct.unpack(">b", r.raw(1))[0]


def _uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=r.raw(16))


def _array(r: _Reader, read: Callable[[_Reader], object]) -> tuple:
    n = r.array_len()
    if n < 0:
        raise CorruptRecord("null in a non-nullable array")
    if n > len(r.buf) - r.pos:  # every element takes at least a byte: a count past that is corrupt
        raise CorruptRecord("array count runs past the end of the record")
    return tuple(read(r) for _ in range(n))


def _read_int32s(r: _Reader) -> tuple[int, ...]:
    n = r.array_len()
    if n < 0:
        raise CorruptRecord("null in a non-nullable array")
    data = r.raw(4 * n)
    return struct.unpack(f">{n}i", data)


def _read_tags(r: _Reader, known: Mapping[int, Callable[[_Reader], object]] | None = None) -> dict[int, object]:
    """The tagged-field section: known tags decoded from exactly their bytes, the others skipped."""
    found: dict[int, object] = {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = r.raw(size)
        if known and tag in known:
            sub = _Reader(data, flexible=True)
            found[tag] = known[tag](sub)
    return found


def _read_topic_partitions(r: _Reader) -> TopicPartitions:
    topic_id, partitions = _uuid(r), _read_int32s(r)
    _read_tags(r)
    return TopicPartitions(topic_id, partitions)


def _read_partition_metadata(r: _Reader) -> PartitionMetadata:
    partition, racks = r.i32(), _array(r, _Reader.str)
    _read_tags(r)
    return PartitionMetadata(partition, racks)


def _read_topic_metadata(r: _Reader) -> TopicMetadata:
    topic_id, name, n = _uuid(r), r.str(), r.i32()
    partition_metadata = _array(r, _read_partition_metadata)
    _read_tags(r)
    return TopicMetadata(topic_id, name, n, partition_metadata)


def _read_classic_protocol(r: _Reader) -> ClassicProtocol:
    name, metadata = r.str(), r.bytes()
    _read_tags(r)
    return ClassicProtocol(name, metadata)


def _read_classic_member_metadata(r: _Reader) -> ClassicMemberMetadata | None:
    if r.uvarint() == 0:  # the null marker of a nullable struct in a tagged field
        return None
    session_timeout = r.i32()
    protocols = _array(r, _read_classic_protocol)
    _read_tags(r)
    return ClassicMemberMetadata(session_timeout, protocols)


def _read_value(key: ConsumerGroupKey, r: _Reader) -> ConsumerGroupValue:
    if isinstance(key, ConsumerGroupMetadataKey):
        epoch = r.i32()
        tags = _read_tags(r, {0: _Reader.i64})
        return ConsumerGroupMetadataValue(epoch, tags.get(0, 0))
    if isinstance(key, ConsumerGroupPartitionMetadataKey):
        topics = _array(r, _read_topic_metadata)
        _read_tags(r)
        return ConsumerGroupPartitionMetadataValue(topics)
    if isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id, rack_id, client_id, client_host = r.nstr(), r.nstr(), r.str(), r.str()
        names = _array(r, _Reader.str)
        regex, rebalance_timeout, assignor = r.nstr(), r.i32(), r.nstr()
        tags = _read_tags(r, {0: _read_classic_member_metadata})
        return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex,
                                                rebalance_timeout, assignor, tags.get(0))
    if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        epoch = r.i32()
        _read_tags(r)
        return ConsumerGroupTargetAssignmentMetadataValue(epoch)
    if isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        entries = _array(r, _read_topic_partitions)
        _read_tags(r)
        return ConsumerGroupTargetAssignmentMemberValue(entries)
    if isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        epoch, previous, state = r.i32(), r.i32(), _i8(r)
        assigned, pending = _array(r, _read_topic_partitions), _array(r, _read_topic_partitions)
        _read_tags(r)
        return ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, pending)
    topics = _array(r, _Reader.str)
    version, timestamp = r.i64(), r.i64()
    _read_tags(r)
    return ConsumerGroupRegularExpressionValue(topics, version, timestamp)


def _classic(key: bytes) -> bool:
    """Whether a key's int16 type is a classic one (0-2, most records of a log): records decodes those."""
    return key[:1] == b"\x00" and key[1:2] <= b"\x02"


def decode_key(data: bytes) -> records.Key | ConsumerGroupKey:
    """Every key type this server knows: the consumer-group ones here, the classic ones in records."""
    if _classic(data):
        return records.decode_key(data)
    r = _Reader(data)
    cls = _KEY_CLASSES.get(r.i16())
    if cls is None:
        return records.decode_key(data)
    return cls(*(r.str() for _ in dataclasses.fields(cls)))


def decode_value(key, data: bytes | None):
    if type(key) not in _KEY_TYPES:
        return records.decode_value(key, data)
    if data is None:
        return None
    r = _Reader(data, flexible=True)
    version = r.i16()
    if version != 0:
        raise CorruptRecord(f"unknown value version {version} for record type {_KEY_TYPES[type(key)]}")
    return _read_value(key, r)


def decode(key: bytes, value: bytes | None, keys: records.KeyCache | None = None) -> Record:
    """`keys`: see records.KeyCache (a loader passes one per batch)."""
    if key[:1] == b"\x00" and key[1:2] <= b"\x02":  # _classic(key), inline: a load calls this per record
        return records.decode(key, value, keys)
    k = decode_key(key)
    return Record(k, decode_value(k, value))
