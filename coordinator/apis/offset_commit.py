"""OffsetCommit (8), v2–v9 (Kafka 4 removed v0–v1).

v2–v4 carry a retention time (-1 = the broker's; otherwise the offset gets an expire timestamp
and is written as OffsetCommitValue v1); v3 adds throttle time; v5 drops the retention time;
v6 adds the committed leader epoch; v7 static membership (group.instance.id); v8 is flexible;
v9 answers a commit with a generation for a group that does not exist with GROUP_ID_NOT_FOUND
instead of ILLEGAL_GENERATION. v10 (topic ids) is not advertised.

Topics and partitions that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION here; the rest
go to the group's shard, and the reply leaves once their records are durable.
"""

from __future__ import annotations

import struct

from groupd.coordinator.core.requests import OffsetCommitRequest
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.bounds import encode_uvarint
from groupd.protocol.codec import Encoded

from .request import Request, ms, respond

KEY = ApiKey.OFFSET_COMMIT
VERSIONS = (2, 9)


def checked_offsets(node, request: Request) -> tuple[list[tuple], dict[tuple[str, int], ErrorCode]]:
    """The offsets of an OffsetCommit or TxnOffsetCommit that pass the topic checks (READ on the topic,
    then its existence and the partition's), as (topic, partition, offset, leader epoch, metadata),
    and the error of each other partition."""
    refused: dict[tuple[str, int], ErrorCode] = {}
    offsets = []
    for t in request.body.topics:
        topic = node.catalog.get(t.name)
        topic_error = (ErrorCode.topic_authorization_failed  # before existence: a denied caller learns nothing
                       if not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, t.name) else
                       ErrorCode.unknown_topic_or_partition if topic is None else None)
        for p in t.partitions:
            if topic_error is not None:
                refused[(t.name, p.partition_index)] = topic_error
            elif not 0 <= p.partition_index < topic.partitions:
                refused[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                offsets.append((t.name, p.partition_index, p.committed_offset,
                                getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
    return offsets, refused


def handle(node, request: Request):
    body, version = request.body, request.version
    order = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return error_response(version, body, ErrorCode.group_authorization_failed)
    offsets, unknown = checked_offsets(node, request)
    retention_ms = ms(body.retention_time) if 2 <= version <= 4 else -1
    if not offsets:
        return _response(version, order, unknown)
    result = node.coordinator.commit(OffsetCommitRequest(body.group_id, body.generation_id_or_member_epoch, body.member_id,
                                                    getattr(body, "group_instance_id", None), retention_ms, offsets,
                                                    version))
    return respond(result, lambda errors: _response(version, order, {**unknown, **errors}))


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ih")  # partition index, error code
_THROTTLE = b"\x00\x00\x00\x00"  # throttle_time_ms = 0 (v3+)
_NO_TAGS = b"\x00"


def _response(version: int, order, errors: dict) -> Encoded:
    """The response, written straight to bytes: built and written through kio it was a fifth of
    a commit's CPU. Byte-identical to kio's encoding of every version (tests/protocol/test_framing.py)."""
    flexible = version >= 8
    out = [_THROTTLE] if version >= 3 else []
    if flexible:
        out.append(encode_uvarint(len(order) + 1))
        for name, parts in order:
            encoded = name.encode()
            out += (encode_uvarint(len(encoded) + 1), encoded, encode_uvarint(len(parts) + 1))
            for p in parts:
                out += (_PARTITION.pack(p, errors[(name, p)]), _NO_TAGS)
            out.append(_NO_TAGS)
        out.append(_NO_TAGS)
    else:
        out.append(_INT32.pack(len(order)))
        for name, parts in order:
            encoded = name.encode()
            out += (_INT16.pack(len(encoded)), encoded, _INT32.pack(len(parts)))
            out += [_PARTITION.pack(p, errors[(name, p)]) for p in parts]
    return Encoded.of(b"".join(out), flexible)


def error_response(version: int, body, error: ErrorCode) -> Encoded:
    """The answer carrying only `error`, in every requested partition (an injected fault's)."""
    order = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    return _response(version, order, {(name, p): error for name, parts in order for p in parts})
