"""AlterShareGroupOffsets (91), v0 (KIP-932, share-groups spec §1.8): sets share-partitions' start
offsets, at the group's coordinator, for an empty share group (NON_EMPTY_GROUP with members;
GROUP_ID_NOT_FOUND for a group of another type). Each named share-partition starts afresh at the
given offset under the next state epoch, its in-flight records forgotten (Kafka's
InitializeShareGroupState); a missing group is created, empty, and the partitions are recorded as
initialized in its ShareGroupStatePartitionMetadata, as Kafka's; the answer follows the durable
writes.

The state is the data partition leader's: groupd changes it here when this node leads the
partition, and answers NOT_LEADER_OR_FOLLOWER for a partition another worker or node leads (not
yet). ACLs: Read on the group and on each topic, as Kafka's."""

from __future__ import annotations

import asyncio

from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_common import offsets_admin_refusal, reset_share_partition, set_initialized

KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


def handle(node, request: Request):
    return asyncio.ensure_future(_answer(node, request))


async def _answer(node, request: Request):
    body = request.body
    refused = offsets_admin_refusal(node, request, AclOperation.READ)
    if refused is not None:
        return _response(request, *refused, [])
    deliveries = deliveries_for(node)
    responses = []
    done: dict = {}  # topic id → partitions whose state was set: initialized in the group
    for t in body.topics:
        topic = node.catalog.get(t.topic_name)
        if not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            rows = [_row(p.partition_index, ErrorCode.topic_authorization_failed) for p in t.partitions]
        elif topic is None:
            rows = [_row(p.partition_index, ErrorCode.unknown_topic_or_partition) for p in t.partitions]
        else:
            rows = [_row(p.partition_index, *await reset_share_partition(
                node, deliveries, body.group_id, topic, p.partition_index, p.start_offset)) for p in t.partitions]
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
