"""StreamsGroupHeartbeat (88) v1 and StreamsGroupDescribe (89) v1 (Kafka 4.4, KIP-1331), whose codecs
protocol/newer_versions.py builds from Kafka 4.4.0's schemas (kio 0.6.5 stops at v0), against bytes
laid out by hand from those schemas: the request of the heartbeat is v0's; its answer puts an int64
AcceptableRecoveryLag after TaskOffsetIntervalMs (v0's int32 one is gone) and TopologyDescriptionRequired
after WarmupTasks; the describe request ends with IncludeTopologyDescription, each described group with
TopologyDescription (a nullable struct: int8 -1 null), TopologyDescriptionStatus (int8) and
AssignorName (nullable compact string)."""

from __future__ import annotations

import dataclasses
import re
import struct
import typing

from kio.index import load_request_schema, load_response_schema

from groupd.coordinator.apis.streams_group_heartbeat import _response
from groupd.coordinator.core.streams.machine import error_reply
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import (
    _entity_in,
    build_response,
    decode_request,
    encode_response,
    parse_header,
    request_class,
    response_class,
)

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


def request_frame(api: int, version: int, body: bytes) -> bytes:
    return struct.pack(">hhi", api, version, 9) + struct.pack(">h", 1) + b"c" + TAGS + body


def test_heartbeat_request_v1_is_laid_out_as_v0():
    body = (cstr("sg") + cstr("m") + i32(3) + i32(1) + cstr(None) + cstr(None) + i32(-1) + b"\xff"  # no topology
            + carray([cstr("0") + carray([i32(0), i32(1)]) + TAGS]) + carray([]) + carray([])
            + cstr(None) + b"\xff" + b"\x00" + b"\x00" + b"\x00" + b"\x00" + TAGS)
    frame = request_frame(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, body)
    _, offset = parse_header(frame, True)
    req = decode_request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, frame, offset)
    assert (req.group_id, req.member_id, req.member_epoch, req.endpoint_information_epoch, req.topology) == (
        "sg", "m", 3, 1, None)
    assert [(t.subtopology_id, list(t.partitions)) for t in req.active_tasks] == [("0", [0, 1])]
    assert (req.client_tags, req.task_offsets, req.shutdown_application) == (None, None, False)


def test_heartbeat_response_v1_has_an_int64_recovery_lag_and_topology_description_required():
    reply = {**error_reply(ErrorCode.none), "member_id": "m", "member_epoch": 4, "heartbeat_interval_ms": 5000,
             "acceptable_recovery_lag": 10000, "status": [], "active_tasks": [{"subtopology_id": "0",
                                                                                "partitions": [1]}],
             "standby_tasks": [], "warmup_tasks": [], "endpoint_information_epoch": 2}
    frame = encode_response(ApiKey.STREAMS_GROUP_HEARTBEAT, 7, _response(1, reply))
    body = (i32(0) + struct.pack(">h", 0) + cstr(None) + cstr("m") + i32(4) + i32(5000) + i32(0)
            + struct.pack(">q", 10000) + carray([]) + carray([cstr("0") + carray([i32(1)]) + TAGS])
            + carray([]) + carray([]) + b"\x00" + i32(2) + b"\x00" + TAGS)
    assert frame[4 + 4 + 1:] == body


def test_heartbeat_error_v1_answers_the_recovery_lag_default():
    frame = encode_response(ApiKey.STREAMS_GROUP_HEARTBEAT, 7,
                            _response(1, error_reply(ErrorCode.fenced_member_epoch, "fenced")))
    body = (i32(0) + struct.pack(">h", 110) + cstr("fenced") + cstr("") + i32(0) + i32(0) + i32(0)
            + struct.pack(">q", -1) + b"\x00" * 4 + b"\x00" + i32(0) + b"\x00" + TAGS)
    assert frame[4 + 4 + 1:] == body
    v0 = encode_response(ApiKey.STREAMS_GROUP_HEARTBEAT, 7,
                         _response(0, error_reply(ErrorCode.fenced_member_epoch, "fenced")))
    assert v0[4 + 4 + 1 + 2 + 2 + 7 + 1 + 4 + 4:][:4] == i32(0)  # v0's int32 lag stays 0


