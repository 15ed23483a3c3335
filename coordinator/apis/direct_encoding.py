"""Pieces of a response body written straight to bytes, for the few APIs whose replies are built
often enough that kio's generic writer shows in the profile (JoinGroup, SyncGroup: a third of a
request's CPU, and 15 ms for the leader's reply of a 1,000-member group). Each API's module
writes its own fields in its own order with these; its test compares the bytes with kio's.

Flexible versions use compact lengths (unsigned varint of n + 1, 0 = null); the others int16
(strings) or int32 (bytes, arrays) lengths, -1 = null."""

from __future__ import annotations

import struct

from groupd.protocol.bounds import encode_uvarint

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
NO_TAGS = b"\x00"  # an empty tagged-field buffer
_NULL_COMPACT = b"\x00"
_NULL_STRING = INT16.pack(-1)
_SMALL_UVARINTS = [encode_uvarint(n) for n in range(128)]


def uvarint(value: int) -> bytes:
    return _SMALL_UVARINTS[value] if value < 128 else encode_uvarint(value)


def string(value: str, flexible: bool) -> bytes:
    encoded = value.encode()
    return (uvarint(len(encoded) + 1) if flexible else INT16.pack(len(encoded))) + encoded


def nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return _NULL_COMPACT if flexible else _NULL_STRING
    return string(value, flexible)


def blob(value: bytes, flexible: bool) -> bytes:
    return (uvarint(len(value) + 1) if flexible else INT32.pack(len(value))) + value


def array_length(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else INT32.pack(n)
