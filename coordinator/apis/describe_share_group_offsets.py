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

The state is the data partition leader's (coordinator/runtime/share_partitions.py): here in memory
when this node leads the partition, else its share-state log as the leader last wrote it durably,
read from the shared data dir (Kafka's coordinator asks its share coordinator,
ReadShareGroupStateSummary). The log end of a partition another worker leads is the one it last
reported (every 5 s); in cluster mode one another node leads has no lag (−1). ACLs: Describe on
the group (GROUP_AUTHORIZATION_FAILED) and on each topic."""

from __future__ import annotations

import asyncio
import uuid

from groupd.coordinator.core.share.delivery import TERMINAL
from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for
from groupd.storage.share_state import partition_directory, read_latest

from .request import Request
from .share_common import log_bounds

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
    read = [(topic, [await _state(node, group_id, topic, p) for p in partitions]) for topic, partitions in described]
    found = [_topic(topic.name, topic.topic_id, rows) for topic, rows in read]
    return {"group_id": group_id, "topics": found + topics + denied, "error_code": ErrorCode.none,
            "error_message": None}


def _topic(name: str, topic_id: uuid.UUID, partitions: list[dict]) -> dict:
    return {"topic_name": name, "topic_id": topic_id, "partitions": partitions}


def _partition(index: int, start: int, epoch: int = 0, lag: int = -1, error: ErrorCode = ErrorCode.none) -> dict:
    return {"partition_index": index, "start_offset": start, "leader_epoch": epoch, "lag": lag,
            "error_code": error, "error_message": None}


async def _state(node, group_id: str, topic, index: int) -> dict:
    """One share-partition's row: from memory at its leader, else from its share-state log."""
    if not 0 <= index < topic.partitions:
        return _partition(index, UNINITIALIZED)
    key = (group_id, topic.topic_id, index)
    deliveries = deliveries_for(node)
    leads = node.cluster.leads(topic.name, index)
    sp = deliveries.partitions.get(key)
    if leads and sp is not None and deliveries.stamp(key[1:]) == node.cluster.data_stamp(topic.name, index):
        start = sp.start
        done = sum(1 for offset, rec in sp.offsets.items() if offset >= start and rec.state in TERMINAL)
    else:
        directory = partition_directory(node.settings.data_dir, topic.topic_id, index)
        try:
            snapshot = (await asyncio.get_running_loop().run_in_executor(None, read_latest, directory)).get(key)
        except OSError:
            return _partition(index, 0, error=ErrorCode.kafka_storage_error)
        if snapshot is None:
            return _partition(index, UNINITIALIZED)
        _, _, start, batches = snapshot
        done = sum(last - max(first, start) + 1 for first, last, state, _ in batches
                   if state in TERMINAL and last >= start)
    end = _log_end(node, topic, index, leads)
    lag = -1 if end is None else end - start - done  # Kafka's formula: negative for a start past the end
    return _partition(index, start, node.cluster.leader_epoch(topic.name, index), lag)


def _log_end(node, topic, index: int, leads: bool) -> int | None:
    if leads:
        bounds = log_bounds(plane_for(node), topic, index)
        return None if isinstance(bounds, ErrorCode) else bounds[1]
    return node.log_ends_elsewhere.get((topic.topic_id, index))
