"""ListOffsets (2), v1–v9.

v2 adds isolation level; v4 leader epochs; v6 is flexible; v7 the max-timestamp query (-3);
v8 the earliest-local query (-4); v9 the last-tiered query (-5).

`records.plane: none`: partitions hold no records, so the earliest and latest
offsets are both 0; timestamp look-ups find nothing (offset -1, timestamp -1), as Kafka answers
for an empty partition.

`records.plane: memory`: earliest (-2) and earliest-local (-4) = the log start offset; latest
(-1) = the high watermark, or with isolation_level 1 (read_committed) the last stable offset, below
which a timestamp look-up's answer must then lie (Kafka's `lastFetchableOffset`); max timestamp (-3) = the
record with the largest timestamp; a timestamp ≥ 0 = the first record from the log start whose timestamp is ≥ it,
found through the batches' max timestamps and then record by record in the first batch that
reaches it (offset -1 and timestamp -1 when none does); last tiered (-5) = -1 (no tiered
storage, as Kafka answers without remote storage).

`records.plane: disk` (the default) answers the same, reading the segment files off the loop for
the timestamp queries (the sparse index's per-interval largest timestamps say where to look).

Leader epochs (v4+): a found offset carries its epoch (the epoch that began at or before it: the
partition's leader-epoch-checkpoint on the disk plane; 0 elsewhere, as a fresh Kafka topic), a
record not found -1; the request's current_leader_epoch is checked (leader_epoch_check.py).

`__consumer_offsets` (any plane): earliest = the offsets log's first segment base, latest = its
log end; a timestamp look-up finds nothing (the log is not indexed by time); a partition not yet
loaded is LEADER_NOT_AVAILABLE (retriable).
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.runtime.offsets_topic import log_range
from groupd.coordinator.runtime.records_disk import Unavailable
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for, segments

from .leader_epoch_check import NO_CHECK, epoch_error
from .request import Request

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5

KEY = ApiKey.LIST_OFFSETS
VERSIONS = (1, 9)


def _answer(topic, index: int, timestamp: int) -> dict:
    if topic is None or not 0 <= index < topic.partitions:
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition}
    offset = 0 if timestamp in (LATEST, EARLIEST, EARLIEST_LOCAL) else -1
    return {"partition_index": index, "error_code": ErrorCode.none, "timestamp": -1,
            "offset": offset, "leader_epoch": 0 if offset >= 0 else -1}


def _answer_memory(plane, topic, index: int, timestamp: int, committed: bool = False) -> dict:
    if topic is None or not 0 <= index < topic.partitions:
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition}
    log = plane.peek((topic.topic_id, index))
    found: tuple[int, int] | None
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        found = (log.log_start if log else 0, -1)
    elif timestamp == LATEST:
        found = ((log.last_stable_offset if committed else log.high_watermark) if log else 0, -1)
    elif timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp() if log else None
    elif timestamp >= 0:
        found = log.offset_for_timestamp(timestamp) if log else None
        if found is not None and committed and found[0] >= log.last_stable_offset:
            found = None
    else:  # LATEST_TIERED and anything else
        found = None
    offset, ts = found if found is not None else (-1, -1)
    return {"partition_index": index, "error_code": ErrorCode.none, "timestamp": ts,
            "offset": offset, "leader_epoch": 0 if found is not None else -1}


def _answer_disk(plane, topic, index: int, timestamp: int, reads: list, committed: bool = False) -> dict:
    """The disk plane: earliest and latest at once; a timestamp query is planned here and read from
    the segment files off the loop (`reads`: (entry, function, arguments))."""
    if topic is None or not 0 <= index < topic.partitions:
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition}
    try:
        part = plane.partition(topic, index)
    except Unavailable as e:
        return {"partition_index": index, "error_code": e.error}
    entry = {"partition_index": index, "error_code": ErrorCode.none, "timestamp": -1, "offset": -1,
             "leader_epoch": -1}
    epochs = part.dlog.epochs
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        entry["offset"], entry["leader_epoch"] = part.log_start, epochs.epoch_for(part.log_start)
    elif timestamp == LATEST:
        entry["offset"] = part.last_stable_offset if committed else part.high_watermark
        entry["leader_epoch"] = epochs.latest
    elif timestamp == MAX_TIMESTAMP and part.high_watermark > part.log_start:
        reads.append((entry, segments.max_timestamp, (part.dlog.max_timestamp_plan(),), epochs))
    elif timestamp >= 0:
        reads.append((entry, segments.offset_for_timestamp,
                      (part.dlog.timestamp_plan(timestamp), timestamp,
                       part.last_stable_offset if committed else part.high_watermark, part.log_start), epochs))
    return entry


def _read(reads: list) -> None:
    for entry, function, args, epochs in reads:
        try:
            found = function(*args)
        except OSError:
            entry["error_code"] = ErrorCode.kafka_storage_error
            continue
        if found is not None:
            entry["offset"], entry["timestamp"] = found
            entry["leader_epoch"] = epochs.epoch_for(found[0])


def _answer_offsets_log(node, index: int, timestamp: int) -> dict:
    if not 0 <= index < node.offsets_topic.partitions:
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition}
    found = log_range(node.coordinator, index)
    if found is None:
        return {"partition_index": index, "error_code": ErrorCode.leader_not_available}
    start, end = found
    offset = start if timestamp in (EARLIEST, EARLIEST_LOCAL) else end if timestamp == LATEST else -1
    return {"partition_index": index, "error_code": ErrorCode.none, "timestamp": -1, "offset": offset,
            "leader_epoch": node.cluster.coordinator_epoch(index) if offset >= 0 else -1}


def _checked(node, topic, p, answer) -> dict:
    """The partition's answer, unless the request's current leader epoch (v4+) is not the leader's."""
    if topic is not None and 0 <= p.partition_index < topic.partitions:
        error = epoch_error(node, topic.name, p.partition_index, getattr(p, "current_leader_epoch", NO_CHECK))
        if error is not None:
            return {"partition_index": p.partition_index, "error_code": error}
    return answer()


