"""The group coordinator's side of share-partition state (Kafka's Persister, share-groups spec §1.8):
AlterShareGroupOffsets, DeleteShareGroupOffsets, DescribeShareGroupOffsets and DeleteGroups apply
initialize / delete / read-summary to each share-partition at its data partition's leader, which
keeps that state (coordinator/runtime/share_partitions.py): here directly when this node leads it,
else over the broker channel with Kafka's share-coordinator requests (InitializeShareGroupState 83,
DeleteShareGroupState 86, ReadShareGroupStateSummary 87 v1, and ListOffsets for the leader's high
watermark), answered by the leader's handlers through the same functions below.

A partition whose leader moved (NOT_LEADER_OR_FOLLOWER) or could not be asked is retried with its
leader looked up again until RETRY_S has passed, as the transaction coordinator retries markers;
then it keeps its last error (COORDINATOR_NOT_AVAILABLE for a leader nobody could reach), and the
other partitions' results stand."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from groupd.coordinator.core.share.delivery import TERMINAL
from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for
from groupd.storage.share_state import partition_directory, read_latest

from .share_common import log_bounds, reset_share_partition

RETRY_S = 10.0
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 1.0
RETRIABLE = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.coordinator_not_available,
                       ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress})
UNREACHABLE = ErrorCode.coordinator_not_available
UNINITIALIZED = -1

Key = tuple[uuid.UUID, int]  # topic id, partition
# (error, message) of an initialize or delete; (error, start offset, delivery-complete count, log end or
# None, state epoch) of a summary, start offset -1 for a share-partition without state
Result = tuple


# -- at the leader: what this node does for a share-partition it leads ------------------------------

async def initialize_here(node, group: str, topic, index: int, start: int) -> Result:
    """The share-partition starts afresh at `start` under its next state epoch (durable)."""
    return await reset_share_partition(node, deliveries_for(node), group, topic, index, start)


async def delete_here(node, group: str, topic, index: int) -> Result:
    """The share-partition's state goes (durable): the next ShareFetch starts it afresh."""
    return await reset_share_partition(node, deliveries_for(node), group, topic, index, None)


async def summary_here(node, group: str, topic, index: int) -> Result:
    """Start offset and delivery-complete count: from memory when the state is held here, else from
    the share-state log as last written; with this node's high watermark of the partition."""
    if not 0 <= index < topic.partitions:
        return ErrorCode.unknown_topic_or_partition, UNINITIALIZED, -1, None, 0
    if not node.cluster.leads(topic.name, index):
        return ErrorCode.not_leader_or_follower, UNINITIALIZED, -1, None, 0
    key = (group, topic.topic_id, index)
    deliveries = deliveries_for(node)
    sp = deliveries.partitions.get(key)
    if sp is not None and deliveries.stamp(key[1:]) == node.cluster.data_stamp(topic.name, index):
        start, epoch = sp.start, sp.state_epoch
        done = sum(1 for offset, rec in sp.offsets.items() if offset >= start and rec.state in TERMINAL)
    else:
        directory = partition_directory(node.settings.data_dir, topic.topic_id, index)
        try:
            snapshot = (await asyncio.get_running_loop().run_in_executor(None, read_latest, directory)).get(key)
        except OSError:
            return ErrorCode.kafka_storage_error, UNINITIALIZED, -1, None, 0
        if snapshot is None:
            return ErrorCode.none, UNINITIALIZED, -1, None, 0
        _, epoch, start, batches = snapshot
        done = sum(last - max(first, start) + 1 for first, last, state, _ in batches
                   if state in TERMINAL and last >= start)
    bounds = log_bounds(plane_for(node), topic, index)
    return ErrorCode.none, start, done, None if isinstance(bounds, ErrorCode) else bounds[1], epoch


# -- at the group's coordinator: every share-partition wherever its leader is ------------------------

async def initialize(node, group: str, starts: list[tuple[Any, int, int]]) -> dict[Key, Result]:
    """AlterShareGroupOffsets: each (topic, partition, start offset) initialized at its leader."""
    wanted = {(t.topic_id, i): s for t, i, s in starts}

    async def there(channel, broker: int, keys: list[Key]) -> dict[Key, Result]:
        got = await channel.share_state(broker, ApiKey.INITIALIZE_SHARE_GROUP_STATE, group, {
            k: {"state_epoch": 0, "start_offset": wanted[k]} for k in keys})  # the leader takes the next epoch
        return {k: (UNREACHABLE, None) if r is None else (ErrorCode(r.error_code), r.error_message)
                for k, r in got.items()}

    return await at_leaders(node, [(t, i) for t, i, _ in starts],
                            lambda t, i: initialize_here(node, group, t, i, wanted[(t.topic_id, i)]), there,
                            lambda e: (e, None))


async def delete(node, group: str, partitions: list[tuple[Any, int]]) -> dict[Key, Result]:
    """DeleteShareGroupOffsets, DeleteGroups: each (topic, partition)'s state deleted at its leader."""
    async def there(channel, broker: int, keys: list[Key]) -> dict[Key, Result]:
        got = await channel.share_state(broker, ApiKey.DELETE_SHARE_GROUP_STATE, group, dict.fromkeys(keys, {}))
        return {k: (UNREACHABLE, None) if r is None else (ErrorCode(r.error_code), r.error_message)
                for k, r in got.items()}

    return await at_leaders(node, partitions, lambda t, i: delete_here(node, group, t, i), there,
                            lambda e: (e, None))


