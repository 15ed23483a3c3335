"""ShareFetch (78), v1–v2: share consumers acquire records (KIP-932, share-groups spec §1.4–1.5,
§3.4–3.5, §3.9–3.10).

v0 existed only in Kafka 4.0 (unstable) and was removed in 4.1; v1 added MaxRecords and BatchSize
and dropped PartitionMaxBytes. v2 (Kafka 4.2) adds ShareAcquireMode (KIP-1206) and IsRenewAck
(KIP-1222): a request with IsRenewAck must have MaxBytes, MinBytes, MaxRecords and MaxWaitMs all 0
(else INVALID_REQUEST), may carry RENEW (type 4) acknowledgements, which give the member's acquired
offsets a fresh lock, and fetches nothing. Both acquire modes behave as record_limit: offsets are
acquired one by one and never more than MaxRecords (Kafka's batch_optimized may exceed it to end on
a log batch; clients accept either).

Sessions are keyed by (group, member) and not checked against group membership, as Kafka 4.2. The
piggybacked acknowledgements are applied first, then (unless the epoch is -1, which closes the
session and releases what the member holds) every session partition is read from the records plane
in turn and its available offsets acquired for the member, up to MaxRecords; the batches returned
are the log's own, cut to those overlapping the acquired ranges. Transaction markers are archived,
never acquired; a group with share.isolation.level=read_committed acquires only below the last
stable offset and archives the batches of aborted transactions (Kafka's
SharePartition.filterAbortedTransactionalAcquiredRecords). A new share-partition starts where the
group's share.auto.offset.reset says (by_duration: a timestamp look-up). As Kafka's, a session also ends,
releasing the member's records, when the connection that opened it closes. With nothing acquired the request
waits up to MaxWaitMs, woken by appends to its partitions, by records released by others and when
a lock on its partitions expires. A partition this node does not lead (workers, cluster mode)
answers NOT_LEADER_OR_FOLLOWER with its leader in CurrentLeader and NodeEndpoints, as Kafka's.
"""

from __future__ import annotations

import asyncio
import datetime
import logging

from groupd.coordinator.core.group_config import SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL, reset_duration_ms
from groupd.coordinator.observability import metrics
from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.coordinator.system_clock import mono_ms, wall_ms
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for

from .request import Request, ms
from .share_common import (
    NO_LEADER,
    apply_acknowledgements,
    batch_spans,
    close_session,
    current_leader,
    cut,
    group_lock_ms,
    held_here,
    last_stable,
    log_bounds,
    merged,
    node_endpoints,
    offset_for_time,
    partition_txns,
    read,
    refusal,
    undeliverable,
)

KEY = ApiKey.SHARE_FETCH
VERSIONS = (1, 2)

log = logging.getLogger("groupd")


