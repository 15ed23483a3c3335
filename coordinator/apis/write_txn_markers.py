"""WriteTxnMarkers (27), v1–v2.

Kafka's broker-to-broker API: a transaction coordinator asks the leader of each partition of a
transaction to append its COMMIT or ABORT marker. v2 is flexible (v0 is gone since Kafka 4.0). It
needs CLUSTER_ACTION on the cluster. groupd's own coordinator writes markers in process
(coordinator/runtime/transactions.py); this answers the same two ways: a data partition through the
records plane's `txn_data.write_marker`, a `__consumer_offsets` partition through the group
coordinator's `complete_transaction`, each partition's error as Kafka's (UNKNOWN_TOPIC_OR_PARTITION
for one that does not exist).
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.runtime.transactions import data_marker_seam
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = (1, 2)


def _answer(request: Request, results: list[tuple[int, dict[str, list[tuple[int, ErrorCode]]]]]):
    return build_response(KEY, request.version, {"markers": [
        {"producer_id": pid, "topics": [{"name": t, "partitions": [{"partition_index": p, "error_code": e}
                                                                  for p, e in parts]}
                                        for t, parts in topics.items()]}
        for pid, topics in results]})


def handle(node, request: Request):
    markers = request.body.markers
    if not authorized(node, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return _answer(request, [(m.producer_id, {t.name: [(p, ErrorCode.cluster_authorization_failed)
                                                           for p in t.partition_indexes] for t in m.topics})
                                 for m in markers])
    return asyncio.ensure_future(_write(node, request))


async def _write(node, request: Request):
    results = []
    for marker in request.body.markers:
        topics = {}
        for t in marker.topics:
            errors = await asyncio.gather(*(_mark(node, marker, t.name, p) for p in t.partition_indexes))
            topics[t.name] = list(zip(t.partition_indexes, errors))
        results.append((marker.producer_id, topics))
    return _answer(request, results)


async def _mark(node, marker, topic: str, partition: int) -> ErrorCode:
    commit = bool(marker.transaction_result)
    if topic == node.offsets_topic.name:
        if not 0 <= partition < node.offsets_topic.partitions:
            return ErrorCode.unknown_topic_or_partition
        complete = getattr(node.coordinator, "complete_transaction", None)
        if complete is None:
            return ErrorCode.unsupported_for_message_format
        return await complete(partition, marker.producer_id, marker.producer_epoch, commit, marker.coordinator_epoch)
    found = node.catalog.get(topic)
    if found is None or not 0 <= partition < found.partitions:
        return ErrorCode.unknown_topic_or_partition
    write_marker = data_marker_seam()
    if write_marker is None:
        return ErrorCode.unsupported_for_message_format
    return await write_marker(node, topic, partition, marker.producer_id, marker.producer_epoch, commit,
                              marker.coordinator_epoch)
