"""DeleteRecords (21), v0–v2.

v1 changes nothing but the throttling (KIP-219); v2 is flexible.

Each partition's log start moves up to the offset asked, as Kafka's `KafkaApis.handleDeleteRecordsRequest`
and `ReplicaManager.deleteRecords` do for a partition with one replica, checked in Kafka's order:
- DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED (unknown topics too: their existence stays hidden);
- an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
- `__consumer_offsets`: INVALID_TOPIC_EXCEPTION (Kafka: "Cannot delete records of internal topic");
- a partition another node leads (workers, cluster mode), or one still loading: NOT_LEADER_OR_FOLLOWER;
- a topic whose `cleanup.policy` lacks `delete`: POLICY_VIOLATION;
- offset -1 means the high watermark; past the high watermark, or below -1: OFFSET_OUT_OF_RANGE;
- at or below the log start nothing changes; otherwise the log start moves to the offset. The answer's
  `low_watermark` is the log start (-1 with an error).

The disk plane answers once the new log start is saved (coordinator/runtime/log_start.py), so it
survives kill -9; the closed segments wholly below it are deleted. The memory plane drops the batches
wholly below it at once (after a restart it resumes, empty, at its log end anyway). `timeout_ms` is
not waited on: Kafka waits there for the followers' log starts, and a partition here has no followers.
With `records.plane: none` a partition holds nothing: 0 and -1 answer 0, anything above
OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

import asyncio
import logging

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for

from .request import Request, respond_all

KEY = ApiKey.DELETE_RECORDS
VERSIONS = (0, 2)
HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK

log = logging.getLogger("groupd")


def _result(index: int, error: ErrorCode, low_watermark: int = -1) -> dict:
    return {"partition_index": index, "low_watermark": low_watermark, "error_code": error}


def _empty(offset: int) -> tuple[ErrorCode, int]:
    """`records.plane: none`: a partition that holds nothing, at offset 0."""
    return (ErrorCode.none, 0) if offset in (0, HIGH_WATERMARK) else (ErrorCode.offset_out_of_range, -1)


def _delete(node, plane, topic, index: int, offset: int):
    """One partition's result: a dict, or a future of one (the disk plane saves the new start first)."""
    if topic is None or not 0 <= index < topic.partitions:
        return _result(index, ErrorCode.unknown_topic_or_partition)
    if topic is node.offsets_topic:
        return _result(index, ErrorCode.invalid_topic_exception)
    if not node.cluster.leads(topic.name, index):
        return _result(index, ErrorCode.not_leader_or_follower)
    if not node.catalog.topic_config(topic.name).delete:
        return _result(index, ErrorCode.policy_violation)
    if plane is None:
        done = _empty(offset)
    elif getattr(plane, "DISK", False):
        done = plane.delete_records(topic, index, offset)
    else:
        key = (topic.topic_id, index)
        found = plane.peek(key)
        before = found.log_start if found is not None else 0
        done = plane.delete_records(key, offset)
        if done[0] is ErrorCode.none and done[1] > before:
            log.info("log start moved partition=%s-%d from=%d to=%d reason=delete-records", topic.name, index,
                     before, done[1])
    if isinstance(done, asyncio.Future):
        out = asyncio.get_running_loop().create_future()
        done.add_done_callback(lambda f: out.done() or out.set_result(_result(index, *f.result())))
        return out
    return _result(index, *done)


def handle(node, request: Request):
    plane = plane_for(node)
    topics = []
    for t in request.body.topics:
        if not authorized(node, request, AclOperation.DELETE, ResourceType.TOPIC, t.name):
            partitions = [_result(p.partition_index, ErrorCode.topic_authorization_failed) for p in t.partitions]
        else:
            topic = node.offsets_topic if t.name == node.offsets_topic.name else node.catalog.get(t.name)
            partitions = [_delete(node, plane, topic, p.partition_index, p.offset) for p in t.partitions]
        topics.append((t.name, partitions))
    flat = [p for _, partitions in topics for p in partitions]

    def make(done: list[dict]):
        answered, i = [], 0
        for name, partitions in topics:
            answered.append({"name": name, "partitions": done[i:i + len(partitions)]})
            i += len(partitions)
        refused = [f"{a['name']}-{p['partition_index']}:{p['error_code'].name}" for a in answered
                   for p in a["partitions"] if p["error_code"] is not ErrorCode.none]
        if refused:
            log.info("delete records refused client=%s partitions=%s", request.header.client_id, ",".join(refused))
        return build_response(ApiKey.DELETE_RECORDS, request.version, {"topics": answered})

    return respond_all(flat, make)
