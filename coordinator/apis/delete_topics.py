"""DeleteTopics (20), v1–v6 (Kafka 4 removed v0).

v4 is flexible; v5 adds error messages; v6 names topics by name or id (`topics[]` instead of
`topic_names[]`) and returns ids. The catalog is written off the event loop and the request answered
once it is (a failed write deletes nothing: see CreateTopics for its error).
"""

from __future__ import annotations

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.files import DataDirError

from .create_topics import write_failure
from .request import Request, respond_all

KEY = ApiKey.DELETE_TOPICS
VERSIONS = (1, 6)


def _delete(node, name: str | None, topic_id, request: Request, cluster: bool):
    """Delete one topic. Without DELETE on the cluster, a topic needs DESCRIBE (else its existence
    and, asked by id, its name stay hidden) and DELETE."""
    topic = node.catalog.get(name) if name is not None else node.catalog.by_id(topic_id)
    if not cluster and (name is not None or topic is not None):
        checked = name if name is not None else topic.name
        if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, checked):
            return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.topic_authorization_failed,
                    "error_message": None}
        if not authorized(node, request, AclOperation.DELETE, ResourceType.TOPIC, checked):
            return {"name": checked, "topic_id": topic_id, "error_code": ErrorCode.topic_authorization_failed,
                    "error_message": None}
    if topic is None:
        return _unknown(name, topic_id)
    return node.spawn(_remove(node, request, name, topic_id, topic.name))


def _unknown(name: str | None, topic_id) -> dict:
    error = ErrorCode.unknown_topic_or_partition if name is not None else ErrorCode.unknown_topic_id
    return {"name": name, "topic_id": topic_id, "error_code": error,
            "error_message": "This server does not host this topic ID." if name is None else
            "This server does not host this topic-partition."}


async def _remove(node, request: Request, name: str | None, topic_id, found: str) -> dict:
    """The topic's result once the catalog without it is written (or not)."""
    try:
        topic = await node.catalog.remove(found)
    except (OSError, DataDirError) as e:
        error, message = write_failure(e, "The topic could not be deleted")
        node.log_topic_failure("not deleted", found, message, request)
        return {"name": name if name is not None else found, "topic_id": topic_id, "error_code": error,
                "error_message": message}
    if topic is None:  # another request deleted it while this one waited
        return _unknown(name, topic_id)
    node.log_topic_change("deleted", topic.name, topic.partitions, request)
    return {"name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.none, "error_message": None}


def handle(node, request: Request):
    body = request.body
    if not node.writes_catalog:  # another worker writes the catalog: the client asks it (Metadata's controller)
        return build_response(ApiKey.DELETE_TOPICS, request.version, {"responses": [
            {"name": name, "topic_id": topic_id, "error_code": ErrorCode.not_controller, "error_message": None}
            for name, topic_id in ([(t.name, t.topic_id) for t in body.topics] if request.version >= 6
                                   else [(n, None) for n in body.topic_names])]})
    cluster = authorized(node, request, AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False)
    if request.version >= 6:
        results = [_delete(node, t.name, t.topic_id, request, cluster) for t in body.topics]
    else:
        results = [_delete(node, name, None, request, cluster) for name in body.topic_names]
    return respond_all(results, lambda done: build_response(ApiKey.DELETE_TOPICS, request.version,
                                                            {"responses": done}))
