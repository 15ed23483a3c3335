"""The records of `__consumer_offsets`, byte-identical to Kafka's (spec §12.2–12.5).

key   = int16 record type + key struct   (0/1 OffsetCommitKey, 2 GroupMetadataKey)
value = int16 version + value struct, or None for a tombstone

Writers use OffsetCommitKey type 1, OffsetCommitValue v3 (v1 when the commit carried an expire
timestamp) and GroupMetadataValue v3, as Kafka 4 does; readers accept every version (0–4; v4 is
flexible). Other key types (KIP-848 and share groups) are reported as unknown so loaders can skip
them with a warning.

The classes and the field-by-field readers and writers are generated from Kafka's schemas
(storage/generated_records.py, by storage/codegen.py); this module picks the versions groupd writes
and keeps the precompiled paths of the commit and the load (an offset key and value in a few packs
and unpacks, a v3 value held as its own body: storage/offset_value.py).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Union

from . import generated_records as generated
from .generated_records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey
from .offset_value import BARE as _BARE
from .offset_value import OffsetCommitValue
from .offset_value import is_v3_body as _is_v3_body
from .offset_value import value_from_body as _value_from_body
from .wire import CorruptRecord, UnknownRecordType
from .wire import Reader as _Reader

__all__ = ["OFFSET_COMMIT_KEY_TYPE", "GROUP_METADATA_KEY_TYPE", "OffsetCommitKey", "OffsetCommitValue",
           "GroupMetadataKey", "GroupMetadataValue", "MemberMetadata", "Key", "Value", "Record",
           "UnknownRecordType", "CorruptRecord", "KeyCache", "encode_key", "encode_value", "decode_key",
           "decode_value", "decode"]

OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2


_KEY_HEAD = struct.Struct(">hh")  # key type, group length
_V1_HEAD = struct.Struct(">hqh")  # version 1, offset, metadata length
_LENGTH = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64X2 = struct.Struct(">qq")


def _v3_value(data: bytes) -> OffsetCommitValue | None:
    """A v3 value as it is stored: its body (past the version) is the value, when it is exactly
    one well-formed v3 body (else None: the field-by-field reader decodes or refuses it)."""
    n = len(data)
    if n == 24:  # no metadata: what most clients commit
        return _value_from_body(data[2:]) if data[14:16] == b"\x00\x00" else None
    if n > 24:
        length = _LENGTH.unpack_from(data, 14)[0]
        if 24 + length == n:
            data[16:16 + length].decode()  # the reader refuses metadata that is not UTF-8
            return _value_from_body(data[2:])
    return None


Key = Union[OffsetCommitKey, GroupMetadataKey]
Value = Union[OffsetCommitValue, GroupMetadataValue, None]


@dataclasses.dataclass(unsafe_hash=True, slots=True)
class Record:
    key: Key
    value: Value  # None = tombstone


# ---------------------------------------------------------------------------------------------
# Writing


def encode_key(key: Key) -> bytes:
    # one join of pre-compiled packs: an offset commit encodes a key and a value per partition
    group = key.group.encode()
    if isinstance(key, OffsetCommitKey):
        topic = key.topic.encode()
        return b"".join((_KEY_HEAD.pack(OFFSET_COMMIT_KEY_TYPE, len(group)), group, _LENGTH.pack(len(topic)), topic,
                         _INT32.pack(key.partition)))
    return _KEY_HEAD.pack(GROUP_METADATA_KEY_TYPE, len(group)) + group


_VERSION_3 = b"\x00\x03"
_write_offset = generated.VALUE_WRITERS[OffsetCommitValue]
_write_group = generated.VALUE_WRITERS[GroupMetadataValue]


def encode_value(value: Value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        if len(value) == _BARE or _is_v3_body(value):  # the value is the v3 record's body
            return _VERSION_3 + value
        # v1 (no leader epoch) only for an expire timestamp; the writer refuses metadata that UTF-8
        # or an int16 length cannot hold
        return _write_offset(value, 3 if value.expire_timestamp == -1 else 1)
    return _write_group(value, 3)


# ---------------------------------------------------------------------------------------------
# Reading (every version)


def _offset_key(data: bytes) -> OffsetCommitKey | None:
    """The common key (type 0/1 with well-formed strings) in a few precompiled unpacks, or None
    for the field-by-field reader to decode (or to report what is wrong with it)."""
    n = len(data)
    if n < 10:
        return None
    group_end = 4 + _KEY_HEAD.unpack_from(data)[1]
    if group_end < 4 or group_end + 6 > n:
        return None
    topic_end = group_end + 2 + _LENGTH.unpack_from(data, group_end)[0]
    if topic_end < group_end + 2 or topic_end + 4 > n:
        return None
    return OffsetCommitKey(data[4:group_end].decode(), data[group_end + 2:topic_end].decode(),
                           _INT32.unpack_from(data, topic_end)[0])


_OFFSET_KEY_TYPES = (b"\x00\x01", b"\x00\x00")  # the int16 key types of an offset commit
# the field-by-field readers of the classic records (storage/generated_records.py); other types are unknown here
_CLASSIC_KEYS = {t: generated.KEY_READERS[t] for t in (0, OFFSET_COMMIT_KEY_TYPE, GROUP_METADATA_KEY_TYPE)}
_VALUE_READERS = {cls: (generated.VALUE_READERS[cls], generated.VALUE_VERSIONS[generated.VALUE_CLASSES[cls]])
                  for cls in (OffsetCommitKey, GroupMetadataKey)}


class KeyCache:
    """The offset keys of a run of records (a loader keeps one per batch): a key with the group
    and topic of the one before it (the partitions of one commit sit side by side) reuses its
    strings, and only its partition is read."""

    __slots__ = ("_prefix", "_size", "_group", "_topic")

    def __init__(self) -> None:
        self._prefix, self._size, self._group, self._topic = b"\xff", -1, "", ""

    def offset_key(self, data: bytes) -> OffsetCommitKey | None:
        n = len(data)
        if n == self._size and data.startswith(self._prefix):
            return OffsetCommitKey(self._group, self._topic, _INT32.unpack_from(data, n - 4)[0])
        key = _offset_key(data)
        if key is not None:
            group_end = 4 + _KEY_HEAD.unpack_from(data)[1]
            if group_end + 6 + _LENGTH.unpack_from(data, group_end)[0] == n:  # no bytes after the partition
                self._prefix, self._size, self._group, self._topic = data[:n - 4], n, key.group, key.topic
        return key


def decode_key(data: bytes) -> Key:
    if data[:2] in _OFFSET_KEY_TYPES:  # nearly every record of a log
        key = _offset_key(data)
        if key is not None:
            return key
    r = _Reader(data)
    key_type = r.i16()
    read = _CLASSIC_KEYS.get(key_type)
    if read is None:
        raise UnknownRecordType(key_type)
    return read(r)


def _offset_value(data: bytes) -> OffsetCommitValue | None:
    """The versions Kafka 4 writes (3, and 1 with an expire timestamp) without the field-by-field
    reader, or None for it to decode (or to say what is wrong)."""
    if data[:2] == _VERSION_3:
        return _v3_value(data)
    n = len(data)
    if data[:2] == b"\x00\x01" and n >= 28:
        _, offset, length = _V1_HEAD.unpack_from(data)
        if 0 <= length and 28 + length <= n:
            commit, expire = _INT64X2.unpack_from(data, 12 + length)
            return OffsetCommitValue(offset, -1, data[12:12 + length].decode() if length else "", commit, expire)
    return None


def decode_value(key: Key, data: bytes | None) -> Value:
    if data is None:
        return None
    if type(key) is OffsetCommitKey:
        value = _offset_value(data)
        if value is not None:
            return value
    r = _Reader(data)
    version = r.i16()
    read, versions = _VALUE_READERS[type(key)]
    if version not in versions:
        raise CorruptRecord(f"unknown value version {version}")
    return read(r, version)


def decode(key: bytes, value: bytes | None, keys: KeyCache | None = None) -> Record:
    """`keys`: see KeyCache (a loader passes one per batch)."""
    if key[:2] in _OFFSET_KEY_TYPES:  # the common record straight to its fast paths: a load calls this per record
        k = _offset_key(key) if keys is None else keys.offset_key(key)
        if k is not None:
            if value is None:
                return Record(k, None)
            v = _v3_value(value) if value[:2] == _VERSION_3 else _offset_value(value)
            return Record(k, v if v is not None else decode_value(k, value))
    k = decode_key(key)
    return Record(k, decode_value(k, value))
