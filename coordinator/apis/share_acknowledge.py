"""ShareAcknowledge (79), v1: a share consumer's acknowledgements outside a ShareFetch (KIP-932,
share-groups spec §1.6, §3.6, §3.9): ACCEPT (1), RELEASE (2), REJECT (3), GAP (0) ranges, each
partition's applied all or nothing; records not ACQUIRED by this member (another's, an expired lock)
answer INVALID_RECORD_STATE. Epoch 0 is INVALID_SHARE_SESSION_EPOCH (this API never opens a
session); -1 applies the acknowledgements, closes the session and releases what the member still
holds on its partitions. v0 existed only in Kafka 4.0; v2 (4.2: RENEW, AcquisitionLockTimeoutMs) is
not served: librdkafka always sends v1.
"""

from __future__ import annotations

import logging

from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.coordinator.system_clock import mono_ms
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_common import NO_LEADER, acknowledge, member_error, merged

KEY = ApiKey.SHARE_ACKNOWLEDGE
VERSIONS = (1, 1)

log = logging.getLogger("groupd")


def handle(node, request: Request):
    body = request.body
    error = member_error(body.group_id, body.member_id)
    if error is None and not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = ErrorCode.group_authorization_failed
    if error is not None:
        return _response(request, error, [])
    deliveries = deliveries_for(node)
    group, member, epoch = body.group_id, body.member_id, body.share_session_epoch
    error, session = deliveries.sessions.for_acknowledge(group, member, epoch)
    if error is not ErrorCode.none:
        log.info("share acknowledge refused group=%s member=%s epoch=%d error=%s", group, member, epoch, error.name)
        return _response(request, error, [])
    now = mono_ms()
    topics: dict = {}
    changed = False
    for (topic_id, index), batches in merged(body.topics).items():
        topic = node.catalog.by_id(topic_id)
        if topic is not None and not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, topic.name):
            code = ErrorCode.topic_authorization_failed
        else:
            code = acknowledge(node, deliveries, group, member, topic_id, index, batches, now)
        changed = changed or code is ErrorCode.none
        topics.setdefault(topic_id, []).append(
            {"partition_index": index, "error_code": code, "current_leader": NO_LEADER})
    if epoch == -1:
        deliveries.sessions.close(group, member)
        deliveries.release_member(group, member, session.partitions, now)
    elif changed:
        deliveries.wake()
    return _response(request, ErrorCode.none, [{"topic_id": t, "partitions": ps} for t, ps in topics.items()])


def _response(request: Request, error: ErrorCode, topics: list[dict]):
    return build_response(KEY, request.version, {"error_code": error, "responses": topics, "node_endpoints": []})
