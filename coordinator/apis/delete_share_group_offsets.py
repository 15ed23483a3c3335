"""DeleteShareGroupOffsets (92), v0 (KIP-932, share-groups spec §1.8): deletes the share-partition
state of named topics, at the group's coordinator, for an empty share group (NON_EMPTY_GROUP with
members; GROUP_ID_NOT_FOUND for a missing group or one of another type), so that the next consumer
starts each partition where `share.auto.offset.reset` says (Kafka's DeleteShareGroupState), and the
topic leaves the group's initialized share-partitions; the answer follows the durable writes. A
topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION.

The state is the data partition leader's: groupd deletes it here for the partitions this node
leads, else at their leaders on other workers or nodes (DeleteShareGroupState over the broker
channel, share_state_at_leaders.py); a topic with a partition whose leader cannot be reached answers
that partition's error (COORDINATOR_NOT_AVAILABLE) and stays initialized, its other partitions'
state deleted. ACLs: Delete on the group, Read on each topic, as Kafka's."""

from __future__ import annotations

import asyncio

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_common import offsets_admin_refusal, set_initialized
from .share_state_at_leaders import delete

KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


def handle(node, request: Request):
    return asyncio.ensure_future(_answer(node, request))


async def _answer(node, request: Request):
    body = request.body
    refused = offsets_admin_refusal(node, request, AclOperation.DELETE)
    if refused is not None:
        return _response(request, *refused, [])
    named = [(t, node.catalog.get(t.topic_name)) for t in body.topics]
    allowed = {t.topic_name for t, _ in named
               if authorized(node, request, AclOperation.READ, ResourceType.TOPIC, t.topic_name)}
    results = await delete(node, body.group_id, [(topic, index) for t, topic in named
                                                 if topic is not None and t.topic_name in allowed
                                                 for index in range(topic.partitions)])
    responses = []
    gone = []  # topic ids whose state went: no longer initialized in the group
    for t, topic in named:
        error, message = ErrorCode.none, None
        if t.topic_name not in allowed:
            error = ErrorCode.topic_authorization_failed
        elif topic is None:
            error = ErrorCode.unknown_topic_or_partition
        else:
            for index in range(topic.partitions):
                found = results[(topic.topic_id, index)]
                if found[0] is not ErrorCode.none and error is ErrorCode.none:
                    error, message = found
            if error is ErrorCode.none:
                gone.append(topic.topic_id)
        responses.append({"topic_name": t.topic_name, "topic_id": None if topic is None else topic.topic_id,
                          "error_code": error, "error_message": message})
    error = await set_initialized(node, body.group_id, {}, gone, create=False)
    if error is not ErrorCode.none:  # the state is gone; the group's record of it is not changed
        return _response(request, error, None, [])
    return _response(request, ErrorCode.none, None, responses)


def _response(request: Request, error: ErrorCode, message: str | None, responses: list[dict]):
    return build_response(KEY, request.version, {"error_code": error, "error_message": message,
                                                 "responses": responses})
