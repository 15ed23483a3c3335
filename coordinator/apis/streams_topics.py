"""The internal topics of a streams group (KIP-1071), created by the broker: a StreamsGroupHeartbeat
whose topology needs repartition or changelog topics that do not exist names them
(MISSING_INTERNAL_TOPICS) and the broker creates them with the partitions and configs the topology
asks for — Kafka's KafkaApis hands them to its AutoTopicCreationManager after the heartbeat. They
go through CreateTopics' checks (coordinator/apis/create_topics.py) and the catalog's write, made by
the controller (under `--workers` another worker asks it: coordinator/cluster/controller_writes.py);
the requesting principal needs CREATE on the cluster or the topic, as Kafka requires. A failure is
logged and tried again at the member's next heartbeat, which still finds the topic missing."""

from __future__ import annotations

import logging
import types

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode

from .create_topics import check_topic
from .request import Request

log = logging.getLogger("groupd")
_creating: set[tuple[int, str]] = set()  # (node, topic) whose catalog write is in flight


def create_internal_topics(node, request: Request, topics) -> None:
    """Start creating each missing internal topic (`InternalTopic`s of coordinator/core/streams/topology.py)."""
    if not topics:
        return
    cluster = authorized(node, request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False)
    may_create = lambda name: cluster or authorized(  # noqa: E731
        node, request, AclOperation.CREATE, ResourceType.TOPIC, name)
    for topic in topics:
        key = (id(node), topic.name)
        if key in _creating or node.catalog.get(topic.name) is not None:
            continue
        asked = types.SimpleNamespace(name=topic.name, num_partitions=topic.partitions,
                                      replication_factor=topic.replication_factor, assignments=(),
                                      configs=[types.SimpleNamespace(name=k, value=v) for k, v in topic.configs])
        error, message, partitions = check_topic(node, asked, False, may_create)
        if error is not ErrorCode.none:
            if error is not ErrorCode.topic_already_exists:
                node.log_topic_failure("not created", topic.name, f"{error.name}: {message}", request)
            continue
        _creating.add(key)
        written = controller_writes.write(node, "create_internal_topic", {
            "name": topic.name, "partitions": partitions, "configs": dict(topic.configs)})
        written.add_done_callback(lambda done, key=key, name=topic.name: _created(request, name, key, done))


def _created(request: Request, name: str, key: tuple[int, str], done) -> None:
    _creating.discard(key)
    result = done.result() if not done.cancelled() and done.exception() is None else {"failed": "cancelled"}
    if "created" in result:
        log.info("topic created topic=%s partitions=%d reason=streams-internal client=%s host=%s", name,
                 result["created"], request.header.client_id, request.client_host)
    elif "exists" not in result:
        why = result.get("failed") or result.get("timed_out") or "no controller answered"
        log.error("topic not created topic=%s reason=streams-internal: %s client=%s host=%s", name, why,
                  request.header.client_id, request.client_host)