def handle(node, request: Request):
    body = request.body
    deliveries = deliveries_for(node)
    lock_ms = group_lock_ms(node, body.group_id or "")
    error = refusal(node, request)
    named = merged(body.topics)
    if error is None and body.share_session_epoch == 0 and any(named.values()):
        error = ErrorCode.invalid_request  # a new session carries no acknowledgements
    renew = getattr(body, "is_renew_ack", False)
    if error is None and renew and (body.max_bytes or body.min_bytes or body.max_records or ms(body.max_wait)):
        error = ErrorCode.invalid_request
    if error is not None:
        return _response(request, error, lock_ms, [])
    group, member, epoch = body.group_id, body.member_id, body.share_session_epoch
    forgotten = [(t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions]
    error, session = deliveries.sessions.for_fetch(group, member, epoch, named, forgotten)
    if error is not ErrorCode.none:
        log.info("share fetch refused group=%s member=%s epoch=%d error=%s", group, member, epoch, error.name)
        return _response(request, error, lock_ms, [])
    if epoch == 0 and request.on_close is not None:  # Kafka: the creating connection's close ends the session
        request.on_close[("share-session", group, member)] = lambda: _disconnected(deliveries, group, member, session)
    return asyncio.ensure_future(_serve(node, request, deliveries, session, named))


def _disconnected(deliveries, group: str, member: str, session) -> None:
    """The connection that opened `session` closed: unless another session replaced it, it ends as
    with epoch -1 and what the member holds on its partitions is released."""
    if deliveries.sessions.sessions.get((group, member)) is session:
        asyncio.ensure_future(close_session(deliveries, group, member, session, mono_ms()))


async def _serve(node, request: Request, deliveries, session, named: dict):
    body = request.body
    group, member, epoch = body.group_id, body.member_id, body.share_session_epoch
    lock_ms = group_lock_ms(node, group)
    now = mono_ms()
    entries: dict[tuple, dict] = {key: _entry(key[1]) for key in named}
    for key, code in (await apply_acknowledgements(node, request, deliveries, named, now)).items():
        entries[key]["acknowledge_error_code"] = int(code)
    if epoch == -1:
        await close_session(deliveries, group, member, session, now)
        return _response(request, ErrorCode.none, lock_ms, _topics(entries))
    if body.max_records <= 0 or body.max_bytes <= 0 or getattr(body, "is_renew_ack", False):
        return _response(request, ErrorCode.none, lock_ms, _topics(entries))
    keys = list(session.partitions)
    if keys:  # rotate by epoch so that one partition does not always use up MaxRecords
        shift = epoch % len(keys)
        keys = keys[shift:] + keys[:shift]
    return await _fetch(node, request, deliveries, keys, entries, epoch == 0)


async def _fetch(node, request: Request, deliveries, keys: list[tuple], entries: dict[tuple, dict], full: bool):
    body = request.body
    lock_ms = group_lock_ms(node, body.group_id)
    plane = plane_for(node)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(ms(body.max_wait), 0) / 1000
    while True:
        acquired = await _acquire_all(node, plane, request, deliveries, keys, entries)
        remaining = deadline - loop.time()
        if acquired or remaining <= 0 or node.closing:
            break
        woken = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        token = plane.watch({(k[0], k[1]) for k in keys}, wake) if plane is not None else None
        waiting = deliveries.wait(wake)
        expiry = _next_expiry(deliveries, body.group_id, keys)  # records another member holds come back then
        if expiry is not None:
            remaining = min(remaining, max(expiry - mono_ms(), 1) / 1000)
        timer = node.hold(remaining, None)
        try:
            await asyncio.wait((woken, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            deliveries.unwait(waiting)
            if token is not None:
                plane.unwatch(token)
            timer.cancel()
    wanted = {k for k, e in entries.items() if full or e["acquired_records"] or e["error_code"]} | {
        k for k in entries if k in _named(body)}
    kept = {k: e for k, e in entries.items() if k in wanted}
    return _response(request, ErrorCode.none, lock_ms, _topics(kept), node_endpoints(node, request, kept.values()))


async def _acquire_all(node, plane, request: Request, deliveries, keys, entries) -> int:
    """One pass over the session's partitions: what can be acquired now is; the records acquired."""
    body = request.body
    group, member = body.group_id, body.member_id
    budget = body.max_records
    bytes_left = body.max_bytes
    acquired = 0
    for key in keys:
        topic_id, index = key
        entry = entries.setdefault(key, _entry(index))
        if entry["acquired_records"] or budget <= 0:
            continue
        topic = node.catalog.by_id(topic_id)
        if topic is None:
            entry["error_code"] = ErrorCode.unknown_topic_id
            continue
        if not 0 <= index < topic.partitions:
            entry["error_code"] = ErrorCode.unknown_topic_or_partition
            continue
        if not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, topic.name):
            entry["error_code"] = ErrorCode.topic_authorization_failed
            continue
        error = await held_here(node, deliveries, topic, index)
        if error is not None:  # another worker's or node's: the client asks the leader named
            entry["error_code"] = error
            entry["current_leader"] = current_leader(node, topic, index)
            continue
        entry["error_code"] = ErrorCode.none
        entry["current_leader"] = NO_LEADER
        bounds = log_bounds(plane, topic, index)
        if isinstance(bounds, ErrorCode):
            entry["error_code"] = bounds
            continue
        log_start, log_end = bounds
        configs = node.group_configs.overrides.get(group, {})
        key = (group, topic_id, index)
        start = None
        if not deliveries.initialized(key):
            start = await _reset_offset(node, plane, topic, index, configs, log_start, log_end)
            if deliveries.initialized(key):
                start = None  # another request started it meanwhile
        sp = deliveries.partition(key, log_start, log_end, start=start, limits=deliveries.limits.for_group(configs))
        committed = configs.get(SHARE_ISOLATION_LEVEL) == "read_committed"
        end = min(log_end, last_stable(plane, topic, index)) if committed and plane is not None else log_end
        sp.expire(mono_ms())
        if not sp.can_acquire(end):
            continue
        offset = sp.next_fetch_offset()
        data = await read(node, plane, topic, index, offset, end, max(bytes_left, 0), acquired == 0)
        spans = batch_spans(data)
        if not spans:
            continue
        last = min(spans[-1][1], end - 1)
        hidden = undeliverable(data, spans, partition_txns(plane, topic, index) if committed else None)
        ranges = sp.acquire(member, offset, last, budget, mono_ms(), group_lock_ms(node, group), hidden)
        if not ranges:
            continue
        records = cut(data, spans, ranges)
        entry["records"] = records
        entry["acquired_records"] = [{"first_offset": a, "last_offset": b, "delivery_count": c} for a, b, c in ranges]
        n = sum(b - a + 1 for a, b, _ in ranges)
        metrics.SHARE_ACQUIRED.inc(n)
        metrics.SHARE_REDELIVERED.inc(sum(b - a + 1 for a, b, count in ranges if count > 1))
        budget -= n
        acquired += n
        bytes_left -= len(records)
    return acquired


async def _reset_offset(node, plane, topic, index: int, configs, log_start: int, log_end: int) -> int:
    """Where a new share-partition starts: the group's share.auto.offset.reset (default latest)."""
    reset = configs.get(SHARE_AUTO_OFFSET_RESET, "latest")
    if reset == "earliest":
        return log_start
    duration = reset_duration_ms(reset)
    if duration is None:
        return log_end
    return await offset_for_time(node, plane, topic, index, wall_ms() - duration, log_end)


def _next_expiry(deliveries, group: str, keys: list[tuple]) -> int | None:
    """The earliest lock deadline (monotonic ms) on the session's partitions."""
    deadlines = [d for topic_id, index in keys
                 if (sp := deliveries.partitions.get((group, topic_id, index))) is not None
                 and (d := sp.next_deadline()) is not None]
    return min(deadlines, default=None)


def _named(body) -> set[tuple]:
    return {(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions}


def _entry(index: int) -> dict:
    return {"partition_index": index, "error_code": ErrorCode.none, "acknowledge_error_code": 0,
            "current_leader": NO_LEADER, "records": b"", "acquired_records": []}


def _topics(entries: dict[tuple, dict]) -> list[dict]:
    topics: dict = {}
    for (topic_id, _), entry in entries.items():
        topics.setdefault(topic_id, []).append(entry)
    return [{"topic_id": t, "partitions": ps} for t, ps in topics.items()]


def _response(request: Request, error: ErrorCode, lock_ms: int, topics: list[dict], endpoints: list | None = None):
    """The answer; one refused as a whole carries no lock duration (Kafka's 0)."""
    lock = datetime.timedelta(milliseconds=lock_ms if error is ErrorCode.none else 0)
    return build_response(KEY, request.version, {
        "error_code": error, "acquisition_lock_timeout": lock, "responses": topics,
        "node_endpoints": endpoints or []})
