"""OffsetDelete (47), v0 (KIP-496).

Deletes committed offsets of an Empty group, or of a live `consumer` group for topics it is not
subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Unknown topics and partitions are answered
UNKNOWN_TOPIC_OR_PARTITION; a group-level error replaces the topic list.
"""

from __future__ import annotations

from groupd.coordinator.core.requests import OffsetDeleteRequest
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request, respond

KEY = ApiKey.OFFSET_DELETE
VERSIONS = (0, 0)


def handle(node, request: Request):
    body = request.body
    if body.group_id == "":
        return _response(ErrorCode.invalid_group_id, [], {})
    if not authorized(node, request, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return _response(ErrorCode.group_authorization_failed, [], {})
    order = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    unknown, known = {}, []
    for name, parts in order:
        if not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, name):
            unknown.update({(name, p): ErrorCode.topic_authorization_failed for p in parts})
            continue
        topic = node.catalog.get(name)
        ok = [p for p in parts if topic is not None and 0 <= p < topic.partitions]
        unknown.update({(name, p): ErrorCode.unknown_topic_or_partition for p in parts if p not in ok})
        if ok:
            known.append((name, ok))
    result = node.coordinator.delete_offsets(OffsetDeleteRequest(body.group_id, known))
    return respond(result, lambda reply: _response(reply["error_code"], order,
                                                   {**unknown, **reply["partitions"]}))


def _response(error: ErrorCode, order, errors: dict):
    topics = [] if error is not ErrorCode.none else [
        {"name": name, "partitions": [{"partition_index": p, "error_code": errors[(name, p)]} for p in parts]}
        for name, parts in order]
    return build_response(ApiKey.OFFSET_DELETE, 0, {"error_code": error, "topics": topics})
