"""Produce's response written straight to bytes, v3–v12: built and written through kio it was a fifth
of an acks=all produce's loop time (issue 27 round five, bench/request_cost.py --only produce).
Byte-identical to kio's encoding of every version (tests/protocol/test_produce_response.py).

Per partition: index, error code, base offset, log append time (-1 unless LogAppendTime), from v5 the
log start offset, from v8 the record errors and the error message; from v9 (flexible) compact
lengths and tag buffers. v10's tagged current leader and node endpoints are never set here (they
stay at their defaults, which are not written), so v10–v12 read as v9.
"""

from __future__ import annotations

import datetime
import struct

from groupd.protocol.bounds import encode_uvarint
from groupd.protocol.codec import Encoded

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and the log start offset
_THROTTLE = b"\x00\x00\x00\x00"  # throttle_time_ms = 0
_NO_TAGS = b"\x00"
_NULL_COMPACT, _NULL_LEGACY = b"\x00", b"\xff\xff"


def _millis(value: datetime.datetime | None) -> int:
    return -1 if value is None else round(value.timestamp() * 1000)  # as kio's datetime_i64


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return _NULL_COMPACT if flexible else _NULL_LEGACY
    encoded = value.encode()
    return (encode_uvarint(len(encoded) + 1) if flexible else _INT16.pack(len(encoded))) + encoded


def _count(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _INT32.pack(n)


def encode(version: int, responses: list[dict]) -> Encoded:
    """The response of `responses` (produce.py's topic dicts of partition dicts)."""
    flexible = version >= 9
    out = [_count(len(responses), flexible)]
    for topic in responses:
        partitions = topic["partition_responses"]
        out += (_string(topic["name"], flexible), _count(len(partitions), flexible))
        for p in partitions:
            if version >= 5:
                out.append(_PARTITION_V5.pack(p["index"], p["error_code"], p["base_offset"],
                                              _millis(p["log_append_time"]), p["log_start_offset"]))
            else:
                out.append(_PARTITION_V3.pack(p["index"], p["error_code"], p["base_offset"],
                                              _millis(p["log_append_time"])))
            if version >= 8:
                errors = p["record_errors"]
                out.append(_count(len(errors), flexible))
                for e in errors:
                    out += (_INT32.pack(e["batch_index"]), _string(e["batch_index_error_message"], flexible))
                    if flexible:
                        out.append(_NO_TAGS)
                out.append(_string(p["error_message"], flexible))
            if flexible:
                out.append(_NO_TAGS)
        if flexible:
            out.append(_NO_TAGS)
    out.append(_THROTTLE)
    if flexible:
        out.append(_NO_TAGS)
    return Encoded.of(b"".join(out), flexible)
