"""Metadata (3), v0–v13.

v1 makes the topic list nullable (null = all topics; in v0 an empty list means all) and adds the
controller; v2 the cluster id; v4 `allow_auto_topic_creation`; v5 offline replicas; v7 leader
epochs; v8 authorized operations (left at Kafka's "not requested" value); v9 is flexible; v10
topic ids, answered from v12 as Kafka does (a topic may be asked for by id alone; a non-zero id wins
over the name, which the Java client sends as "" with an id); v13 a top-level error code (KIP-1102's
REBOOTSTRAP_REQUIRED, never sent here: always NONE).

The brokers, the controller and each partition's leader come from the node's view of the cluster
(coordinator/cluster/view.py; a lone node is all three); leader epoch -1, so no client tries to validate
positions. An offsets partition's leader is its coordinator (LEADER_NOT_AVAILABLE while none).
`__consumer_offsets` is listed among all topics and
answered by name or id as Kafka does, as an internal topic (coordinator/runtime/offsets_topic.py); it is
never auto-created into the catalog. So is `__transaction_state` once it exists (a transactional id has
been used: Kafka creates it then), each partition led by the coordinator of the transactional ids
hashed to it. Requested topics that do not exist are created when
`auto.create.topics.enable` is on and the request allows it, and are answered without an error
(KafkaJS fails on any topic error) once the catalog holding them is written (off the event loop);
a creation whose write failed answers LEADER_NOT_AVAILABLE, as Kafka answers a topic it is still
creating, and the client's next Metadata tries again.
"""

from __future__ import annotations

import uuid

from groupd.coordinator.cluster.view import broker_entries
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized, authorized_operations
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.catalog import legal_topic_name

from .request import Request, respond, respond_all

KEY = ApiKey.METADATA
VERSIONS = (0, 13)

_ZERO_ID = uuid.UUID(int=0)
OMITTED = -(2**31)  # authorized operations not asked for


def _partition_entry(p: int, leader: int | None, epoch: int) -> dict:
    if leader is None:
        return {"error_code": ErrorCode.leader_not_available, "partition_index": p, "leader_id": -1,
                "leader_epoch": -1, "replica_nodes": (), "isr_nodes": (), "offline_replicas": ()}
    return {"error_code": ErrorCode.none, "partition_index": p, "leader_id": leader, "leader_epoch": epoch,
            "replica_nodes": (leader,), "isr_nodes": (leader,), "offline_replicas": ()}


def topic_entry(node, topic) -> dict:
    cluster, internal = node.cluster, topic is node.offsets_topic
    leader = cluster.coordinator if internal else (lambda p: cluster.leader(topic.name, p))
    epoch = cluster.coordinator_epoch if internal else (lambda p: cluster.leader_epoch(topic.name, p))
    transactions = getattr(node, "transactions", None)
    if transactions is not None and topic is transactions.topic:  # led by the owner of its home partition
        internal = True
        leader = lambda p: cluster.coordinator(transactions.home(p))  # noqa: E731
        epoch = lambda p: cluster.coordinator_epoch(transactions.home(p))  # noqa: E731
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.topic_id, "is_internal": internal,
            "partitions": [_partition_entry(p, leader(p), epoch(p)) for p in range(topic.partitions)]}


def _internal_topics(node) -> tuple:
    """`__consumer_offsets`, and `__transaction_state` once created (Kafka creates it at the first
    transactional use)."""
    transactions = getattr(node, "transactions", None)
    if transactions is not None and transactions.topic_created():
        return node.offsets_topic, transactions.topic
    return (node.offsets_topic,)


