"""DescribeShareGroupOffsets (90) v0–v1, AlterShareGroupOffsets (91) v0 and DeleteShareGroupOffsets (92) v0
against bytes laid out by hand from Kafka's schemas (share-groups spec §1.8): kafka-python has no
classes for them, so these are their golden fixtures. All flexible; 90 v1 adds the partition's Lag
(int64) after LeaderEpoch."""

from __future__ import annotations

import struct
import uuid

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response, decode_request, encode_response, parse_header
from tests.protocol.test_share_group_codec import TAGS, carray, cstr, i32

TOPIC = uuid.UUID("5b2f0c1e-8d4a-4b7e-9f10-2a3b4c5d6e7f")


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


@pytest.mark.parametrize("version", [0, 1])
def test_request_with_named_topics_and_with_null_topics(version):
    named = cstr("sg") + carray([cstr("t1") + carray([i32(0), i32(2)]) + TAGS]) + TAGS
    every = cstr("sh") + b"\x00" + TAGS  # Topics null: every initialized share-partition
    frame = struct.pack(">hhi", 90, version, 9) + struct.pack(">h", -1) + TAGS + carray([named, every]) + TAGS
    _, offset = parse_header(frame, True)
    req = decode_request(90, version, frame, offset)
    [g1, g2] = req.groups
    assert (g1.group_id, [(t.topic_name, list(t.partitions)) for t in g1.topics]) == ("sg", [("t1", [0, 2])])
    assert (g2.group_id, g2.topics) == ("sh", None)


@pytest.mark.parametrize("version", [0, 1])
def test_response_layout(version):
    response = build_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, {"groups": [{
        "group_id": "sg", "error_code": ErrorCode.none, "error_message": None, "topics": [{
            "topic_name": "t1", "topic_id": TOPIC, "partitions": [{
                "partition_index": 1, "start_offset": 42, "leader_epoch": 3, "lag": 7,
                "error_code": ErrorCode.none, "error_message": None}]}]}]})
    frame = encode_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, response)
    partition = i32(1) + i64(42) + i32(3) + (i64(7) if version >= 1 else b"") + struct.pack(">h", 0) + cstr(None) + TAGS
    topic = cstr("t1") + TOPIC.bytes + carray([partition]) + TAGS
    group = cstr("sg") + carray([topic]) + struct.pack(">h", 0) + cstr(None) + TAGS
    assert frame[4 + 4 + 1:] == i32(0) + carray([group]) + TAGS


def test_alter_request_and_response_v0():
    partition = i32(2) + i64(17) + TAGS
    body = cstr("sg") + carray([cstr("t1") + carray([partition]) + TAGS]) + TAGS
    frame = struct.pack(">hhi", 91, 0, 3) + struct.pack(">h", -1) + TAGS + body
    _, offset = parse_header(frame, True)
    req = decode_request(91, 0, frame, offset)
    assert (req.group_id, [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
                           for t in req.topics]) == ("sg", [("t1", [(2, 17)])])
    response = build_response(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {
        "error_code": ErrorCode.none, "error_message": None, "responses": [{
            "topic_name": "t1", "topic_id": TOPIC, "partitions": [
                {"partition_index": 2, "error_code": ErrorCode.non_empty_group, "error_message": "x"}]}]})
    frame = encode_response(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 1, response)
    row = i32(2) + struct.pack(">h", 68) + cstr("x") + TAGS
    topic = cstr("t1") + TOPIC.bytes + carray([row]) + TAGS
    assert frame[4 + 4 + 1:] == i32(0) + struct.pack(">h", 0) + cstr(None) + carray([topic]) + TAGS


def test_delete_request_and_response_v0():
    body = cstr("sg") + carray([cstr("t1") + TAGS]) + TAGS
    frame = struct.pack(">hhi", 92, 0, 4) + struct.pack(">h", -1) + TAGS + body
    _, offset = parse_header(frame, True)
    req = decode_request(92, 0, frame, offset)
    assert (req.group_id, [t.topic_name for t in req.topics]) == ("sg", ["t1"])
    response = build_response(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
        "error_code": ErrorCode.none, "error_message": None, "responses": [{
            "topic_name": "t1", "topic_id": TOPIC, "error_code": ErrorCode.none, "error_message": None}]})
    frame = encode_response(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 1, response)
    topic = cstr("t1") + TOPIC.bytes + struct.pack(">h", 0) + cstr(None) + TAGS
    assert frame[4 + 4 + 1:] == i32(0) + struct.pack(">h", 0) + cstr(None) + carray([topic]) + TAGS
