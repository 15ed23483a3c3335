"""CreatePartitions (37), v0–v3.

v1 changes only quota semantics; v2 is flexible; v3 adds nothing on the wire. Partitions can only
be added, up to `topic.max.partitions` (INVALID_PARTITIONS beyond it); consumers see the new count
through Metadata and their group leader rebalances. The catalog is written off the event loop and
the request answered once it is (a failed write adds nothing: see CreateTopics for its error).
"""

from __future__ import annotations

from collections import Counter

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.files import DataDirError

from .create_topics import too_many_partitions, write_failure
from .request import Request, respond_all

KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = (0, 3)


def not_an_increase(name: str, partitions: int, count: int) -> str:
    return f"The topic {name} currently has {partitions} partition(s); {count} would not be an increase."


def _check(node, request: Request, t, duplicated: bool) -> tuple[ErrorCode, str | None]:
    if duplicated:
        return ErrorCode.invalid_request, "Duplicate topic in request."
    if not authorized(node, request, AclOperation.ALTER, ResourceType.TOPIC, t.name):
        return ErrorCode.topic_authorization_failed, None
    topic = node.catalog.get(t.name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{t.name}' does not exist."
    if t.count < topic.partitions:
        return ErrorCode.invalid_partitions, not_an_increase(t.name, topic.partitions, t.count)
    if t.count == topic.partitions:
        return ErrorCode.invalid_partitions, f"Topic already has {topic.partitions} partition(s)."
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
            results.append(node.spawn(_resize(node, request, t.name, t.count)))
        else:
            results.append({"name": t.name, "error_code": error, "error_message": message})
    return respond_all(results, lambda done: build_response(ApiKey.CREATE_PARTITIONS, request.version,
                                                            {"results": done}))


async def _resize(node, request: Request, name: str, count: int) -> dict:
    """The topic's result once the catalog with its new count is written (or not)."""
    try:
        topic = await node.catalog.resize(name, count)
    except (OSError, DataDirError) as e:
        error, message = write_failure(e, "The partitions could not be stored")
        node.log_topic_failure("partitions not added", name, message, request)
        return {"name": name, "error_code": error, "error_message": message}
    if topic is None:  # deleted while this request waited
        return {"name": name, "error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": f"The topic '{name}' does not exist."}
    if topic.partitions > count:  # another request grew it further while this one waited
        return {"name": name, "error_code": ErrorCode.invalid_partitions,
                "error_message": not_an_increase(name, topic.partitions, count)}
    node.log_topic_change("partitions added", name, count, request)
    return {"name": name, "error_code": ErrorCode.none, "error_message": None}