def _error_entry(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> dict:
    return {"error_code": error, "name": name, "topic_id": topic_id or _ZERO_ID, "partitions": []}


def handle(node, request: Request):
    body, version = request.body, request.version
    wanted = body.topics
    if version < 12 and wanted and any(t.name is None for t in wanted):
        # v10/v11 carry topic ids but Kafka answers them only from v12: a null name is an
        # InvalidRequestException, answered as MetadataRequest.getErrorResponse does
        return build_response(ApiKey.METADATA, version, {
            "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": [_error_entry(t.name or "", t.topic_id, ErrorCode.invalid_request) for t in wanted]})
    def describable(name: str, audit: bool = True) -> bool:
        return authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name, audit)

    internals = _internal_topics(node)
    internal_by_name = {t.name: t for t in internals}
    internal_by_id = {t.topic_id: t for t in internals}
    if wanted is None or (version == 0 and not wanted):  # every topic the principal may describe
        topics = [topic_entry(node, t) for t in (*node.catalog, *internals) if describable(t.name, audit=False)]
    else:
        may_create = node.settings.auto_create_topics_enable and getattr(body, "allow_auto_topic_creation", True)
        topics = []
        for t in wanted:
            name, topic_id = t.name, getattr(t, "topic_id", None)
            # by id from v12, as Kafka answers ids (the Java client sends name "" with one); below v12 the
            # name is what counts (and a response name there may not be null)
            if version >= 12 and (name is None or topic_id not in (None, _ZERO_ID)):
                topic = internal_by_id.get(t.topic_id) or node.catalog.by_id(t.topic_id)
                if topic is not None and not describable(topic.name):  # ids are not secret, names are
                    topics.append(_error_entry(None, t.topic_id, ErrorCode.topic_authorization_failed))
                    continue
                topics.append(topic_entry(node, topic) if topic else
                              _error_entry(None, t.topic_id, ErrorCode.unknown_topic_id))
                continue
            if not describable(name):  # before existence: the entry reveals nothing
                topics.append(_error_entry(name, None, ErrorCode.topic_authorization_failed))
                continue
            topic = internal_by_name.get(name) or node.catalog.get(name)
            if topic is None and may_create:
                if not legal_topic_name(name):
                    topics.append(_error_entry(name, None, ErrorCode.invalid_topic_exception))
                    continue
                if not (authorized(node, request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False)
                        or authorized(node, request, AclOperation.CREATE, ResourceType.TOPIC, name)):
                    topics.append(_error_entry(name, None, ErrorCode.topic_authorization_failed))
                    continue
                creating = node.auto_create(name)
                # None: the controller worker creates it; a failed write: the client asks again
                topics.append(_error_entry(name, None, ErrorCode.leader_not_available) if creating is None else
                              respond(creating, lambda topic, name=name: topic_entry(node, topic) if topic else
                                      _error_entry(name, None, ErrorCode.leader_not_available)))
                continue
            topics.append(topic_entry(node, topic) if topic else
                          _error_entry(name, None, ErrorCode.unknown_topic_or_partition))
    return respond_all(topics, lambda done: _response(node, request, done))


def _response(node, request: Request, topics: list[dict]):
    body, version = request.body, request.version
    if getattr(body, "include_topic_authorized_operations", False):  # v8+ (KIP-430): for the topics returned
        topics = [{**t, "topic_authorized_operations": authorized_operations(node, request, ResourceType.TOPIC,
                                                                             t["name"])}
                  if t["error_code"] is ErrorCode.none else t for t in topics]
    cluster_operations = OMITTED
    if getattr(body, "include_cluster_authorized_operations", False):  # v8-v10; 0 without DESCRIBE
        cluster_operations = (authorized_operations(node, request, ResourceType.CLUSTER, CLUSTER_NAME)
                              if authorized(node, request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME,
                                            audit=False) else 0)
    return build_response(ApiKey.METADATA, version, {
        "error_code": ErrorCode.none,
        "cluster_authorized_operations": cluster_operations,
        "brokers": broker_entries(node.cluster, request.advertised),
        "cluster_id": node.cluster_id,
        "controller_id": node.cluster.controller_id(),
        "topics": topics,
    })
