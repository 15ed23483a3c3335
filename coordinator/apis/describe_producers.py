"""DescribeProducers (61), v0 (`kafka-transactions.sh describe-producers`, Admin.describeProducers).

Per requested partition, as Kafka's `KafkaApis.handleDescribeProducersRequest` and
`Partition.activeProducerState` answer a partition's leader: READ on the topic, else
TOPIC_AUTHORIZATION_FAILED for each of its partitions; an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION; a partition another node leads (or whose log is loading)
NOT_LEADER_OR_FOLLOWER; else the producers the partition knows
(storage/records_plane/producers.py): id, epoch, last sequence (-1 when only markers were written
in this epoch), last timestamp, the coordinator epoch of its last marker (-1 before any), and the
first offset of its open transaction (-1 when none). `__consumer_offsets` and `records.plane: none`
have no producer state here: an empty list.
"""

from __future__ import annotations

from groupd.coordinator.runtime.records_disk import Unavailable
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for

from .request import Request

KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = (0, 0)


def _partition(index: int, error: ErrorCode, producers=()) -> dict:
    return {"partition_index": index, "error_code": error, "error_message": None, "active_producers": [
        {"producer_id": pid, "producer_epoch": epoch, "last_sequence": last_sequence, "last_timestamp": last_ms,
         "coordinator_epoch": coordinator_epoch, "current_txn_start_offset": txn_start}
        for pid, epoch, last_sequence, last_ms, coordinator_epoch, txn_start in producers]}


def _producers(node, plane, name: str, index: int) -> dict:
    if name == node.offsets_topic.name:
        known = 0 <= index < node.offsets_topic.partitions
        return _partition(index, ErrorCode.none if known else ErrorCode.unknown_topic_or_partition)
    topic = node.catalog.get(name)
    if topic is None or not 0 <= index < topic.partitions:
        return _partition(index, ErrorCode.unknown_topic_or_partition)
    if not node.cluster.leads(name, index):
        return _partition(index, ErrorCode.not_leader_or_follower)
    if plane is None:
        return _partition(index, ErrorCode.none)
    if getattr(plane, "DISK", False):
        try:
            producers = plane.partition(topic, index).producers
        except Unavailable as e:
            return _partition(index, e.error)
    else:
        log = plane.peek((topic.topic_id, index))
        if log is None:
            return _partition(index, ErrorCode.none)
        producers = log.producers
    return _partition(index, ErrorCode.none, producers.active())


def handle(node, request: Request):
    plane = plane_for(node)
    topics = []
    for t in request.body.topics:
        if not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, t.name):
            partitions = [_partition(i, ErrorCode.topic_authorization_failed) for i in t.partition_indexes]
        else:
            partitions = [_producers(node, plane, t.name, i) for i in t.partition_indexes]
        topics.append({"name": t.name, "partitions": partitions})
    return build_response(ApiKey.DESCRIBE_PRODUCERS, request.version, {"topics": topics})
