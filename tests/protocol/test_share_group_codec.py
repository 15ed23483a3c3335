"""ShareGroupHeartbeat (76) v1 and ShareGroupDescribe (77) v1 against bytes laid out by hand from
Kafka's schemas (share-groups spec §1.2, §1.3): kafka-python has no classes for them, so these are
their golden fixtures. Flexible versions: request header v2, response header v1, compact strings and
arrays (uvarint length + 1), a tag section closing every struct; the assignment is a nullable struct
behind an int8 marker (-1 null, 1 present)."""

from __future__ import annotations

import struct
import uuid

from groupd.coordinator.apis.share_group_heartbeat import _response
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response, decode_request, encode_response, parse_header

TOPIC = uuid.UUID("5b2f0c1e-8d4a-4b7e-9f10-2a3b4c5d6e7f")
TAGS = b"\x00"


def cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    data = s.encode()
    return bytes([len(data) + 1]) + data  # every length here is below 127: one uvarint byte


def carray(items: list[bytes]) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def test_heartbeat_request_v1_decodes_as_kafka_lays_it_out():
    body = (cstr("sg") + cstr("member-1") + i32(0) + cstr(None) + carray([cstr("t1"), cstr("t2")]) + TAGS)
    header = struct.pack(">hhi", 76, 1, 7) + struct.pack(">h", 6) + b"client" + TAGS
    frame = header + body
    parsed, offset = parse_header(frame, True)
    req = decode_request(76, 1, frame, offset)
    assert (parsed.correlation_id, req.group_id, req.member_id, req.member_epoch, req.rack_id,
            list(req.subscribed_topic_names)) == (7, "sg", "member-1", 0, None, ["t1", "t2"])


def test_heartbeat_request_v1_null_subscription_means_unchanged():
    body = cstr("sg") + cstr("member-1") + i32(3) + cstr("rack") + b"\x00" + TAGS
    frame = struct.pack(">hhi", 76, 1, 8) + struct.pack(">h", -1) + TAGS + body
    _, offset = parse_header(frame, True)
    req = decode_request(76, 1, frame, offset)
    assert (req.member_epoch, req.rack_id, req.subscribed_topic_names) == (3, "rack", None)


def test_heartbeat_response_v1_with_an_assignment():
    reply = {"error_code": ErrorCode.none, "error_message": None, "member_id": "member-1", "member_epoch": 4,
             "heartbeat_interval_ms": 5000,
             "assignment": {"topic_partitions": [{"topic_id": TOPIC, "partitions": [0, 2]}]}}
    frame = encode_response(ApiKey.SHARE_GROUP_HEARTBEAT, 0x12345678, _response(1, reply))
    topic = TOPIC.bytes + carray([i32(0), i32(2)]) + TAGS
    body = (i32(0) + struct.pack(">h", 0) + cstr(None) + cstr("member-1") + i32(4) + i32(5000)
            + b"\x01" + carray([topic]) + TAGS + TAGS)
    expected = i32(0x12345678) + TAGS + body
    assert frame == i32(len(expected)) + expected


def test_heartbeat_response_v1_error_has_a_null_assignment():
    reply = {"error_code": ErrorCode.fenced_member_epoch, "error_message": "fenced", "member_id": None,
             "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
    frame = encode_response(ApiKey.SHARE_GROUP_HEARTBEAT, 1, _response(1, reply))
    body = i32(0) + struct.pack(">h", 110) + cstr("fenced") + cstr(None) + i32(0) + i32(0) + b"\xff" + TAGS
    assert frame[4 + 4 + 1:] == body


def test_describe_response_v1_layout():
    response = build_response(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"groups": [{
        "error_code": ErrorCode.none, "error_message": None, "group_id": "sg", "group_state": "Stable",
        "group_epoch": 2, "assignment_epoch": 2, "assignor_name": "simple", "authorized_operations": -2**31,
        "members": [{"member_id": "m", "rack_id": None, "member_epoch": 2, "client_id": "c", "client_host": "/127.0.0.1",
                     "subscribed_topic_names": ["t1"], "assignment": {"topic_partitions": [
                         {"topic_id": TOPIC, "topic_name": "t1", "partitions": [1]}]}}]}]})
    frame = encode_response(ApiKey.SHARE_GROUP_DESCRIBE, 1, response)
    partitions = TOPIC.bytes + cstr("t1") + carray([i32(1)]) + TAGS
    member = (cstr("m") + cstr(None) + i32(2) + cstr("c") + cstr("/127.0.0.1") + carray([cstr("t1")])
              + carray([partitions]) + TAGS + TAGS)  # the assignment struct (no marker), then the member's tags
    group = (struct.pack(">h", 0) + cstr(None) + cstr("sg") + cstr("Stable") + i32(2) + i32(2) + cstr("simple")
             + carray([member]) + i32(-2**31) + TAGS)
    assert frame[4 + 4 + 1:] == i32(0) + carray([group]) + TAGS
