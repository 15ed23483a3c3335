"""Fetch (1), v4–v12: the empty data plane.

v4 adds isolation level and aborted transactions; v5 log start offset; v7 fetch sessions (we
never create one: session id 0 makes clients send full fetches); v11 rack id and preferred read
replica; v12 is flexible. v13+ would carry topic ids and are not advertised.

groupd stores no records: every partition answers error 0, no records, high watermark =
max(fetch offset, 0), held for the request's max wait (never a busy loop, never
OFFSET_OUT_OF_RANGE, which would make clients reset and overwrite committed offsets).
@platformatic/kafka's v12 puts the topic *id* in the name field: such a name is mapped back.
"""

from __future__ import annotations

import uuid

from protocol import ErrorCode
from protocol.apis import ApiKey
from protocol.codec import build_response

from . import Request


def _topic(node, name: str):
    topic = node.catalog.get(name)
    if topic is None and len(name) == 36:
        try:
            topic = node.catalog.by_id(uuid.UUID(name))
        except ValueError:
            pass
    return topic


def _partition(index: int, fetch_offset: int, known: bool) -> dict:
    if not known:
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition,
                "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                "aborted_transactions": None, "preferred_read_replica": -1, "records": None}
    end = max(fetch_offset, 0)
    return {"partition_index": index, "error_code": ErrorCode.none, "high_watermark": end,
            "last_stable_offset": end, "log_start_offset": 0, "aborted_transactions": (),
            "preferred_read_replica": -1, "records": b""}


def handle(node, request: Request):
    body = request.body
    responses = []
    for t in body.topics:
        topic = _topic(node, t.topic)
        responses.append({"topic": t.topic, "partitions": [
            _partition(p.partition, p.fetch_offset, topic is not None and 0 <= p.partition < topic.partitions)
            for p in t.partitions]})
    response = build_response(ApiKey.FETCH, request.version,
                              {"error_code": ErrorCode.none, "session_id": 0, "responses": responses})
    wait = body.max_wait.total_seconds()
    if wait <= 0 or body.min_bytes <= 0 or not responses:
        return response  # Kafka answers at once when nothing could satisfy a wait
    return node.hold(wait, response)
