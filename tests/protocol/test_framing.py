"""Size-prefixed framing and request headers, without sockets."""

import struct

import pytest

from groupd.protocol import codec
from groupd.protocol.codec import MalformedRequest, RequestHeader
from groupd.protocol.framing import FrameReader, FrameTooLarge


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_and_within_reads():
    reader = FrameReader(1024)
    data = framed(b"abc") + framed(b"") + framed(b"hello")
    assert reader.feed(data[:2]) == []
    assert reader.feed(data[2:13]) == [b"abc", b""]  # 7 + 4 bytes, then 2 of the third prefix
    assert reader.pending == 2
    assert reader.feed(data[13:]) == [b"hello"]
    assert reader.pending == 0


def test_frame_over_limit_is_refused_before_it_is_read():
    with pytest.raises(FrameTooLarge):
        FrameReader(100).feed(struct.pack(">i", 101))
    with pytest.raises(FrameTooLarge):
        FrameReader(100).feed(struct.pack(">i", -1))


def test_header_v1_and_v2():
    frame = struct.pack(">hhih", 3, 8, 42, 3) + b"cid" + b"body"
    header, offset = codec.parse_header(frame, flexible=False)
    assert header == RequestHeader(3, 8, 42, "cid") and frame[offset:] == b"body"
    # v2: a tag buffer with one (unknown) tagged field follows the client id
    frame = struct.pack(">hhih", 3, 12, 43, -1) + bytes([1, 5, 2, 0xAA, 0xBB]) + b"body"
    header, offset = codec.parse_header(frame, flexible=True)
    assert header.client_id is None and frame[offset:] == b"body"


@pytest.mark.parametrize("frame", [
    b"\x00\x03",                                              # shorter than a header
    struct.pack(">hhih", 3, 1, 1, 10) + b"abc",               # client id runs past the end
    struct.pack(">hhih", 3, 9, 1, 0) + bytes([1, 0x80]),      # tag buffer with a broken varint
    struct.pack(">hhih", 3, 9, 1, 0) + bytes([1, 1, 9, 0]),   # tagged field longer than the frame
])
def test_malformed_headers_raise(frame):
    with pytest.raises(MalformedRequest):
        codec.peek_header(frame)
        codec.parse_header(frame, flexible=True)


def test_truncated_body_raises():
    header = struct.pack(">hhih", 3, 1, 1, 0)
    body = struct.pack(">i", 2) + struct.pack(">h", 5) + b"ab"  # array of 2 topics, first cut short
    with pytest.raises(MalformedRequest):
        codec.decode_request(3, 1, header + body, len(header))


def test_build_ignores_fields_of_other_versions_and_requires_the_rest():
    old = codec.build_response(10, 0, {"error_code": 0, "error_message": "x", "node_id": 1,
                                      "host": "h", "port": 1, "coordinators": []})
    assert old.node_id == 1 and not hasattr(old, "error_message")
    with pytest.raises(KeyError, match="node_id"):
        codec.build_response(10, 0, {"error_code": 0, "host": "h", "port": 1})


@pytest.mark.parametrize("api_key, version, values", [
    (12, 0, {"error_code": 0}), (12, 4, {"error_code": 27}),                      # Heartbeat v0 / flexible v4
    (18, 3, {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}),  # header v0
])
def test_cached_encoding_is_byte_identical(api_key, version, values):
    from groupd.protocol import ErrorCode

    response = codec.build_response(api_key, version, {**values, "error_code": ErrorCode(values["error_code"])})
    assert codec.encode_response(api_key, 77, codec.Encoded(response)) == codec.encode_response(api_key, 77, response)


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_response_written_directly_is_byte_identical_to_kio(version):
    from groupd.coordinator.apis.offset_commit import _response
    from groupd.protocol import ErrorCode

    # a name and a partition list past one varint byte (flexible versions), non-ASCII, every error kind
    order = [("t", [0, 1, 2]), ("tøpic-" + "x" * 200, list(range(130))), ("", [])]
    errors = {(name, p): [ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.illegal_generation][p % 3]
              for name, parts in order for p in parts}
    kio = codec.build_response(8, version, {"topics": [
        {"name": name, "partitions": [{"partition_index": p, "error_code": errors[(name, p)]} for p in parts]}
        for name, parts in order]})
    ours = _response(version, order, errors)
    assert codec.encode_response(8, 77, ours) == codec.encode_response(8, 77, kio)
    assert ours.error_code is None  # counted as the request's "none" label, as kio's response was


def _classic_members(n: int) -> list[dict]:
    # ids past one varint byte, non-ASCII, static and dynamic members, empty and long metadata
    return [{"member_id": f"cønsumer-{i}-" + "x" * (i * 40), "group_instance_id": None if i % 2 else f"instance-{i}",
             "metadata": bytes(range(i * 70 % 256)) * (i + 1)} for i in range(n)]


@pytest.mark.parametrize("version", range(10))
@pytest.mark.parametrize("protocol_name, protocol_type, members, skip", [
    ("range", "consumer", 5, False), ("", None, 0, False), (None, "connect", 1, True), ("røund", "", 200, True)])
def test_join_group_response_written_directly_is_byte_identical_to_kio(version, protocol_name, protocol_type,
                                                                      members, skip):
    from groupd.coordinator.apis.join_group import _response
    from groupd.coordinator.core.classic.replies import join_reply
    from groupd.protocol import ErrorCode

    for error in (ErrorCode.none, ErrorCode.member_id_required):
        reply = join_reply(error, "member-" + "m" * 130, 7, protocol_type, protocol_name, "léader",
                           _classic_members(members), skip)
        # what the handler gave kio: the name is not nullable before v7, and an empty one is null from v7
        name = (protocol_name or "") if version < 7 else (None if protocol_name == "" else protocol_name)
        kio = codec.build_response(11, version, {**reply, "protocol_name": name})
        ours = _response(version, reply)
        assert codec.encode_response(11, 77, ours) == codec.encode_response(11, 77, kio)
        assert ours.error_code is error  # the metrics' label, as kio's response carried it


@pytest.mark.parametrize("version", range(6))
@pytest.mark.parametrize("protocol_type, protocol_name, assignment", [
    ("consumer", "range", b"\x00\x01" * 100), (None, None, b""), ("", "røund", b"x")])
def test_sync_group_response_written_directly_is_byte_identical_to_kio(version, protocol_type, protocol_name,
                                                                      assignment):
    from groupd.coordinator.apis.sync_group import _response
    from groupd.coordinator.core.classic.replies import sync_reply
    from groupd.protocol import ErrorCode

    for error in (ErrorCode.none, ErrorCode.rebalance_in_progress):
        reply = sync_reply(error, protocol_type, protocol_name, assignment)
        ours = _response(version, reply)
        assert codec.encode_response(14, 77, ours) == codec.encode_response(14, 77, codec.build_response(14, version,
                                                                                                        reply))
        assert ours.error_code is error
