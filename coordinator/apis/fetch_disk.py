"""Fetch (1) over the disk records plane: what a partition answers is planned on the loop (log start,
high watermark = durable end, the segment and byte position from the sparse index), the batches are
read from the segment files on the node's answer thread (no per-record objects: the bytes as stored),
and the response is built back on the loop. The limits are the memory plane's (fetch.py): whole
batches, `partition_max_bytes` per partition and `max_bytes` per response except the first batch
(KIP-74); one segment per partition per fetch, as Kafka reads; read_committed (fetch.py) below the
last stable offset, with the aborted transactions overlapping what was read. A fetch that cannot be satisfied
waits until a watched partition's durable end moves (no polling) or its max wait.
"""

from __future__ import annotations

import asyncio
import logging

from groupd.coordinator.runtime.records_disk import Unavailable
from groupd.protocol import ErrorCode
from groupd.storage.records_plane.segments import read_from
from groupd.storage.records_plane.transactions import end_of_batches

from .fetch_common import _entry, _fixed, _respond, _topic, _unknown, _unreadable
from .leader_epoch_check import fetch_epoch

log = logging.getLogger("groupd")


def _plan(node, plane, body, denied: set[str], offsets_log: dict[int, dict]):
    """(responses, reads, error, watched): reads are (entry, path, position, offset, end, max, following)
    in response order, fixed entries as (entry, None, ...)."""
    steps: list[tuple] = []
    error = False
    watched: list[tuple] = []
    responses = []
    committed = body.isolation_level == 1
    for t in body.topics:
        topic = _topic(node, t.topic)
        partitions = []
        for p in t.partitions:
            entry = _fixed(node, topic, t.topic, p.partition, denied, offsets_log, fetch_epoch(p))
            if entry is not None:
                if topic is node.offsets_topic and t.topic not in denied:
                    steps.append((entry, None))  # its records count against the response's budget
                error = error or entry["error_code"] is not ErrorCode.none
                partitions.append(entry)
                continue
            try:
                part = plane.partition(topic, p.partition)
            except Unavailable as e:
                partitions.append(_unknown(p.partition, e.error))
                error = True
                continue
            start, end, lso = part.log_start, part.high_watermark, part.last_stable_offset
            entry = _entry(p.partition, ErrorCode.none, start, end, lso=lso, aborted=[] if committed else None)
            readable = lso if committed else end  # read_committed stops at the last stable offset
            if p.fetch_offset < start or p.fetch_offset > end:
                entry["error_code"], entry["aborted_transactions"] = ErrorCode.offset_out_of_range, None  # Kafka: null
                error = True
            elif p.fetch_offset < readable:
                planned = part.dlog.plan_read(p.fetch_offset)
                if planned is not None:
                    path, position, cap, inode = planned
                    # the aborted transactions that may overlap what is read; narrowed once it is read
                    aborted = part.producers.txns.aborted_in(p.fetch_offset, readable) if committed else None
                    steps.append((entry, path, position, p.fetch_offset, readable, p.partition_max_bytes,
                                  part.dlog.following(path), cap, inode, aborted))
            watched.append(((topic.topic_id, p.partition), p.fetch_offset, part.writer.bytes_durable, committed))
            partitions.append(entry)
        responses.append({"topic": t.topic, "partitions": partitions})
    return responses, steps, error, watched


def _read(steps: list[tuple], max_bytes: int) -> int:
    """Do the planned reads in order within the response's budget (blocking: the answer thread);
    the bytes in the response."""
    budget = max_bytes if max_bytes > 0 else 0
    used = 0
    for step in steps:
        entry = step[0]
        if step[1] is None:
            used += len(entry["records"] or b"")
            continue
        _, path, position, offset, end, partition_max, following, cap, inode, aborted = step
        limit = max(min(partition_max, budget - used), 0)
        try:
            data = read_from(path, position, offset, end, limit, used == 0, following, cap, inode)
        except OSError as e:
            log.error("fetch read failed path=%s offset=%d: %s", path, offset, e)
            entry["error_code"], entry["aborted_transactions"] = ErrorCode.kafka_storage_error, None
            continue
        entry["records"] = data
        used += len(data)
        if aborted:
            upper = end_of_batches(data)
            entry["aborted_transactions"] = [{"producer_id": pid, "first_offset": first} for pid, first in aborted
                                             if upper is not None and first < upper]
    return used


def answer(node, plane, request, offsets_log: dict[int, dict]) -> asyncio.Future:
    body = request.body
    denied = _unreadable(node, request)
    loop = asyncio.get_running_loop()
    out = loop.create_future()
    wait = body.max_wait.total_seconds()

    def planned_and_read(held: bool) -> None:
        responses, steps, error, watched = _plan(node, plane, body, denied, offsets_log)

        def read_done(f: asyncio.Future) -> None:
            if out.done():
                return
            if f.exception() is not None:
                out.set_exception(f.exception())
                return
            used = f.result()
            if held or wait <= 0 or used >= body.min_bytes or error or not watched:
                if not held and not watched and offsets_log and wait > 0 and used < body.min_bytes and not error:
                    node.hold(wait, None).add_done_callback(
                        lambda _: out.done() or out.set_result(_respond(request, responses, plane.traffic)))
                    return
                out.set_result(_respond(request, responses, plane.traffic))
                return
            hold(watched)

        loop.run_in_executor(node.answers, _read, steps, body.max_bytes).add_done_callback(read_done)

    def hold(watched: list[tuple]) -> None:
        timer = node.hold(wait, None)
        fired = []

        def finish(_=None) -> None:
            if fired:
                return
            fired.append(True)
            plane.unwatch(token)
            if not timer.done():
                timer.cancel()
            if not out.done():
                planned_and_read(True)

        def appended() -> None:
            available = 0
            for key, offset, durable_before, committed in watched:
                part = plane.peek(key)
                if part is not None and (part.last_stable_offset if committed else part.high_watermark) > offset:
                    available += max(part.writer.bytes_durable - durable_before, 1)
            if available >= body.min_bytes:
                finish()

        token = plane.watch({key for key, *_ in watched}, appended)
        timer.add_done_callback(finish)
        out.add_done_callback(lambda _: (plane.unwatch(token), timer.done() or timer.cancel()))

    planned_and_read(False)
    return out
