"""Fetch (1), v4–v12.

v4 adds isolation level and aborted transactions; v5 log start offset; v7 fetch sessions (we
never create one: session id 0 makes clients send full fetches); v11 rack id and preferred read
replica; v12 is flexible. v13+ would carry topic ids and are not advertised.
@platformatic/kafka's v12 puts the topic *id* in the name field: such a name is mapped back.

`__consumer_offsets` (either plane), as Kafka serves its internal topic: the offsets log's own
batches, read from its segments off the loop (storage.log.read_batches), with high watermark = log
end and log start = the first segment's base; OFFSET_OUT_OF_RANGE outside them; a partition not
loaded yet is NOT_LEADER_OR_FOLLOWER (retriable). A fetch at its log end is not woken by commits:
it waits out its max wait.

`records.plane: none`, the empty data plane: every partition answers error 0, no
records, high watermark = max(fetch offset, 0), held for the request's max wait (never a busy
loop, never OFFSET_OUT_OF_RANGE, which would make clients reset and overwrite committed offsets).

`records.plane: disk` (the default) and `memory`, as a Kafka leader answers (the disk plane reads the
segment files off the loop: fetch_disk.py):
- whole record batches from the one holding the fetch offset, at most `partition_max_bytes` per
  partition and `max_bytes` per response, except that the first batch of the first partition
  with data always comes whole, however large (KIP-74), so a consumer always progresses;
- high watermark = log end, the last stable offset (below the first offset of any transaction not yet
  ended by a durable marker: storage/records_plane/transactions.py), the log start offset; with
  isolation_level 1 (read_committed) only batches below the last stable offset, and the aborted
  transactions (producer id, first offset) overlapping the batches returned (an empty list when none,
  null under read_uncommitted, as Kafka); a held read_committed fetch wakes when the LSO moves;
- OFFSET_OUT_OF_RANGE exactly when the fetch offset is below the log start offset or above the
  high watermark (fetching at the high watermark is the normal wait for new data);
- answered at once when there is at least `min_bytes` of data, when a partition has an error or
  when `max_wait` is 0; otherwise held until enough data is appended to a fetched partition (an
  append wakes the held fetch: no polling) or until `max_wait`, whichever comes first.
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.runtime.offsets_topic import log_range
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.log import read_batches
from groupd.storage.records_plane import plane_for
from groupd.storage.records_plane.transactions import end_of_batches

from .fetch_common import _entry, _fixed, _respond, _topic, _unknown, _unreadable, aborted_entries
from .fetch_disk import answer as answer_disk
from .leader_epoch_check import fetch_epoch
from .request import Request

KEY = ApiKey.FETCH
VERSIONS = (4, 12)


# ---------------------------------------------------------------------------------------------
# __consumer_offsets: planned on the loop, read off it


def _plan_offsets_log(node, body) -> dict[int, dict | tuple]:
    """Per fetched partition of `__consumer_offsets`: its entry when no read is needed, else what to
    read (segments, fetch offset, log start, log end, max bytes), snapshotted on the loop."""
    plan: dict[int, dict | tuple] = {}
    aborted = [] if body.isolation_level == 1 else None
    for t in body.topics:
        if _topic(node, t.topic) is not node.offsets_topic:
            continue
        for p in t.partitions:
            if not 0 <= p.partition < node.offsets_topic.partitions:
                plan[p.partition] = _unknown(p.partition)
                continue
            found = log_range(node.coordinator, p.partition)
            if found is None:
                plan[p.partition] = _entry(p.partition, ErrorCode.not_leader_or_follower, -1, -1)
                continue
            start, end = found
            if not start <= p.fetch_offset <= end:
                plan[p.partition] = _entry(p.partition, ErrorCode.offset_out_of_range, start, end)
            elif p.fetch_offset == end:
                plan[p.partition] = _entry(p.partition, ErrorCode.none, start, end, aborted=aborted)
            else:
                segments = list(node.coordinator.writers[p.partition].plog.segments)
                plan[p.partition] = (segments, p.fetch_offset, start, end, min(p.partition_max_bytes, body.max_bytes),
                                     aborted)
    return plan


def _read_offsets_log(plan: dict[int, dict | tuple]) -> dict[int, dict]:
    """The planned reads done (blocking: on the node's answer thread)."""
    out = {}
    for index, step in plan.items():
        if isinstance(step, dict):
            out[index] = step
        else:
            segments, offset, start, end, max_bytes, aborted = step
            out[index] = _entry(index, ErrorCode.none, start, end, read_batches(segments, offset, end, max_bytes),
                                aborted=aborted)
    return out


def handle(node, request: Request):
    plan = _plan_offsets_log(node, request.body)
    if not plan:
        return _answer(node, request, {})
    loop = asyncio.get_running_loop()
    out = loop.create_future()

    def read(f: asyncio.Future) -> None:
        if out.done():
            return
        try:
            answer = _answer(node, request, f.result())
        except Exception as e:  # a failed read or a bug: the connection logs it and closes
            out.set_exception(e)
            return
        if isinstance(answer, asyncio.Future):  # held: answers when the wait ends
            answer.add_done_callback(lambda held: _forward(held, out))
            out.add_done_callback(lambda _: answer.cancel())  # the connection went away
        else:
            out.set_result(answer)

    loop.run_in_executor(node.answers, _read_offsets_log, plan).add_done_callback(read)
    return out


def _partition(index: int, fetch_offset: int, known: bool) -> dict:
    if not known:
        return _unknown(index)
    end = max(fetch_offset, 0)
    return {"partition_index": index, "error_code": ErrorCode.none, "high_watermark": end,
            "last_stable_offset": end, "log_start_offset": 0, "aborted_transactions": (),
            "preferred_read_replica": -1, "records": b""}


def _forward(src: asyncio.Future, dst: asyncio.Future) -> None:
    if dst.done() or src.cancelled():
        return
    if src.exception() is not None:
        dst.set_exception(src.exception())
    else:
        dst.set_result(src.result())


def _answer(node, request: Request, offsets_log: dict[int, dict]):
    """The answer once `__consumer_offsets`' partitions (if any were fetched) have been read."""
    plane = plane_for(node)
    if getattr(plane, "DISK", False):
        return answer_disk(node, plane, request, offsets_log)
    if plane is not None:
        return _handle_memory(node, plane, request, offsets_log)
    body = request.body
    denied = _unreadable(node, request)
    responses = []
    for t in body.topics:
        if t.topic in denied:
            responses.append({"topic": t.topic, "partitions": [
                _unknown(p.partition, ErrorCode.topic_authorization_failed) for p in t.partitions]})
            continue
        topic = _topic(node, t.topic)
        if topic is node.offsets_topic:
            responses.append({"topic": t.topic, "partitions": [offsets_log[p.partition] for p in t.partitions]})
            continue
        responses.append({"topic": t.topic, "partitions": [
            _partition(p.partition, p.fetch_offset, topic is not None and 0 <= p.partition < topic.partitions)
            for p in t.partitions]})
    response = build_response(ApiKey.FETCH, request.version,
                              {"error_code": ErrorCode.none, "session_id": 0, "responses": responses})
    wait = body.max_wait.total_seconds()
    if wait <= 0 or body.min_bytes <= 0 or not responses or any(e["records"] for e in offsets_log.values()):
        return response  # Kafka answers at once when nothing could satisfy a wait
    return node.hold(wait, response)


# ---------------------------------------------------------------------------------------------
# The memory plane


def _read(node, plane, body, denied: set[str],
          offsets_log: dict[int, dict]) -> tuple[list[dict], int, bool, list[tuple]]:
    """The response's topics, the record bytes in them, whether any partition has an error, and
    what to watch while held: (key, fetch offset, partition max bytes) of the known partitions."""
    budget = body.max_bytes if body.max_bytes > 0 else 0
    used = 0
    error = False
    watched: list[tuple] = []
    responses = []
    committed = body.isolation_level == 1
    for t in body.topics:
        topic = _topic(node, t.topic)
        partitions = []
        for p in t.partitions:
            fixed = _fixed(node, topic, t.topic, p.partition, denied, offsets_log, fetch_epoch(p))
            if fixed is not None:  # __consumer_offsets' records count; nothing here is watched
                partitions.append(fixed)
                used += len(fixed["records"] or b"")
                error = error or fixed["error_code"] is not ErrorCode.none
                continue
            key = (topic.topic_id, p.partition)
            log = plane.peek(key)
            start, end = (log.log_start, log.high_watermark) if log is not None else (0, 0)
            lso = log.last_stable_offset if log is not None else end
            entry = _entry(p.partition, ErrorCode.none, start, end, lso=lso, aborted=[] if committed else None)
            readable = lso if committed else end  # read_committed stops at the last stable offset
            if p.fetch_offset < start or p.fetch_offset > end:
                entry["error_code"], entry["aborted_transactions"] = ErrorCode.offset_out_of_range, None  # Kafka: null
                error = True
            elif log is not None and p.fetch_offset < readable:
                limit = min(p.partition_max_bytes, budget - used)
                batches = log.read(p.fetch_offset, max(limit, 0), at_least_one=used == 0, end=readable)
                if batches:
                    data = b"".join(b.data for b in batches)
                    entry["records"] = data
                    used += len(data)
                    if committed:
                        entry["aborted_transactions"] = aborted_entries(log.producers.txns, p.fetch_offset,
                                                                        end_of_batches(batches[-1].data))
            watched.append((key, p.fetch_offset, p.partition_max_bytes, committed))
            partitions.append(entry)
        responses.append({"topic": t.topic, "partitions": partitions})
    return responses, used, error, watched


def _handle_memory(node, plane, request: Request, offsets_log: dict[int, dict]):
    body = request.body
    denied = _unreadable(node, request)
    responses, used, error, watched = _read(node, plane, body, denied, offsets_log)
    wait = body.max_wait.total_seconds()
    if wait <= 0 or used >= body.min_bytes or error:
        return _respond(request, responses, plane.traffic)
    if not watched:  # nothing an append could wake: only __consumer_offsets (waits), or nothing at all
        response = _respond(request, responses, plane.traffic)
        return node.hold(wait, response) if offsets_log else response

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
            out.set_result(_respond(request, _read(node, plane, body, denied, offsets_log)[0], plane.traffic))
        except Exception as e:  # never into the producer's append that woke us: the fetch's
            out.set_exception(e)  # connection logs it and closes

    def appended() -> None:
        available = 0
        for key, offset, partition_max, committed in watched:
            log = plane.peek(key)
            if log is not None:
                available += min(log.bytes_from(offset, partition_max, log.last_stable_offset if committed else None),
                                 partition_max)
        if available >= body.min_bytes:
            finish()

    def cleanup(_f) -> None:  # answered, or cancelled because the connection went away
        plane.unwatch(token)
        if not timer.done():
            timer.cancel()

    token = plane.watch({key for key, *_ in watched}, appended)
    timer.add_done_callback(finish)
    out.add_done_callback(cleanup)
    return out
