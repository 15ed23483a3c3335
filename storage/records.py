"""The records of `__consumer_offsets`, byte-identical to Kafka's (spec §12.2–12.5).

key   = int16 record type + key struct   (0/1 OffsetCommitKey, 2 GroupMetadataKey)
value = int16 version + value struct, or None for a tombstone

Writers use OffsetCommitKey type 1, OffsetCommitValue v3 (v1 when the commit carried an expire
timestamp) and GroupMetadataValue v3, as Kafka 4 does; readers accept every version (0–4; v4 is
flexible). Other key types (KIP-848 and share groups) are reported as unknown so loaders can skip
them with a warning.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Union

from .offset_value import BARE as _BARE, OffsetCommitValue, is_v3_body as _is_v3_body
from .offset_value import value_from_body as _value_from_body

OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2


# Record and OffsetCommitKey are not `frozen` (nothing mutates them; they hash as values): a frozen
# dataclass sets each field through object.__setattr__, which made building them a fifth of loading
# a log (one key, value and record per offset).
@dataclasses.dataclass(unsafe_hash=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


_KEY_HEAD = struct.Struct(">hh")  # key type, group length
_V3_HEAD = struct.Struct(">hqih")  # version 3, offset, leader epoch, metadata length
_V1_HEAD = struct.Struct(">hqh")  # version 1, offset, metadata length
_LENGTH = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
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


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclasses.dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str  # "" = none
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1 = unknown
    members: tuple[MemberMetadata, ...]


Key = Union[OffsetCommitKey, GroupMetadataKey]
Value = Union[OffsetCommitValue, GroupMetadataValue, None]


@dataclasses.dataclass(unsafe_hash=True, slots=True)
class Record:
    key: Key
    value: Value  # None = tombstone


class UnknownRecordType(Exception):
    def __init__(self, key_type: int) -> None:
        super().__init__(f"unknown record key type {key_type}")
        self.key_type = key_type


class CorruptRecord(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Writing


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _nstr(s: str | None) -> bytes:
    return b"\xff\xff" if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b




def encode_key(key: Key) -> bytes:
    # one join of pre-compiled packs: an offset commit encodes a key and a value per partition
    group = key.group.encode()
    if isinstance(key, OffsetCommitKey):
        topic = key.topic.encode()
        return b"".join((_KEY_HEAD.pack(OFFSET_COMMIT_KEY_TYPE, len(group)), group, _LENGTH.pack(len(topic)), topic,
                         _INT32.pack(key.partition)))
    return _KEY_HEAD.pack(GROUP_METADATA_KEY_TYPE, len(group)) + group


_VERSION_3 = b"\x00\x03"


def encode_value(value: Value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        if len(value) == _BARE or _is_v3_body(value):  # the value is the v3 record's body
            return _VERSION_3 + value
        offset, epoch, metadata, commit, expire = value.fields()
        metadata = metadata.encode()  # refuses what UTF-8 cannot hold
        if expire != -1:  # v1: offset, metadata, commit ts, expire ts
            return b"".join((_V1_HEAD.pack(1, offset, len(metadata)), metadata, _INT64X2.pack(commit, expire)))
        return b"".join((_V3_HEAD.pack(3, offset, epoch, len(metadata)), metadata, _INT64.pack(commit)))
    parts = [struct.pack(">h", 3), _str(value.protocol_type), struct.pack(">i", value.generation),
             _nstr(value.protocol), _nstr(value.leader), struct.pack(">q", value.current_state_timestamp),
             struct.pack(">i", len(value.members))]
    for m in value.members:
        parts += [_str(m.member_id), _nstr(m.group_instance_id), _str(m.client_id), _str(m.client_host),
                  struct.pack(">ii", m.rebalance_timeout, m.session_timeout), _bytes(m.subscription),
                  _bytes(m.assignment)]
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# Reading (every version)


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def _take(self, fmt: str):
        try:
            (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error:
            raise CorruptRecord("record ends early") from None
        self.pos += struct.calcsize(fmt)
        return v

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self._take(">B")
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def _length(self, wide: str) -> int:
        return self.uvarint() - 1 if self.flexible else self._take(wide)

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecord("field runs past the end of the record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def nstr(self) -> str | None:
        n = self._length(">h")
        return None if n < 0 else self.raw(n).decode()

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise CorruptRecord("null in a non-nullable string")
        return s

    def bytes(self) -> bytes:
        n = self._length(">i")
        return b"" if n < 0 else self.raw(n)

    def array_len(self) -> int:
        return self._length(">i")

    def tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.raw(self.uvarint())


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
    if key_type in (0, 1):
        return OffsetCommitKey(r.str(), r.str(), r.i32())
    if key_type == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(r.str())
    raise UnknownRecordType(key_type)


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
    if not 0 <= version <= 4:
        raise CorruptRecord(f"unknown value version {version}")
    r.flexible = version >= 4
    if isinstance(key, OffsetCommitKey):
        offset = r.i64()
        epoch = r.i32() if version >= 3 else -1
        metadata = r.str()
        commit_ts = r.i64()
        expire_ts = r.i64() if version == 1 else -1
        r.tags()
        return OffsetCommitValue(offset, epoch, metadata, commit_ts, expire_ts)
    protocol_type, generation = r.str(), r.i32()
    protocol, leader = r.nstr(), r.nstr()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.str()
        instance_id = r.nstr() if version >= 3 else None
        client_id, client_host = r.str(), r.str()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription, assignment = r.bytes(), r.bytes()
        r.tags()
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                      session_timeout, subscription, assignment))
    r.tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


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
