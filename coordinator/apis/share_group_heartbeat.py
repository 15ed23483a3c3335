"""ShareGroupHeartbeat (76), v1: share-group membership (KIP-932, share-groups spec §1.2, §2).

v0 existed only in Kafka 4.0 behind unstable.api.versions.enable and was removed in 4.1 (a clean
break: v1 has the same layout). The member id is the client's own (a UUID string, 1–36 chars);
epoch 0 joins (SubscribedTopicNames required), -1 leaves. ACLs as Kafka's: Read on the group, then
Describe on every subscribed topic. Delivery is ShareFetch's and ShareAcknowledge's (share_fetch.py,
share_acknowledge.py), which do not check membership (Kafka 4.2).
"""

from __future__ import annotations

import datetime

from groupd.coordinator.core.share.machine import ShareHeartbeatRequest, error_reply
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request, respond

KEY = ApiKey.SHARE_GROUP_HEARTBEAT
VERSIONS = (1, 1)


def handle(node, request: Request):
    body, version = request.body, request.version
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(version, error_reply(ErrorCode.group_authorization_failed))
    if body.subscribed_topic_names and not all(
            authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            for name in set(body.subscribed_topic_names)):
        return _response(version, error_reply(ErrorCode.topic_authorization_failed))
    req = ShareHeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch, rack_id=body.rack_id,
        subscribed_topic_names=body.subscribed_topic_names,
        client_id=request.header.client_id or "", client_host=request.client_host)
    result = node.coordinator.share_heartbeat(req, node.topics_image())
    return respond(result, lambda reply: _response(version, reply))


def _response(version: int, reply: dict):
    return build_response(KEY, version, {
        **reply, "heartbeat_interval": datetime.timedelta(milliseconds=reply["heartbeat_interval_ms"])})