def handle(node, request: Request):
    plane = plane_for(node)
    disk = getattr(plane, "DISK", False)
    reads: list = []
    topics = []
    committed = getattr(request.body, "isolation_level", 0) == 1
    for t in request.body.topics:
        if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name):
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": ErrorCode.topic_authorization_failed,
                 "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.partitions]})
            continue
        topic = node.catalog.get(t.name)
        if t.name == node.offsets_topic.name:
            partitions = [_answer_offsets_log(node, p.partition_index, p.timestamp) for p in t.partitions]
        elif plane is None:
            partitions = [_checked(node, topic, p, lambda p=p: _answer(topic, p.partition_index, p.timestamp))
                          for p in t.partitions]
        elif disk:
            partitions = [_checked(node, topic, p, lambda p=p: _answer_disk(plane, topic, p.partition_index,
                                                                           p.timestamp, reads, committed))
                          if topic is None or node.cluster.leads(topic.name, p.partition_index) else
                          {"partition_index": p.partition_index, "error_code": ErrorCode.not_leader_or_follower}
                          for p in t.partitions]
        else:
            partitions = [_checked(node, topic, p, lambda p=p: _answer_memory(plane, topic, p.partition_index,
                                                                             p.timestamp, committed))
                          if topic is None or node.cluster.leads(topic.name, p.partition_index) else
                          {"partition_index": p.partition_index, "error_code": ErrorCode.not_leader_or_follower}
                          for p in t.partitions]
        topics.append({"name": t.name, "partitions": partitions})
    if reads:
        out = asyncio.get_running_loop().run_in_executor(node.answers, _read, reads)
        return _then(out, lambda: build_response(ApiKey.LIST_OFFSETS, request.version, {"topics": topics}))
    return build_response(ApiKey.LIST_OFFSETS, request.version, {"topics": topics})


def _then(read: asyncio.Future, respond) -> asyncio.Future:
    out = asyncio.get_running_loop().create_future()

    def done(f: asyncio.Future) -> None:
        if out.done():
            return
        if f.exception() is not None:
            out.set_exception(f.exception())
        else:
            out.set_result(respond())

    read.add_done_callback(done)
    return out
