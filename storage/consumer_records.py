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
record type, the classic ones through storage.records: the log uses these. The classes, readers and
writers are generated from Kafka's schemas (storage/generated_records.py, by storage/codegen.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Union

from . import generated_records as generated
from . import generated_streams_records as generated_streams
from . import records
from .generated_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from .records import CorruptRecord, Record
from .share_records import ShareGroupKey
from .streams_records import StreamsGroupKey
from .wire import Reader

__all__ = ["ClassicMemberMetadata", "ClassicProtocol", "ConsumerGroupCurrentMemberAssignmentKey",
           "ConsumerGroupCurrentMemberAssignmentValue", "ConsumerGroupMemberMetadataKey",
           "ConsumerGroupMemberMetadataValue", "ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue",
           "ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue",
           "ConsumerGroupRegularExpressionKey", "ConsumerGroupRegularExpressionValue",
           "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue",
           "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue",
           "PartitionMetadata", "TopicMetadata", "TopicPartitions", "ConsumerGroupKey", "ConsumerGroupValue",
           "topic_partitions", "assignment_of", "encode_key", "encode_value", "decode_key", "decode_value", "decode"]

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16

ConsumerGroupKey = Union[ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMemberMetadataKey,
                         ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                         ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupRegularExpressionKey]

ConsumerGroupValue = Union[ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue,
                           ConsumerGroupMemberMetadataValue, ConsumerGroupTargetAssignmentMetadataValue,
                           ConsumerGroupTargetAssignmentMemberValue, ConsumerGroupCurrentMemberAssignmentValue,
                           ConsumerGroupRegularExpressionValue, None]

# the share-group and streams-group records (storage/share_records.py, storage/streams_records.py)
# share this framing and these tables
_GENERATED = (generated, generated_streams)
_KEY_TYPES: dict[type, int] = {cls: m.KEY_TYPES[cls] for m in _GENERATED for cls in m.KEY_TYPES
                               if cls in ConsumerGroupKey.__args__ + ShareGroupKey.__args__ + StreamsGroupKey.__args__}
_KEY_CLASSES = {key_type: cls for cls, key_type in _KEY_TYPES.items()}
_KEY_READERS = {key_type: m.KEY_READERS[key_type] for m in _GENERATED for key_type in m.KEY_READERS
                if key_type in _KEY_CLASSES}
_KEY_WRITERS = {cls: m.KEY_WRITERS[cls] for m in _GENERATED for cls in m.KEY_WRITERS if cls in _KEY_TYPES}
_VALUE_CLASSES = {cls: m.VALUE_CLASSES[cls] for m in _GENERATED for cls in m.VALUE_CLASSES if cls in _KEY_TYPES}
_VALUE_WRITERS = {value: m.VALUE_WRITERS[value] for m in _GENERATED for value in m.VALUE_WRITERS
                  if value in _VALUE_CLASSES.values()}
_VALUE_VERSIONS = {value: m.VALUE_VERSIONS[value] for m in _GENERATED for value in m.VALUE_VERSIONS}
_VALUE_READERS = {cls: m.VALUE_READERS[cls] for m in _GENERATED for cls in m.VALUE_READERS if cls in _KEY_TYPES}


def topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> tuple[TopicPartitions, ...]:
    """An assignment as the records carry it: topics by id, partitions ascending, empty topics left out."""
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def assignment_of(entries: Iterable[TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    return {e.topic_id: frozenset(e.partitions) for e in entries}


def encode_key(key: records.Key | ConsumerGroupKey) -> bytes:
    """Every key type this server writes: the consumer-group ones here, the classic ones in records."""
    if type(key) not in _KEY_TYPES:
        return records.encode_key(key)
    return _KEY_WRITERS[type(key)](key)


def encode_value(value) -> bytes | None:
    if value is None:
        return None
    write = _VALUE_WRITERS.get(type(value))
    if write is not None:
        return write(value, 0)  # every consumer-, share- and streams-group value has version 0 only
    if isinstance(value, records.OffsetCommitValue | records.GroupMetadataValue):
        return records.encode_value(value)
    raise TypeError(f"not a consumer-group record value: {type(value).__name__}")


def _classic(key: bytes) -> bool:
    """Whether a key's int16 type is a classic one (0-2, most records of a log): records decodes those."""
    return key[:1] == b"\x00" and key[1:2] <= b"\x02"


def decode_key(data: bytes) -> records.Key | ConsumerGroupKey:
    """Every key type this server knows: the consumer-group ones here, the classic ones in records."""
    if _classic(data):
        return records.decode_key(data)
    r = Reader(data)
    read = _KEY_READERS.get(r.i16())
    if read is None:
        return records.decode_key(data)
    return read(r)


def decode_value(key, data: bytes | None):
    if type(key) not in _KEY_TYPES:
        return records.decode_value(key, data)
    if data is None:
        return None
    r = Reader(data)
    version = r.i16()
    if version not in _VALUE_VERSIONS[_VALUE_CLASSES[type(key)]]:
        raise CorruptRecord(f"unknown value version {version} for record type {_KEY_TYPES[type(key)]}")
    return _VALUE_READERS[type(key)](r, version)


def decode(key: bytes, value: bytes | None, keys: records.KeyCache | None = None) -> Record:
    """`keys`: see records.KeyCache (a loader passes one per batch)."""
    if key[:1] == b"\x00" and key[1:2] <= b"\x02":  # _classic(key), inline: a load calls this per record
        return records.decode(key, value, keys)
    k = decode_key(key)
    return Record(k, decode_value(k, value))