async def summaries(node, group: str, partitions: list[tuple[Any, int]]) -> dict[Key, Result]:
    """DescribeShareGroupOffsets: each (topic, partition)'s start offset, delivery-complete count and
    its leader's high watermark."""
    names = {t.topic_id: t.name for t, _ in partitions}

    async def there(channel, broker: int, keys: list[Key]) -> dict[Key, Result]:
        got = await channel.share_state(broker, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, group,
                                        {k: {"leader_epoch": -1} for k in keys})
        if all(r is None for r in got.values()):  # the broker could not be reached: do not dial it again
            return {k: (UNREACHABLE, UNINITIALIZED, -1, None, 0) for k in keys}
        ends = await channel.log_ends(broker, [(names[t], i) for t, i in keys])  # after: one connection opened
        out = {}
        for k, r in got.items():
            if r is None:
                out[k] = UNREACHABLE, UNINITIALIZED, -1, None, 0
            else:
                out[k] = (ErrorCode(r.error_code), r.start_offset, r.delivery_complete_count,
                          ends[(names[k[0]], k[1])], r.state_epoch)
        return out

    return await at_leaders(node, partitions, lambda t, i: summary_here(node, group, t, i), there,
                            lambda e: (e, UNINITIALIZED, -1, None, 0))


async def at_leaders(node, partitions: list[tuple[Any, int]],
                     here: Callable[[Any, int], Awaitable[Result]],
                     there: Callable[[Any, int, list[Key]], Awaitable[dict[Key, Result]]],
                     failed: Callable[[ErrorCode], Result]) -> dict[Key, Result]:
    """Each partition's result from its leader, looked up again for those that answer a retriable error."""
    topics = {t.topic_id: t for t, _ in partitions}
    results: dict[Key, Result] = {}
    pending: list[Key] = []
    for topic, index in partitions:
        if 0 <= index < topic.partitions:
            pending.append((topic.topic_id, index))
        else:
            results[(topic.topic_id, index)] = failed(ErrorCode.unknown_topic_or_partition)
    pending = list(dict.fromkeys(pending))  # a partition named twice is changed once
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RETRY_S
    delay = RETRY_FIRST_S
    channel = getattr(node, "broker_channel", None)
    while pending:
        by_leader: dict[int | None, list[Key]] = {}
        for key in pending:
            by_leader.setdefault(node.cluster.leader(topics[key[0]].name, key[1]), []).append(key)
        here_keys = by_leader.pop(node.cluster.node_id, [])
        remote = [(b, keys) for b, keys in by_leader.items() if b is not None and channel is not None]
        for b, keys in by_leader.items():
            if b is None or channel is None:  # nobody leads it now, or no way to reach the one who does
                results.update(dict.fromkeys(keys, failed(UNREACHABLE)))
        answers = await asyncio.gather(*(here(topics[t], i) for t, i in here_keys),
                                       *(there(channel, b, keys) for b, keys in remote))
        results.update(zip(here_keys, answers[:len(here_keys)]))
        for answer in answers[len(here_keys):]:
            results.update(answer)
        pending = [k for k in pending if results[k][0] in RETRIABLE]
        if not pending or loop.time() + delay > deadline:
            break
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX_S)
    return results


# -- the leader answering another worker or node ------------------------------------------------------

def answer_here(node, request, run: Callable[[Any, Any], Awaitable[Result]],
                row: Callable[[Any, Any, Result], dict]):
    """A share-state request from the group's coordinator on another worker or node: CLUSTER_ACTION
    on the cluster (the brokers authenticate as a super user), then each partition through
    `run(topic, partition data)` at this node, as its leader (NOT_LEADER_OR_FOLLOWER elsewhere: the
    sender looks the leader up again), answered by `row(topic or None, partition data, result)`."""
    body = request.body
    if not authorized(node, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return _results(request, {t.topic_id: [row(None, p, (ErrorCode.cluster_authorization_failed,))
                                                  for p in t.partitions]
                                  for t in body.topics})

    async def one(topic, p) -> Result:
        if topic is None or not 0 <= p.partition < topic.partitions:
            return (ErrorCode.unknown_topic_or_partition,)
        if not node.cluster.leads(topic.name, p.partition):
            return (ErrorCode.not_leader_or_follower,)
        return await run(topic, p)

    async def answer():
        named = [(t.topic_id, node.catalog.by_id(t.topic_id), p) for t in body.topics for p in t.partitions]
        results = await asyncio.gather(*(one(topic, p) for _, topic, p in named))  # side by side, not one after another
        out: dict[uuid.UUID, list[dict]] = {}
        for (topic_id, topic, p), result in zip(named, results):
            out.setdefault(topic_id, []).append(row(topic, p, result))
        return _results(request, out)

    return asyncio.ensure_future(answer())


def _results(request, by_topic: dict[uuid.UUID, list[dict]]):
    return build_response(request.header.api_key, request.version, {"results": [
        {"topic_id": t, "partitions": rows} for t, rows in by_topic.items()]})


def error_row(_topic, p, result) -> dict:
    """A leader's answer row for a partition of InitializeShareGroupState or DeleteShareGroupState: its
    error and message."""
    return {"partition": p.partition, "error_code": result[0], "error_message": result[1] if len(result) > 1 else None}
