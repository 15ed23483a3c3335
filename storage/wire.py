"""Kafka's message encoding, the primitives the generated record codecs (storage/generated_records.py)
call: fixed-width big-endian integers, int16/int32-length strings and bytes (classic versions),
uvarint-length compact ones and tagged-field sections (flexible versions).

Reading goes through one `Reader` per record; whatever runs short or is null where it may not be
raises CorruptRecord, never IndexError or struct.error.
"""

from __future__ import annotations

import struct
import uuid

__all__ = ["CorruptRecord", "UnknownRecordType", "Reader"]


class UnknownRecordType(Exception):
    def __init__(self, key_type: int) -> None:
        super().__init__(f"unknown record key type {key_type}")
        self.key_type = key_type


class CorruptRecord(Exception):
    pass


I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
_U8 = struct.Struct(">B")


# ---------------------------------------------------------------------------------------------
# Writing


def uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n: int) -> bytes:
    """A signed varint as record batches hold them (zig-zag, then unsigned)."""
    return uvarint((n << 1) ^ (n >> 63))


def str16(s: str) -> bytes:
    b = s.encode()
    return I16.pack(len(b)) + b


def nstr16(s: str | None) -> bytes:
    return b"\xff\xff" if s is None else str16(s)


def bytes32(b: bytes) -> bytes:
    return I32.pack(len(b)) + b


def nbytes32(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else bytes32(b)


def cstr(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


def ncstr(s: str | None) -> bytes:
    return b"\x00" if s is None else cstr(s)


def cbytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def ncbytes(b: bytes | None) -> bytes:
    return b"\x00" if b is None else cbytes(b)


def int32s(values: tuple[int, ...]) -> bytes:
    return I32.pack(len(values)) + struct.pack(f">{len(values)}i", *values)


def cint32s(values: tuple[int, ...]) -> bytes:
    return uvarint(len(values) + 1) + struct.pack(f">{len(values)}i", *values)


def tagged(fields: list[tuple[int, bytes]]) -> bytes:
    """A tagged-field section: (tag, data) pairs in ascending tag order."""
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


# ---------------------------------------------------------------------------------------------
# Reading


class Reader:
    """`flexible` only steers the length-prefix style of str/nstr/bytes/array_len; the generated
    readers call the explicit methods (str16, cstr, ...)."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def _unpack(self, s: struct.Struct):
        try:
            (v,) = s.unpack_from(self.buf, self.pos)
        except struct.error:
            raise CorruptRecord("record ends early") from None
        self.pos += s.size
        return v

    def unpack(self, s: struct.Struct) -> tuple:
        """A run of fixed-width fields in one unpack."""
        try:
            v = s.unpack_from(self.buf, self.pos)
        except struct.error:
            raise CorruptRecord("record ends early") from None
        self.pos += s.size
        return v

    def i8(self) -> int:
        return self._unpack(I8)

    def i16(self) -> int:
        return self._unpack(I16)

    def i32(self) -> int:
        return self._unpack(I32)

    def i64(self) -> int:
        return self._unpack(I64)

    def uvarint(self) -> int:
        pos = self.pos
        if pos < len(self.buf) and self.buf[pos] < 0x80:  # one byte: nearly every length and count
            self.pos = pos + 1
            return self.buf[pos]
        value = shift = 0
        while True:
            b = self._unpack(_U8)
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecord("field runs past the end of the record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    # strings and bytes: int16/int32 lengths (classic) or uvarint length + 1 (compact); -1/0 = null

    def nstr16(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.raw(n).decode()

    def str16(self) -> str:
        return _not_null(self.nstr16(), "string")

    def ncstr(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n).decode()

    def cstr(self) -> str:
        return _not_null(self.ncstr(), "string")

    def nbytes32(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.raw(n)

    def bytes32(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self.raw(n)

    def ncbytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n)

    def cbytes(self) -> bytes:
        n = self.uvarint() - 1
        return b"" if n < 0 else self.raw(n)

    # arrays: a count (-1 = null), then the elements

    def count32(self) -> int:
        return self._count(self.i32())

    def ccount(self) -> int:
        return self._count(self.uvarint() - 1)

    def _count(self, n: int) -> int:
        if n > len(self.buf) - self.pos:  # every element takes at least a byte: a count past that is corrupt
            raise CorruptRecord("array count runs past the end of the record")
        return n

    def int32s(self, n: int) -> tuple[int, ...]:
        return struct.unpack(f">{n}i", self.raw(4 * n))

    def tags(self) -> list[tuple[int, Reader]]:
        """A tagged-field section: each field as (tag, a reader of exactly its bytes)."""
        n = self.uvarint()
        if not n:
            return []
        found = []
        for _ in range(n):
            tag, size = self.uvarint(), self.uvarint()
            found.append((tag, type(self)(self.raw(size), 0, True)))
        return found

    def skip_tags(self) -> None:
        pos = self.pos
        if pos < len(self.buf) and self.buf[pos] == 0:  # no tagged fields: nearly every struct
            self.pos = pos + 1
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())

    # the style-by-flag forms (`flexible`), as the hand-written readers called them

    def nstr(self) -> str | None:
        return self.ncstr() if self.flexible else self.nstr16()

    def str(self) -> str:
        return _not_null(self.nstr(), "string")

    def bytes(self) -> bytes:
        return self.cbytes() if self.flexible else self.bytes32()

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i32()


def _not_null(value, what: str):
    if value is None:
        raise CorruptRecord(f"null in a non-nullable {what}")
    return value


def not_null_count(n: int) -> int:
    if n < 0:
        raise CorruptRecord("null in a non-nullable array")
    return n


def uuid_bytes(u: uuid.UUID) -> bytes:
    return u.bytes


# ---------------------------------------------------------------------------------------------
# Keys: flat structs of classic strings ("s") and int32s ("i"), after the int16 record type


def key_reader(cls, layout: str):
    reads = [Reader.str16 if c == "s" else Reader.i32 for c in layout]

    def read(r: Reader):
        return cls(*[f(r) for f in reads])
    return read


def key_writer(key_type: int, layout: str, names: list[str]):
    head = I16.pack(key_type)
    writes = [(name, str16 if c == "s" else I32.pack) for c, name in zip(layout, names)]

    def write(key) -> bytes:
        return head + b"".join([w(getattr(key, name)) for name, w in writes])
    return write
