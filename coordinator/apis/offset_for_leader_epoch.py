"""OffsetForLeaderEpoch (23), v2–v4 (Kafka 4 removed v0–v1).

v2 is the oldest Kafka 4 serves (current_leader_epoch, throttle time); v3 adds replica_id; v4 is
flexible. Consumers ask it after a leader change or a reset, to learn whether their position is
still on the log (KIP-320): for each partition, the end offset of the requested epoch and the largest
epoch ≤ it that the leader knows (Kafka's `UnifiedLog.endOffsetForEpoch`: the current epoch ends at
the log end, an older one where the next larger epoch begins; -1 or an epoch larger than any known
answers leader_epoch -1, end_offset -1; leader_epochs.py `end_offset_for`).

Errors, as Kafka's `ReplicaManager.lastOffsetForLeaderEpoch`: an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION; another node's partition NOT_LEADER_OR_FOLLOWER; then the
current_leader_epoch check (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, -1 skips it). ACLs:
CLUSTER_ACTION on the cluster (a replica) answers every topic, else each topic needs DESCRIBE
(TOPIC_AUTHORIZATION_FAILED).

The disk plane reads the partition's leader-epoch-checkpoint, from its log start (Kafka trims the
history when DeleteRecords or retention moves the log start); the memory plane and `records.plane:
none` have one epoch, 0, from offset 0 (as a fresh Kafka topic); `__consumer_offsets` the epoch of
its coordinator from its log start.
"""

from __future__ import annotations

from groupd.coordinator.runtime.offsets_topic import log_range
from groupd.coordinator.runtime.records_disk import Unavailable
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for
from groupd.storage.records_plane.leader_epochs import LeaderEpochs

from .leader_epoch_check import epoch_error
from .request import Request

KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = (2, 4)


def _error(partition: int, error: ErrorCode) -> dict:
    return {"error_code": error, "partition": partition, "leader_epoch": -1, "end_offset": -1}


def _history(node, plane, topic, index: int) -> tuple[LeaderEpochs, int] | ErrorCode:
    """The partition's epochs and log end, or the error that answers it."""
    if topic is node.offsets_topic:
        found = log_range(node.coordinator, index)
        if found is None:
            return ErrorCode.not_leader_or_follower
        return LeaderEpochs([(node.cluster.coordinator_epoch(index), found[0])]), found[1]
    if plane is None:
        return LeaderEpochs([(0, 0)]), 0
    if getattr(plane, "DISK", False):
        try:
            part = plane.partition(topic, index)
        except Unavailable as e:
            return e.error
        return part.dlog.epochs.from_start(part.log_start), part.high_watermark
    log = plane.peek((topic.topic_id, index))
    return LeaderEpochs([(0, 0)]), log.high_watermark if log else 0


def _answer(node, plane, topic, p) -> dict:
    index = p.partition
    if topic is None or not 0 <= index < topic.partitions:
        return _error(index, ErrorCode.unknown_topic_or_partition)
    internal = topic is node.offsets_topic
    if not (node.cluster.owns(index) if internal else node.cluster.leads(topic.name, index)):
        return _error(index, ErrorCode.not_leader_or_follower)
    if not internal:
        error = epoch_error(node, topic.name, index, p.current_leader_epoch)
        if error is not None:
            return _error(index, error)
    found = _history(node, plane, topic, index)
    if isinstance(found, ErrorCode):
        return _error(index, found)
    epochs, log_end = found
    epoch, end = epochs.end_offset_for(p.leader_epoch, log_end)
    return {"error_code": ErrorCode.none, "partition": index, "leader_epoch": epoch, "end_offset": end}


def handle(node, request: Request):
    plane = plane_for(node)
    replica = authorized(node, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, audit=False)
    topics = []
    for t in request.body.topics:
        if not replica and not authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic):
            partitions = [_error(p.partition, ErrorCode.topic_authorization_failed) for p in t.partitions]
        else:
            topic = node.offsets_topic if t.topic == node.offsets_topic.name else node.catalog.get(t.topic)
            partitions = [_answer(node, plane, topic, p) for p in t.partitions]
        topics.append({"topic": t.topic, "partitions": partitions})
    return build_response(KEY, request.version, {"throttle_time_ms": 0, "topics": topics})
