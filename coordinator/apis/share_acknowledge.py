"""ShareAcknowledge (79), v1: a share consumer's acknowledgements outside a ShareFetch (KIP-932,
share-groups spec §1.6, §3.6, §3.9): ACCEPT (1), RELEASE (2), REJECT (3), GAP (0) ranges, each
partition's applied all or nothing; records not ACQUIRED by this member (another's, an expired lock)
answer INVALID_RECORD_STATE. Epoch 0 is INVALID_SHARE_SESSION_EPOCH (this API never opens a
session); -1 applies the acknowledgements, closes the session and releases what the member still
holds on its partitions. The answer follows the durable write of the changed share-partitions. A
partition this node does not lead answers NOT_LEADER_OR_FOLLOWER with its leader, as in ShareFetch.
v0 existed only in Kafka 4.0; v2 (Kafka 4.2, KIP-1222) adds IsRenewAck, which allows RENEW (type 4:
a fresh lock for offsets the member holds), and AcquisitionLockTimeoutMs in the response.
"""

from __future__ import annotations

import asyncio
import datetime
import logging

from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.system_clock import mono_ms
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_common import (
    NO_LEADER,
    apply_acknowledgements,
    close_session,
    current_leader,
    group_lock_ms,
    merged,
    node_endpoints,
    refusal,
)

KEY = ApiKey.SHARE_ACKNOWLEDGE
VERSIONS = (1, 2)

log = logging.getLogger("groupd")


def handle(node, request: Request):
    body = request.body
    deliveries = deliveries_for(node)
    lock_ms = group_lock_ms(node, body.group_id or "")
    error = refusal(node, request)
    if error is not None:
        return _response(request, error, [], lock_ms)
    group, member, epoch = body.group_id, body.member_id, body.share_session_epoch
    error, session = deliveries.sessions.for_acknowledge(group, member, epoch)
    if error is not ErrorCode.none:
        log.info("share acknowledge refused group=%s member=%s epoch=%d error=%s", group, member, epoch, error.name)
        return _response(request, error, [], lock_ms)
    return asyncio.ensure_future(_serve(node, request, deliveries, session))


async def _serve(node, request: Request, deliveries, session):
    body = request.body
    now = mono_ms()
    results = await apply_acknowledgements(node, request, deliveries, merged(body.topics), now)
    topics: dict = {}
    entries = []
    for (topic_id, index), code in results.items():
        topic = node.catalog.by_id(topic_id)
        leader = current_leader(node, topic, index) if code is ErrorCode.not_leader_or_follower and topic else NO_LEADER
        entries.append({"partition_index": index, "error_code": code, "current_leader": leader})
        topics.setdefault(topic_id, []).append(entries[-1])
    if body.share_session_epoch == -1:
        await close_session(deliveries, body.group_id, body.member_id, session, now)
    return _response(request, ErrorCode.none, [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
                     group_lock_ms(node, body.group_id), node_endpoints(node, request, entries))


def _response(request: Request, error: ErrorCode, topics: list[dict], lock_ms: int = 0, endpoints=None):
    return build_response(KEY, request.version, {
        "error_code": error, "responses": topics, "node_endpoints": endpoints or [],
        "acquisition_lock_timeout": datetime.timedelta(milliseconds=lock_ms if error is ErrorCode.none else 0)})  # v2+
