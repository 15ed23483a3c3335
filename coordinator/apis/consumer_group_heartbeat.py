"""ConsumerGroupHeartbeat (68), v0–v1: the consumer group protocol (KIP-848, spec §1.3–1.4).

v0: a member joining with an empty MemberId is given one; v1 adds SubscribedTopicRegex and
requires the client's own MemberId on every request (KIP-1082). Both are flexible, with the same
response. Served only when group.coordinator.rebalance.protocols includes `consumer`.
"""

from __future__ import annotations

import datetime
import functools

from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, error_reply
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import Encoded, build_response

from .request import Request, respond

KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
VERSIONS = (0, 1)

_MS = datetime.timedelta(milliseconds=1)  # kio's timedeltas → Kafka's ms (request.ms, inlined)
STEADY_ANSWERS = 16_384  # encoded steady answers kept: one per live member (an old epoch's ages out)
def handle(node, request: Request):
    body, version = request.body, request.version
    if "consumer" not in node.settings.group_coordinator_rebalance_protocols:
        return _response(version, error_reply(ErrorCode.unsupported_version, "The consumer group protocol is "
                                              "disabled (group.coordinator.rebalance.protocols)."))
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(version, error_reply(ErrorCode.group_authorization_failed, "Group authorization failed."))
    if body.subscribed_topic_names and not all(
            authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            for name in set(body.subscribed_topic_names)):  # existing or not (Kafka 4.0, PR 19042)
        return _response(version, error_reply(ErrorCode.topic_authorization_failed, "Topic authorization failed."))
    owned = body.topic_partitions
    req = ConsumerHeartbeatRequest(  # positional: this runs for every heartbeat
        body.group_id, body.member_id, body.member_epoch, body.instance_id, body.rack_id,
        body.rebalance_timeout // _MS, body.subscribed_topic_names, getattr(body, "subscribed_topic_regex", None),
        body.server_assignor, None if owned is None else [(t.topic_id, list(t.partitions)) for t in owned],
        request.header.client_id or "", request.client_host, version, None,
        None if node.access is None else lambda name: authorized(
            node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name, audit=False))
    result = node.coordinator.consumer_heartbeat(req, node.topics_image())
    if type(result) is dict:  # answered now (the steady heartbeat, an error): no closure for `respond`
        return _answer(version, result)
    return respond(result, lambda reply: _answer(version, reply))


def _answer(version: int, reply: dict):
    """Most answers are a member's steady heartbeat (no assignment, no error): those are encoded once
    per member, epoch and interval and sent again as bytes (encoding was half a heartbeat's cost)."""
    if reply["assignment"] is None and reply["error_code"] == ErrorCode.none and reply["error_message"] is None:
        return _steady(version, reply["member_id"], reply["member_epoch"], reply["heartbeat_interval_ms"])
    return _response(version, reply)


@functools.lru_cache(maxsize=STEADY_ANSWERS)
def _steady(version: int, member_id: str, member_epoch: int, heartbeat_interval_ms: int) -> Encoded:
    return Encoded(_response(version, {
        "error_code": ErrorCode.none, "error_message": None, "member_id": member_id, "member_epoch": member_epoch,
        "heartbeat_interval_ms": heartbeat_interval_ms, "assignment": None}))


def _response(version: int, reply: dict):
    return build_response(KEY, version, {
        **reply, "heartbeat_interval": datetime.timedelta(milliseconds=reply["heartbeat_interval_ms"])})


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error` (an injected fault's)."""
    return build_response(KEY, version, {**error_reply(error), "heartbeat_interval": datetime.timedelta(0)})
