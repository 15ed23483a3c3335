"""Request headers, request bodies and response frames, on top of kio's generated codecs.

Header versions follow the body's flexibility: request header v2 (with a tag buffer) for flexible
request versions, v1 otherwise; response header v1 for flexible versions, v0 otherwise, except
ApiVersions whose response header is always v0 (KIP-511) so any client can read it.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from . import newer_versions
from .apis import ApiKey
from .bounds import BadBody, body_checker

_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">ii")  # frame size, correlation id
_ZERO = datetime.timedelta(0)


class MalformedRequest(Exception):
    """The frame cannot be parsed; the connection that sent it is closed."""


@dataclasses.dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """api key, api version and correlation id: enough to route or reject a request."""
    if len(frame) < 8:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    return struct.unpack_from(">hhi", frame, 0)


def parse_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """The request header and the offset where the body starts."""
    try:
        api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        offset = _HEADER.size
        client_id = None
        if n >= 0:
            if offset + n > len(frame):
                raise MalformedRequest("client id runs past the end of the frame")
            client_id = frame[offset : offset + n].decode()
            offset += n
        if flexible:
            offset = _skip_tags(frame, offset)
    except (struct.error, UnicodeDecodeError) as e:
        raise MalformedRequest(f"bad request header: {e}") from None
    return RequestHeader(api_key, version, correlation_id, client_id), offset


def _varint(buf: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= len(buf) or shift > 28:
            raise MalformedRequest("bad unsigned varint")
        b = buf[offset]
        offset += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, offset
        shift += 7


def _skip_tags(buf: bytes, offset: int) -> int:
    count, offset = _varint(buf, offset)
    for _ in range(count):
        _, offset = _varint(buf, offset)
        size, offset = _varint(buf, offset)
        offset += size
    if offset > len(buf):
        raise MalformedRequest("tagged fields run past the end of the frame")
    return offset


# ---------------------------------------------------------------------------------------------
# Bodies


@cache
def request_class(api_key: int, version: int) -> type:
    if (api_key, version) in newer_versions.NEWER:  # a version kio 0.6.5 lacks
        return newer_versions.request_class(api_key, version)
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type:
    if (api_key, version) in newer_versions.NEWER:
        return newer_versions.response_class(api_key, version)
    return load_response_schema(api_key, version)


@cache
def _reader(cls: type):
    return entity_reader(cls)


@cache
def _writer(cls: type):
    return entity_writer(cls)


def is_flexible(api_key: int, version: int) -> bool:
    return request_class(api_key, version).__flexible__


@cache
def _decoding(api_key: int, version: int) -> tuple[Any, Any, bool]:
    """(kio reader, bounds check, whether the check runs before kio) of a request version."""
    cls = request_class(api_key, version)
    check, up_front = body_checker(cls)
    return _reader(cls), check, up_front


# Bodies a client sends again byte for byte: a heartbeat names its group, member and generation (or
# epoch) and nothing else, so a steady member repeats one body. Those are decoded once and the body
# (a frozen kio entity of immutable fields) is handed out again: kio's decode and the bounds walk were
# a sixth of a consumer heartbeat's CPU and a third of a classic one's (issue 27, bench/request_cost.py).
# Equal bytes decode to equal bodies, and a body that fails to decode is never kept, so what a
# request gets is what decode_request_uncached would give it (tests/protocol/test_repeated_bodies.py).
REPEATED_BODIES = frozenset({ApiKey.HEARTBEAT, ApiKey.CONSUMER_GROUP_HEARTBEAT})
REPEATS_KEPT = 8192  # about one per live member; the whole table is dropped when full (no LRU upkeep)
REPEAT_MAX_BYTES = 512  # larger bodies (a heartbeat with a long subscription) are decoded each time
_repeats: dict[tuple[int, int, bytes], Any] = {}


def decode_request(api_key: int, version: int, frame: bytes, offset: int) -> Any:
    """The body of a request whose header ends at `offset`; raises MalformedRequest."""
    if api_key not in REPEATED_BODIES or len(frame) - offset > REPEAT_MAX_BYTES:
        return decode_request_uncached(api_key, version, frame, offset)
    key = (api_key, version, frame[offset:])
    body = _repeats.get(key)
    if body is None:
        body = decode_request_uncached(api_key, version, frame, offset)
        if len(_repeats) >= REPEATS_KEPT:
            _repeats.clear()
        _repeats[key] = body
    return body


def decode_request_uncached(api_key: int, version: int, frame: bytes, offset: int) -> Any:
    """decode_request without the repeated-body table: the reference path."""
    reader, check, up_front = _decoding(api_key, version)
    try:
        # kio must never see counts the frame cannot hold, nor tags it does not know (bounds.py)
        if up_front:
            frame = check(frame, offset)
        try:
            body, _size = reader(frame, offset)
        except KeyError:  # kio met an unknown tag: drop the tags it does not know and read again
            if up_front:
                raise
            body, _size = reader(check(frame, offset), offset)
    except BadBody as e:
        raise MalformedRequest(f"bad {ApiKey(api_key).name} v{version} body: {e}") from None
    except MalformedRequest:
        raise
    except Exception as e:  # kio raises a variety of errors on truncated or invalid input
        raise MalformedRequest(f"bad {ApiKey(api_key).name} v{version} body: {e!r}") from None
    return body


class Encoded:
    """A response body encoded once and sent many times (ApiVersions' table, heartbeat answers):
    encoding is most of the cost of such a request."""

    __slots__ = ("body", "__flexible__", "error_code")

    def __init__(self, response: Any) -> None:
        buf = io.BytesIO()
        _writer(type(response))(buf, response)
        self.body = buf.getvalue()
        self.__flexible__ = response.__flexible__
        self.error_code = getattr(response, "error_code", None)

    @classmethod
    def of(cls, body: bytes, flexible: bool, error_code: Any = None) -> Encoded:
        """A body an API encoded itself (OffsetCommit's, on the commit hot path)."""
        encoded = cls.__new__(cls)
        encoded.body, encoded.__flexible__, encoded.error_code = body, flexible, error_code
        return encoded


def encode_response(api_key: int, correlation_id: int, response: Any) -> bytes:
    """A complete response frame: size, header, body."""
    flexible = response.__flexible__ and api_key != ApiKey.API_VERSIONS
    if isinstance(response, Encoded):
        body = response.body
        return _CORRELATION.pack(len(body) + 4 + flexible, correlation_id) + (b"\x00" if flexible else b"") + body
    buf = io.BytesIO()
    buf.write(_CORRELATION.pack(0, correlation_id))
    if flexible:
        buf.write(b"\x00")  # response header v1: an empty tag buffer
    _writer(type(response))(buf, response)
    frame = buf.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def encode_request(header: RequestHeader, request: Any) -> bytes:
    """A complete request frame (used by tests, the benchmark and the operations CLI)."""
    buf = io.BytesIO()
    client_id = None if header.client_id is None else header.client_id.encode()
    buf.write(_HEADER.pack(header.api_key, header.api_version, header.correlation_id,
                           -1 if client_id is None else len(client_id)))
    if client_id:
        buf.write(client_id)
    if request.__flexible__:
        buf.write(b"\x00")
    _writer(type(request))(buf, request)
    body = buf.getvalue()
    return _SIZE.pack(len(body)) + body


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) from a response frame without its size prefix."""
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    cls = response_class(api_key, version)
    offset = 4
    if cls.__flexible__ and api_key != ApiKey.API_VERSIONS:
        offset = _skip_tags(frame, offset)
    body, _ = _reader(cls)(frame, offset)
    return correlation_id, body


# ---------------------------------------------------------------------------------------------
# Building version-specific messages from plain values


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    nested: type | None  # the entity class of a nested struct or of an array of structs
    required: bool


@cache
def _plan(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        nested = _entity_in(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append(_Field(f.name, nested, required))
    return tuple(plan)


def _entity_in(hint: Any) -> type | None:
    if dataclasses.is_dataclass(hint):
        return hint  # type: ignore[return-value]
    if typing.get_origin(hint) in (tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            found = _entity_in(arg)
            if found is not None:
                return found
    return None


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of the kio class `cls` from `values`, a mapping that may hold the fields of
    every version: fields `cls` does not have are ignored, nested mappings become the nested
    entity classes of the same version. A missing required field is a bug and raises."""
    kwargs = {}
    for f in _plan(cls):
        if f.name in values:
            value = values[f.name]
            if f.nested is not None and value is not None:
                if isinstance(value, Mapping):
                    value = build(f.nested, value)
                else:
                    value = tuple(build(f.nested, v) if isinstance(v, Mapping) else v for v in value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
        elif f.name == "throttle_time":
            kwargs[f.name] = _ZERO
        elif f.required:
            raise KeyError(f"{cls.__module__}.{cls.__qualname__} needs {f.name!r}")
    return cls(**kwargs)


def build_response(api_key: int, version: int, values: Mapping[str, Any]) -> Any:
    return build(response_class(api_key, version), values)


def build_request(api_key: int, version: int, values: Mapping[str, Any]) -> Any:
    return build(request_class(api_key, version), values)
