"""AlterShareGroupOffsets (91), v0 (KIP-932, share-groups spec §1.8): sets share-partitions' start
offsets, at the group's coordinator, for an empty share group (NON_EMPTY_GROUP with members;
GROUP_ID_NOT_FOUND for a group of another type). Each named share-partition starts afresh at the
given offset under the next state epoch, its in-flight records forgotten (Kafka's
InitializeShareGroupState); a missing group is created, empty, and the partitions are recorded as
initialized in its ShareGroupStatePartitionMetadata, as Kafka's; the answer follows the durable
writes.

The state is the data partition leader's: groupd changes it here when this node leads the
partition, else at its leader on another worker or node (InitializeShareGroupState over the broker
channel, share_state_at_leaders.py), a leader that cannot be reached answering its partitions'
error (COORDINATOR_NOT_AVAILABLE) while the others are set. ACLs: Read on the group and on each
topic, as Kafka's."""

from __future__ import annotations

import asyncio

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_common import offsets_admin_refusal, set_initialized
from .share_state_at_leaders import initialize

KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


def handle(node, request: Request):
    return asyncio.ensure_future(_answer(node, request))


async def _answer(node, request: Request):
    body = request.body
    refused = offsets_admin_refusal(node, request, AclOperation.READ)
    if refused is not None:
        return _response(request, *refused, [])
    named = [(t, node.catalog.get(t.topic_name)) for t in body.topics]
    allowed = {t.topic_name for t, _ in named
               if authorized(node, request, AclOperation.READ, ResourceType.TOPIC, t.topic_name)}
    results = await initialize(node, body.group_id, [(topic, p.partition_index, p.start_offset) for t, topic in named
                                                     if topic is not None and t.topic_name in allowed
                                                     for p in t.partitions])
    responses = []
    done: dict = {}  # topic id → partitions whose state was set: initialized in the group
    for t, topic in named:
        if t.topic_name not in allowed:
            rows = [_row(p.partition_index, ErrorCode.topic_authorization_failed) for p in t.partitions]
        elif topic is None:
            rows = [_row(p.partition_index, ErrorCode.unknown_topic_or_partition) for p in t.partitions]
        else:
            rows = [_row(p.partition_index, *results[(topic.topic_id, p.partition_index)]) for p in t.partitions]
            done.setdefault(topic.topic_id, []).extend(
                r["partition_index"] for r in rows if r["error_code"] is ErrorCode.none)
        responses.append({"topic_name": t.topic_name, "topic_id": None if topic is None else topic.topic_id,
                          "partitions": rows})
    error = await set_initialized(node, body.group_id, done, [], create=True)
    if error is not ErrorCode.none:  # the state is set; the group's record of it is not
        return _response(request, error, None, [])
    return _response(request, ErrorCode.none, None, responses)


def _row(index: int, error: ErrorCode, message: str | None = None) -> dict:
    return {"partition_index": index, "error_code": error, "error_message": message}


def _response(request: Request, error: ErrorCode, message: str | None, responses: list[dict]):
    return build_response(KEY, request.version, {"error_code": error, "error_message": message,
                                                 "responses": responses})
