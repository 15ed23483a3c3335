"""ListOffsets (2), v1–v9.

v2 adds isolation level; v4 leader epochs; v6 is flexible; v7 the max-timestamp query (-3);
v8 the earliest-local query (-4); v9 the last-tiered query (-5).

Partitions hold no records, so the earliest and latest offsets are both 0; timestamp look-ups
find nothing (offset -1, timestamp -1), as Kafka answers for an empty partition.
"""

from __future__ import annotations

from protocol import ErrorCode
from protocol.apis import ApiKey
from protocol.codec import build_response

from . import Request

LATEST, EARLIEST, EARLIEST_LOCAL = -1, -2, -4


def _answer(topic, index: int, timestamp: int) -> dict:
    if topic is None or not 0 <= index < topic.partitions:
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition}
    offset = 0 if timestamp in (LATEST, EARLIEST, EARLIEST_LOCAL) else -1
    return {"partition_index": index, "error_code": ErrorCode.none, "timestamp": -1,
            "offset": offset, "leader_epoch": -1}


def handle(node, request: Request):
    topics = []
    for t in request.body.topics:
        topic = node.catalog.get(t.name)
        topics.append({"name": t.name,
                       "partitions": [_answer(topic, p.partition_index, p.timestamp) for p in t.partitions]})
    return build_response(ApiKey.LIST_OFFSETS, request.version, {"topics": topics})
