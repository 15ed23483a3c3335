"""CreatePartitions (37), v0–v3.

v1 changes only quota semantics; v2 is flexible; v3 adds nothing on the wire. Partitions can only
be added, up to `topic.max.partitions` (INVALID_PARTITIONS beyond it); consumers see the new count
through Metadata and their group leader rebalances.
"""

from __future__ import annotations

from collections import Counter

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from groupd.coordinator.security.authorizer import authorized
from groupd.coordinator.security.acls import AclOperation, ResourceType
from .request import Request
from .create_topics import too_many_partitions

KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = (0, 3)


def _check(node, request: Request, t, duplicated: bool) -> tuple[ErrorCode, str | None]:
    if duplicated:
        return ErrorCode.invalid_request, "Duplicate topic in request."
    if not authorized(node, request, AclOperation.ALTER, ResourceType.TOPIC, t.name):
        return ErrorCode.topic_authorization_failed, None
    topic = node.catalog.get(t.name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{t.name}' does not exist."
    if t.count < topic.partitions:
        return (ErrorCode.invalid_partitions, f"Topic currently has {topic.partitions} partitions, "
                f"which is higher than the requested {t.count}.")
    if t.count == topic.partitions:
        return ErrorCode.invalid_partitions, f"Topic already has {topic.partitions} partitions."
    if t.count > node.settings.topic_max_partitions:
        return ErrorCode.invalid_partitions, too_many_partitions(t.count, node.settings.topic_max_partitions)
    if t.assignments is not None and (len(t.assignments) != t.count - topic.partitions or any(
            list(a.broker_ids) != [node.node_id] for a in t.assignments)):
        return (ErrorCode.invalid_replica_assignment,
                f"Assignments must give one replica on broker {node.node_id} per new partition.")
    return ErrorCode.none, None


def handle(node, request: Request):
    body = request.body
    if not node.writes_catalog:  # another worker writes the catalog: the client asks it (Metadata's controller)
        return build_response(ApiKey.CREATE_PARTITIONS, request.version, {"results": [
            {"name": t.name, "error_code": ErrorCode.not_controller, "error_message": None} for t in body.topics]})
    counts = Counter(t.name for t in body.topics)
    results = []
    for t in body.topics:
        error, message = _check(node, request, t, counts[t.name] > 1)
        if error is ErrorCode.none and not body.validate_only:
            node.catalog.set_partitions(t.name, t.count)
            node.log_topic_change("partitions added", t.name, t.count, request)
        results.append({"name": t.name, "error_code": error, "error_message": message})
    return build_response(ApiKey.CREATE_PARTITIONS, request.version, {"results": results})
