"""What ConsumerGroupDescribe and ShareGroupDescribe answer alike, group by group: an empty id is
INVALID_GROUP_ID; DESCRIBE on the group, then (with the authorizer on) on every topic a member is
assigned, else TOPIC_AUTHORIZATION_FAILED with Kafka's message; a group whose partition is loading or
failed gets that error; each entry with its authorized operations when asked."""

from __future__ import annotations

from collections.abc import Callable

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode

from .describe_groups import group_operations
from .request import Request

_HIDDEN_TOPICS = "The described group uses topics that the client is not authorized to describe."


def failed(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}


def described_groups(node, request: Request, describe: Callable[[str, object], dict | ErrorCode],
                     assigned_topics: Callable[[dict], set[str]]) -> list[dict]:
    """Each group of the request, as `describe(group_id, topics image)` gives it."""
    body = request.body
    topics = node.topics_image()
    groups = []
    for group_id in body.group_ids:
        if group_id == "":
            described = failed(group_id, ErrorCode.invalid_group_id)
        elif not authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described = failed(group_id, ErrorCode.group_authorization_failed)
        else:
            described = describe(group_id, topics)
            if isinstance(described, ErrorCode):  # the group's partition is loading or failed
                described = failed(group_id, described)
            elif node.access is not None and not all(
                    authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                    for name in assigned_topics(described)):
                described = failed(group_id, ErrorCode.topic_authorization_failed, _HIDDEN_TOPICS)
        ok = described["error_code"] == ErrorCode.none
        groups.append({**described, "authorized_operations": group_operations(
            node, request, group_id, ok and body.include_authorized_operations)})
    return groups
