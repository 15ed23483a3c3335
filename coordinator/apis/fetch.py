"""Fetch (1), v4–v12.

v4 adds isolation level and aborted transactions; v5 log start offset; v7 fetch sessions (we
never create one: session id 0 makes clients send full fetches); v11 rack id and preferred read
replica; v12 is flexible. v13+ would carry topic ids and are not advertised.
@platformatic/kafka's v12 puts the topic *id* in the name field: such a name is mapped back.

`records.plane: none`, the empty data plane: every partition answers error 0, no
records, high watermark = max(fetch offset, 0), held for the request's max wait (never a busy
loop, never OFFSET_OUT_OF_RANGE, which would make clients reset and overwrite committed offsets).

`records.plane: memory` (the default), as a Kafka leader answers:
- whole record batches from the one holding the fetch offset, at most `partition_max_bytes` per
  partition and `max_bytes` per response, except that the first batch of the first partition
  with data always comes whole, however large (KIP-74), so a consumer always progresses;
- high watermark = last stable offset = log end, the log start offset, no aborted transactions
  (no transactions are stored, so both isolation levels read the same);
- OFFSET_OUT_OF_RANGE exactly when the fetch offset is below the log start offset or above the
  high watermark (fetching at the high watermark is the normal wait for new data);
- answered at once when there is at least `min_bytes` of data, when a partition has an error or
  when `max_wait` is 0; otherwise held until enough data is appended to a fetched partition (an
  append wakes the held fetch: no polling) or until `max_wait`, whichever comes first.
"""

from __future__ import annotations

import asyncio
import uuid

from protocol import ErrorCode
from protocol.apis import ApiKey
from protocol.codec import build_response
from storage.topic_data import plane_for

from . import Request

KEY = ApiKey.FETCH
VERSIONS = (4, 12)


def _topic(node, name: str):
    topic = node.catalog.get(name)
    if topic is None and len(name) == 36:
        try:
            topic = node.catalog.by_id(uuid.UUID(name))
        except ValueError:
            pass
    return topic


def _unknown(index: int) -> dict:
    return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition,
            "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": None}


def _partition(index: int, fetch_offset: int, known: bool) -> dict:
    if not known:
        return _unknown(index)
    end = max(fetch_offset, 0)
    return {"partition_index": index, "error_code": ErrorCode.none, "high_watermark": end,
            "last_stable_offset": end, "log_start_offset": 0, "aborted_transactions": (),
            "preferred_read_replica": -1, "records": b""}


def handle(node, request: Request):
    plane = plane_for(node)
    if plane is not None:
        return _handle_memory(node, plane, request)
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


# ---------------------------------------------------------------------------------------------
# The memory plane


def _read(node, plane, body) -> tuple[list[dict], int, bool, list[tuple]]:
    """The response's topics, the record bytes in them, whether any partition has an error, and
    what to watch while held: (key, fetch offset, partition max bytes) of the known partitions."""
    budget = body.max_bytes if body.max_bytes > 0 else 0
    used = 0
    error = False
    watched: list[tuple] = []
    responses = []
    for t in body.topics:
        topic = _topic(node, t.topic)
        partitions = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition < topic.partitions:
                partitions.append(_unknown(p.partition))
                error = True
                continue
            key = (topic.topic_id, p.partition)
            log = plane.peek(key)
            start, end = (log.log_start, log.high_watermark) if log is not None else (0, 0)
            entry = {"partition_index": p.partition, "error_code": ErrorCode.none, "high_watermark": end,
                     "last_stable_offset": end, "log_start_offset": start, "aborted_transactions": (),
                     "preferred_read_replica": -1, "records": b""}
            if p.fetch_offset < start or p.fetch_offset > end:
                entry["error_code"] = ErrorCode.offset_out_of_range
                error = True
            elif log is not None and p.fetch_offset < end:
                limit = min(p.partition_max_bytes, budget - used)
                batches = log.read(p.fetch_offset, max(limit, 0), at_least_one=used == 0)
                if batches:
                    data = b"".join(b.data for b in batches)
                    entry["records"] = data
                    used += len(data)
            watched.append((key, p.fetch_offset, p.partition_max_bytes))
            partitions.append(entry)
        responses.append({"topic": t.topic, "partitions": partitions})
    return responses, used, error, watched


def _respond(request: Request, responses: list[dict]):
    return build_response(ApiKey.FETCH, request.version,
                          {"error_code": ErrorCode.none, "session_id": 0, "responses": responses})


def _handle_memory(node, plane, request: Request):
    body = request.body
    responses, used, error, watched = _read(node, plane, body)
    wait = body.max_wait.total_seconds()
    if wait <= 0 or used >= body.min_bytes or error or not watched:
        return _respond(request, responses)

    loop = asyncio.get_running_loop()
    out = loop.create_future()
    timer = node.hold(wait, None)  # resolves after max wait, or at once when the node shuts down

    def finish(_=None) -> None:
        if out.done():
            return
        plane.unwatch(token)
        if not timer.done():
            timer.cancel()
        try:
            out.set_result(_respond(request, _read(node, plane, body)[0]))
        except Exception as e:  # never into the producer's append that woke us: the fetch's
            out.set_exception(e)  # connection logs it and closes

    def appended() -> None:
        available = 0
        for key, offset, partition_max in watched:
            log = plane.peek(key)
            if log is not None:
                available += min(log.bytes_from(offset, partition_max), partition_max)
        if available >= body.min_bytes:
            finish()

    def cleanup(_f) -> None:  # answered, or cancelled because the connection went away
        plane.unwatch(token)
        if not timer.done():
            timer.cancel()

    token = plane.watch({key for key, _, _ in watched}, appended)
    timer.add_done_callback(finish)
    out.add_done_callback(cleanup)
    return out
