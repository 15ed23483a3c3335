"""ShareFetch (78) v1 and ShareAcknowledge (79) v1 against bytes laid out by hand from Kafka's
schemas (share-groups spec §1.4–1.6): kafka-python has no classes for them, so these are their golden
fixtures. Flexible: request header v2, response header v1, compact strings/arrays (uvarint length + 1),
a tag section closing every struct; Records is COMPACT_RECORDS and never null in v1 (empty: 0x01)."""

from __future__ import annotations

import datetime
import struct
import uuid

from groupd.coordinator.apis.share_acknowledge import _response as ack_response
from groupd.coordinator.apis.share_common import NO_LEADER
from groupd.coordinator.apis.share_fetch import _response as fetch_response
from groupd.protocol import ErrorCode
from groupd.protocol.codec import RequestHeader, decode_request, encode_response, parse_header
from tests.protocol.test_share_group_codec import TAGS, carray, cstr, i32

TOPIC = uuid.UUID("5b2f0c1e-8d4a-4b7e-9f10-2a3b4c5d6e7f")


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def ack_batch(first: int, last: int, *types: int) -> bytes:
    return i64(first) + i64(last) + carray([bytes([t]) for t in types]) + TAGS


class _Req:  # what the handlers' `_response` reads of a request
    def __init__(self, version: int) -> None:
        self.version = version
        self.header = RequestHeader(0, version, 1, None)


def test_share_fetch_request_v1_with_acknowledgements():
    partition = i32(0) + carray([ack_batch(3, 5, 1), ack_batch(6, 7, 2, 3)]) + TAGS
    body = (cstr("sg") + cstr("m/1") + i32(4) + i32(500) + i32(1) + i32(52428800) + i32(500) + i32(500)
            + carray([TOPIC.bytes + carray([partition]) + TAGS])
            + carray([TOPIC.bytes + carray([i32(2)]) + TAGS]) + TAGS)
    frame = struct.pack(">hhi", 78, 1, 9) + i16(-1) + TAGS + body
    _, offset = parse_header(frame, True)
    req = decode_request(78, 1, frame, offset)
    assert (req.group_id, req.member_id, req.share_session_epoch, req.max_wait.total_seconds(), req.min_bytes,
            req.max_bytes, req.max_records, req.batch_size) == ("sg", "m/1", 4, 0.5, 1, 52428800, 500, 500)
    [t] = req.topics
    [p] = t.partitions
    assert t.topic_id == TOPIC and [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                                    for b in p.acknowledgement_batches] == [(3, 5, [1]), (6, 7, [2, 3])]
    assert [(f.topic_id, list(f.partitions)) for f in req.forgotten_topics_data] == [(TOPIC, [2])]


def test_share_fetch_response_v1_layout():
    records = b"\xab" * 5  # opaque here: the log's batches as stored
    entry = {"partition_index": 0, "error_code": ErrorCode.none, "acknowledge_error_code": 121,
             "current_leader": NO_LEADER, "records": records,
             "acquired_records": [{"first_offset": 10, "last_offset": 12, "delivery_count": 2}]}
    empty = {**entry, "partition_index": 1, "acknowledge_error_code": 0, "records": b"", "acquired_records": []}
    frame = encode_response(78, 0x01020304, fetch_response(
        _Req(1), ErrorCode.none, 30000, [{"topic_id": TOPIC, "partitions": [entry, empty]}]))
    p0 = (i32(0) + i16(0) + cstr(None) + i16(121) + cstr(None) + i32(0) + i32(0) + TAGS
          + bytes([len(records) + 1]) + records + carray([i64(10) + i64(12) + i16(2) + TAGS]) + TAGS)
    p1 = (i32(1) + i16(0) + cstr(None) + i16(0) + cstr(None) + i32(0) + i32(0) + TAGS
          + b"\x01" + carray([]) + TAGS)
    body = (i32(0) + i16(0) + cstr(None) + i32(30000) + carray([TOPIC.bytes + carray([p0, p1]) + TAGS])
            + carray([]) + TAGS)
    expected = i32(0x01020304) + TAGS + body
    assert frame == i32(len(expected)) + expected


def test_share_fetch_response_v1_top_level_error():
    # refused as a whole: no lock duration (Kafka's 0), whatever the group's
    frame = encode_response(78, 1, fetch_response(_Req(1), ErrorCode.invalid_share_session_epoch, 30000, []))
    assert frame[4 + 4 + 1:] == i32(0) + i16(123) + cstr(None) + i32(0) + carray([]) + carray([]) + TAGS


def test_share_acknowledge_request_and_response_v1():
    partition = i32(3) + carray([ack_batch(0, 0, 0)]) + TAGS
    body = cstr("sg") + cstr("m") + i32(-1) + carray([TOPIC.bytes + carray([partition]) + TAGS]) + TAGS
    frame = struct.pack(">hhi", 79, 1, 2) + i16(-1) + TAGS + body
    _, offset = parse_header(frame, True)
    req = decode_request(79, 1, frame, offset)
    assert (req.group_id, req.member_id, req.share_session_epoch) == ("sg", "m", -1)
    assert [(b.first_offset, b.last_offset, list(b.acknowledge_types))
            for b in req.topics[0].partitions[0].acknowledgement_batches] == [(0, 0, [0])]
    frame = encode_response(79, 5, ack_response(_Req(1), ErrorCode.none, [{"topic_id": TOPIC, "partitions": [
        {"partition_index": 3, "error_code": ErrorCode.invalid_record_state, "current_leader": NO_LEADER}]}]))
    p = i32(3) + i16(121) + cstr(None) + i32(0) + i32(0) + TAGS + TAGS
    assert frame[4 + 4 + 1:] == i32(0) + i16(0) + cstr(None) + carray([TOPIC.bytes + carray([p]) + TAGS]) \
        + carray([]) + TAGS


def test_lock_timeout_is_milliseconds():
    r = fetch_response(_Req(1), ErrorCode.none, 1500, [])
    assert r.acquisition_lock_timeout == datetime.timedelta(milliseconds=1500)


def test_v2_requests_carry_the_acquire_mode_and_is_renew_ack():
    body = (cstr("sg") + cstr("m") + i32(3) + i32(0) + i32(0) + i32(0) + i32(0) + i32(0) + b"\x01" + b"\x01"
            + carray([]) + carray([]) + TAGS)
    frame = struct.pack(">hhi", 78, 2, 9) + i16(-1) + TAGS + body
    _, offset = parse_header(frame, True)
    req = decode_request(78, 2, frame, offset)
    assert (req.share_acquire_mode, req.is_renew_ack) == (1, True)
    body = cstr("sg") + cstr("m") + i32(3) + b"\x01" + carray([]) + TAGS
    frame = struct.pack(">hhi", 79, 2, 9) + i16(-1) + TAGS + body
    _, offset = parse_header(frame, True)
    assert decode_request(79, 2, frame, offset).is_renew_ack is True


def test_share_acknowledge_response_v2_has_the_lock_timeout():
    frame = encode_response(79, 5, ack_response(_Req(2), ErrorCode.none, [], 30000))
    assert frame[4 + 4 + 1:] == i32(0) + i16(0) + cstr(None) + i32(30000) + carray([]) + carray([]) + TAGS
