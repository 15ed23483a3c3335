"""What Fetch's two paths share (fetch.py, fetch_disk.py): the topic a fetch names, the topics it may
not read, a partition's entry and the response."""

from __future__ import annotations

import uuid

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .leader_epoch_check import NO_CHECK, epoch_error
from .request import Request


def _topic(node, name: str):
    if name == node.offsets_topic.name:
        return node.offsets_topic
    topic = node.catalog.get(name)
    if topic is None and len(name) == 36:
        try:
            topic_id = uuid.UUID(name)
        except ValueError:
            return None
        topic = node.offsets_topic if topic_id == node.offsets_topic.topic_id else node.catalog.by_id(topic_id)
    return topic


def _unreadable(node, request: Request) -> set[str]:
    """The requested topics this fetcher may not read (answered TOPIC_AUTHORIZATION_FAILED): a
    consumer needs READ on each; a replica (replica id ≥ 0) CLUSTER_ACTION on the cluster for all."""
    if node.access is None:
        return set()
    body = request.body
    if body.replica_id >= 0:
        allowed = authorized(node, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
        return set() if allowed else {t.topic for t in body.topics}
    return {t.topic for t in body.topics
            if not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, t.topic)}


def _entry(index: int, error: ErrorCode, start: int, end: int, records: bytes = b"", lso: int | None = None,
           aborted: list | None = None) -> dict:
    """A partition's entry: `lso` the last stable offset (the high watermark without transactions),
    `aborted` the aborted transactions (read_committed: a list, maybe empty; read_uncommitted: None, as
    Kafka's KafkaApis sends null)."""
    return {"partition_index": index, "error_code": error, "high_watermark": end,
            "last_stable_offset": end if lso is None else lso, "log_start_offset": start,
            "aborted_transactions": aborted, "preferred_read_replica": -1, "records": records}


def aborted_entries(txns, start: int, upper: int | None) -> list[dict]:
    """Kafka's aborted transactions of a read_committed fetch from `start` whose data ends before `upper`."""
    if upper is None:
        return []
    return [{"producer_id": pid, "first_offset": first} for pid, first in txns.aborted_in(start, upper)]


def _unknown(index: int, error: ErrorCode = ErrorCode.unknown_topic_or_partition) -> dict:
    return {"partition_index": index, "error_code": error,
            "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}  # Kafka: MemoryRecords.EMPTY


def _fixed(node, topic, name: str, partition: int, denied: set[str], offsets_log: dict[int, dict],
           current_epoch: int = NO_CHECK) -> dict | None:
    """The entry of a partition answered without reading the records plane: one the fetcher may not
    read, one of `__consumer_offsets` (read already), an unknown one, another node's, one whose
    current leader epoch (v9+) is not the leader's; None: read it."""
    if name in denied:
        return _unknown(partition, ErrorCode.topic_authorization_failed)
    if topic is node.offsets_topic:
        return offsets_log[partition]
    if topic is None or not 0 <= partition < topic.partitions:
        return _unknown(partition)
    if not node.cluster.leads(topic.name, partition):
        return _unknown(partition, ErrorCode.not_leader_or_follower)
    error = epoch_error(node, topic.name, partition, current_epoch)
    return None if error is None else _unknown(partition, error)


def _respond(request: Request, responses: list[dict], traffic=None):
    """The Fetch response; the record bytes it carries counted per topic (`traffic`: the plane's)."""
    if traffic is not None:
        for t in responses:
            traffic.fetched(t["topic"], sum(len(p["records"] or b"") for p in t["partitions"]))
    return build_response(ApiKey.FETCH, request.version,
                          {"error_code": ErrorCode.none, "session_id": 0, "responses": responses})
