"""DescribeShareGroupOffsets (90), v0–v1 (KIP-932, share-groups spec §1.8): each share-partition's
start offset (SPSO) and, v1, its lag: the partition's log end − SPSO − the records at or past the
SPSO already acknowledged or archived (Kafka's deliveryCompleteCount). Sent to the group's
coordinator, as Kafka's.

Topics null: the share-partitions the group has initialized (its ShareGroupStatePartitionMetadata),
those the client may not Describe left out, none for a group that is missing or of another type;
named topics: as named, a topic that does not exist answered with StartOffset −1 (no data, not an
error), one the client may not Describe with TOPIC_AUTHORIZATION_FAILED, after the others. A
share-partition with no state yet is StartOffset −1, Lag −1 (groupd makes the state at the group's
first ShareFetch of the partition).

The state is the data partition leader's (coordinator/runtime/share_partitions.py): read here when
this node leads the partition (from memory, else its share-state log as last written), else asked of
its leader on another worker or node (ReadShareGroupStateSummary v1 and ListOffsets over the broker
channel, share_state_at_leaders.py, as Kafka's coordinator asks its share coordinator and the
partition's leader); the lag uses the leader's high watermark, −1 when it did not say. A partition
whose leader cannot be reached answers its error (COORDINATOR_NOT_AVAILABLE), the others their
offsets. ACLs: Describe on the group (GROUP_AUTHORIZATION_FAILED) and on each topic."""

from __future__ import annotations

import asyncio
import uuid

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_state_at_leaders import summaries

KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
VERSIONS = (0, 1)
ZERO_UUID = uuid.UUID(int=0)
UNINITIALIZED = -1


def handle(node, request: Request):
    return asyncio.ensure_future(_answer(node, request))


async def _answer(node, request: Request):
    groups = [await _group(node, request, g) for g in request.body.groups]
    return build_response(KEY, request.version, {"groups": groups})


def _failed(group_id: str, error: ErrorCode) -> dict:
    return {"group_id": group_id, "topics": [], "error_code": error, "error_message": None}


async def _group(node, request: Request, group) -> dict:
    group_id = group.group_id
    if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _failed(group_id, ErrorCode.group_authorization_failed)
    initialized = node.coordinator.share_initialized(group_id)
    if isinstance(initialized, ErrorCode):
        return _failed(group_id, initialized)
    described: list[tuple] = []  # (topic, partitions) to read
    topics: list[dict] = []
    denied: list[dict] = []
    if group.topics is None:
        for topic_id, partitions in initialized.items():
            topic = node.catalog.by_id(topic_id)
            if topic is not None and authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                described.append((topic, sorted(partitions)))
        described.sort(key=lambda t: t[0].name)
    else:
        for t in group.topics:
            topic = node.catalog.get(t.topic_name)
            if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic_name):
                denied.append(_topic(t.topic_name, ZERO_UUID, [
                    _partition(p, 0, error=ErrorCode.topic_authorization_failed) for p in t.partitions]))
            elif topic is None:
                topics.append(_topic(t.topic_name, ZERO_UUID, [_partition(p, UNINITIALIZED) for p in t.partitions]))
            else:
                described.append((topic, list(t.partitions)))
    got = await summaries(node, group_id, [(topic, p) for topic, partitions in described for p in partitions])
    found = [_topic(topic.name, topic.topic_id, [_row(node, topic, p, got[(topic.topic_id, p)]) for p in partitions])
             for topic, partitions in described]
    return {"group_id": group_id, "topics": found + topics + denied, "error_code": ErrorCode.none,
            "error_message": None}


def _topic(name: str, topic_id: uuid.UUID, partitions: list[dict]) -> dict:
    return {"topic_name": name, "topic_id": topic_id, "partitions": partitions}


def _partition(index: int, start: int, epoch: int = 0, lag: int = -1, error: ErrorCode = ErrorCode.none) -> dict:
    return {"partition_index": index, "start_offset": start, "leader_epoch": epoch, "lag": lag,
            "error_code": error, "error_message": None}


def _row(node, topic, index: int, summary) -> dict:
    """One share-partition's row from its leader's summary: lag = log end − start − delivery-complete
    count (Kafka's formula: negative for a start past the end)."""
    error, start, done, end, _epoch = summary
    if error is ErrorCode.unknown_topic_or_partition:  # an index the topic does not have: no data, not an error
        return _partition(index, UNINITIALIZED)
    if error is not ErrorCode.none:
        return _partition(index, 0, error=error)
    if start == UNINITIALIZED:
        return _partition(index, UNINITIALIZED)
    lag = -1 if end is None else end - start - max(done, 0)
    return _partition(index, start, node.cluster.leader_epoch(topic.name, index), lag)
