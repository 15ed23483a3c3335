"""DescribeTopicPartitions (75), v0 (KIP-966): Metadata's topic entries, paginated. The Java admin
client's describeTopics (kafka-topics --describe) uses it on brokers that offer it.

Topics are answered in name order from the cursor's topic (its partitions from the cursor's index),
at most `response_partition_limit` partitions (capped at Kafka's max.request.partition.size.limit,
2000); `next_cursor` points at the first partition left out. An empty topic list means every topic
the principal may describe (the others left out silently, unknown names never reported); named
topics the principal may not describe answer TOPIC_AUTHORIZATION_FAILED, unknown ones
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name). A cursor whose topic is not
among the named ones, or with a negative partition, is an invalid request. No replica is ever
ineligible: the ELR lists are empty, as a Kafka with one replica per partition answers them.
"""

from __future__ import annotations

import uuid

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized, authorized_operations
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.catalog import legal_topic_name

from .metadata import topic_entry
from .request import Request

KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
VERSIONS = (0, 0)

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit
_ZERO_ID = uuid.UUID(int=0)


def _error(name: str, error: ErrorCode) -> dict:
    return {"error_code": error, "name": name, "topic_id": _ZERO_ID, "is_internal": False, "partitions": []}


def handle(node, request: Request):
    body = request.body
    every = not body.topics
    cursor = body.cursor
    first = cursor.topic_name if cursor is not None else ""
    names = {t.name for t in body.topics if t.name >= first}
    if cursor is not None and (cursor.partition_index < 0 or (not every and cursor.topic_name not in names)):
        return build_response(KEY, request.version, {"topics": [_error(t.name, ErrorCode.invalid_request)
                                                                for t in body.topics]})
    topics = {t.name: t for t in (*node.catalog, node.offsets_topic)}
    if every:
        names = {name for name in topics if name >= first}
    denied = []
    allowed = []
    for name in sorted(names):
        if authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name, audit=not every):
            allowed.append(name)
        elif not every:
            denied.append(_error(name, ErrorCode.topic_authorization_failed))

    def operations(name: str) -> int:  # Kafka gives them for every topic it looked up
        return authorized_operations(node, request, ResourceType.TOPIC, name)

    remaining = max(min(MAX_PARTITIONS, body.response_partition_limit), 1)
    answered, next_cursor = [], None
    for name in allowed:
        topic = topics.get(name)
        if topic is None:
            if not every:
                answered.append({**_error(name, ErrorCode.unknown_topic_or_partition if legal_topic_name(name)
                                          else ErrorCode.invalid_topic_exception),
                                 "topic_authorized_operations": operations(name)})
            continue
        if remaining == 0:  # the next page starts with this topic
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        entry = topic_entry(node, topic)
        end = min(topic.partitions, start + remaining)
        partitions = [{**p, "eligible_leader_replicas": (), "last_known_elr": ()}
                      for p in entry["partitions"][start:end]]
        answered.append({**entry, "partitions": partitions, "topic_authorized_operations": operations(name)})
        if end < topic.partitions:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(partitions)
    return build_response(KEY, request.version, {"topics": answered + denied, "next_cursor": next_cursor})
