"""OffsetCommitValue as memory holds it: one bytes object per committed offset, the body of its v3
record. The generated codec (storage/generated_records.py) builds and reads it through its fields;
storage/records.py writes and reads the v3 body as it is (the fast paths of the commit and the load).
"""

from __future__ import annotations

import functools
import struct

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT64X2 = struct.Struct(">qq")
_BODY = struct.Struct(">qiH")  # offset, leader epoch, metadata length: the head of a v3 value's body
_BODY_BARE = struct.Struct(">qiHq")  # ... without metadata, then the commit timestamp: the whole body
BARE = _BODY_BARE.size  # 22
_LONG_METADATA = 0xFFFF  # in the length field: the real length follows as an uint32 (never durable)
_LENGTH_U = struct.Struct(">H")
_UINT32 = struct.Struct(">I")


class OffsetCommitValue(bytes):
    """A committed offset, held as one bytes object: the body of its v3 value (offset, leader epoch,
    metadata, commit timestamp), then the expire timestamp when there is one. Memory keeps one per
    committed offset: 72 bytes, where a slots object with its offset int took 104; and a v3 value
    read from the log is its own body (`records._v3_value`). Equal when every field is equal."""

    __slots__ = ()

    def __new__(cls, offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                expire_timestamp: int = -1) -> OffsetCommitValue:
        if not metadata and expire_timestamp == -1:  # what most commits carry: one pack
            return bytes.__new__(cls, _BODY_BARE.pack(offset, leader_epoch, 0, commit_timestamp))
        # surrogatepass: a string that UTF-8 refuses is still held (the log writer refuses it, as
        # it refuses metadata past int16, and the write's revert takes it back out of memory)
        m = metadata.encode("utf-8", "surrogatepass")
        head = _BODY.pack(offset, leader_epoch, len(m)) if len(m) < _LONG_METADATA else \
            _BODY.pack(offset, leader_epoch, _LONG_METADATA) + _UINT32.pack(len(m))
        tail = _INT64.pack(commit_timestamp) if expire_timestamp == -1 else _INT64X2.pack(commit_timestamp,
                                                                                       expire_timestamp)
        return bytes.__new__(cls, b"".join((head, m, tail)))

    def __reduce__(self):
        return value_from_body, (bytes(self),)

    def _metadata_span(self) -> tuple[int, int]:
        n = _LENGTH_U.unpack_from(self, 12)[0]
        if n != _LONG_METADATA:
            return 14, 14 + n
        n = _UINT32.unpack_from(self, 14)[0]
        return 18, 18 + n

    @property
    def offset(self) -> int:
        return _INT64.unpack_from(self)[0]

    @property
    def leader_epoch(self) -> int:  # -1 = none
        return _INT32.unpack_from(self, 8)[0]

    @property
    def metadata(self) -> str:
        if len(self) == BARE:
            return ""
        start, end = self._metadata_span()
        return self[start:end].decode("utf-8", "surrogatepass") if end > start else ""

    @property
    def commit_timestamp(self) -> int:
        if len(self) == BARE:  # no metadata, no expire timestamp: most offsets
            return _INT64.unpack_from(self, 14)[0]
        return _INT64.unpack_from(self, self._metadata_span()[1])[0]

    @property
    def expire_timestamp(self) -> int:  # -1 = none; only v1 carries it
        if len(self) == BARE:
            return -1
        end = self._metadata_span()[1]
        return _INT64.unpack_from(self, end + 8)[0] if len(self) > end + 8 else -1

    def timestamps(self) -> tuple[int, int]:
        """(commit timestamp, expire timestamp): what expiry reads of every offset, in one go."""
        if len(self) == BARE:
            return _INT64.unpack_from(self, 14)[0], -1
        return self.commit_timestamp, self.expire_timestamp

    def fields(self) -> tuple[int, int, str, int, int]:
        return self.offset, self.leader_epoch, self.metadata, self.commit_timestamp, self.expire_timestamp

    def __repr__(self) -> str:
        return "OffsetCommitValue(offset=%r, leader_epoch=%r, metadata=%r, commit_timestamp=%r, " \
            "expire_timestamp=%r)" % self.fields()

    __str__ = __repr__


value_from_body = functools.partial(bytes.__new__, OffsetCommitValue)


def is_v3_body(value: OffsetCommitValue) -> bool:
    """Whether a value with metadata is, as it is, a v3 body Kafka reads: no expire timestamp, and
    metadata that fits an int16 length and is UTF-8 (what surrogatepass kept is not)."""
    length = _LENGTH_U.unpack_from(value, 12)[0]
    if len(value) != BARE + length or length > 0x7FFF:
        return False
    try:
        value[14:14 + length].decode()
    except UnicodeDecodeError:
        return False
    return True