def test_describe_request_v1_asks_for_the_topology_description():
    frame = request_frame(ApiKey.STREAMS_GROUP_DESCRIBE, 1, carray([cstr("sg")]) + b"\x00" + b"\x01" + TAGS)
    _, offset = parse_header(frame, True)
    req = decode_request(ApiKey.STREAMS_GROUP_DESCRIBE, 1, frame, offset)
    assert (list(req.group_ids), req.include_authorized_operations, req.include_topology_description) == (
        ["sg"], False, True)
    assert request_class(ApiKey.STREAMS_GROUP_DESCRIBE, 0) is not request_class(ApiKey.STREAMS_GROUP_DESCRIBE, 1)


def test_describe_response_v1_layout():
    response = build_response(ApiKey.STREAMS_GROUP_DESCRIBE, 1, {"groups": [
        {"error_code": ErrorCode.none, "error_message": None, "group_id": "sg", "group_state": "Empty",
         "group_epoch": 2, "assignment_epoch": 2, "topology": None, "members": [], "authorized_operations": -2**31,
         "topology_description_status": 1, "assignor_name": "sticky"},
        {"error_code": ErrorCode.group_id_not_found, "error_message": "Group x not found.", "group_id": "x",
         "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
         "authorized_operations": -2**31, "topology_description_status": 0, "assignor_name": None}]})
    frame = encode_response(ApiKey.STREAMS_GROUP_DESCRIBE, 1, response)
    found = (struct.pack(">h", 0) + cstr(None) + cstr("sg") + cstr("Empty") + i32(2) + i32(2) + b"\xff"
             + carray([]) + i32(-2**31) + b"\xff" + b"\x01" + cstr("sticky") + TAGS)
    missing = (struct.pack(">h", 69) + cstr("Group x not found.") + cstr("x") + cstr("") + i32(0) + i32(0)
               + b"\xff" + carray([]) + i32(-2**31) + b"\xff" + b"\x00" + cstr(None) + TAGS)
    assert frame[4 + 4 + 1:] == i32(0) + carray([found, missing]) + TAGS


def _fields(cls: type, seen: dict) -> None:
    """{struct name: {field: (type without module paths, metadata, default)}} of cls and its nested structs."""
    if cls.__name__ in seen:
        return
    seen[cls.__name__] = {}
    for f in dataclasses.fields(cls):
        shape = re.sub(r"[\w.]+\.(?=\w+\b)", "", str(f.type))  # v0's kio classes and v1's are other modules
        seen[cls.__name__][f.name] = (shape, dict(f.metadata), f.default)
    for hint in typing.get_type_hints(cls).values():
        nested = _entity_in(hint)
        if nested is not None:
            _fields(nested, seen)


def test_v1_differs_from_kios_v0_only_by_kafka_4_4s_schema_changes():
    changes = []
    for api in (ApiKey.STREAMS_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_DESCRIBE):
        for v0, v1 in ((load_request_schema(api, 0), request_class(api, 1)),
                       (load_response_schema(api, 0), response_class(api, 1))):
            old, new = {}, {}
            _fields(v0, old)
            _fields(v1, new)
            for struct_name, fields in new.items():
                before = old.get(struct_name, {})
                changes += [(struct_name, name) for name, f in fields.items() if before.get(name) != f]
                changes += [(struct_name, f"-{name}") for name in before if name not in fields]
    assert sorted(changes) == sorted([
        ("StreamsGroupHeartbeatResponse", "acceptable_recovery_lag"),  # int32 → int64
        ("StreamsGroupHeartbeatResponse", "topology_description_required"),
        ("StreamsGroupDescribeRequest", "include_topology_description"),
        ("DescribedGroup", "topology_description"), ("DescribedGroup", "topology_description_status"),
        ("DescribedGroup", "assignor_name"),
        *[(s, f) for s, fs in (("TopologyDescription", ("subtopologies", "global_stores")),
                               ("TopologyDescriptionSubtopology", ("subtopology_id", "nodes")),
                               ("TopologyDescriptionNode", ("name", "node_type", "source_topics", "sink_topic",
                                                            "stores", "successors")),
                               ("TopologyDescriptionGlobalStore", ("source", "processor"))) for f in fs]])
