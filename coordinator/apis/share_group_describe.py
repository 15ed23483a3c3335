"""ShareGroupDescribe (77), v1 (KIP-932, share-groups spec §1.3).

v0 existed only in Kafka 4.0 (unstable) and was removed in 4.1; v1 has the same layout. A group
that is missing or not a share group is GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID; ACLs:
Describe on the group, and on every topic a member is assigned (else TOPIC_AUTHORIZATION_FAILED,
as Kafka). Partitions are listed with their topic names; topics no longer known are left out.
"""

from __future__ import annotations

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .describe_groups import group_operations
from .request import Request

KEY = ApiKey.SHARE_GROUP_DESCRIBE
VERSIONS = (1, 1)

_HIDDEN_TOPICS = "The described group uses topics that the client is not authorized to describe."


def _failed(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}


def handle(node, request: Request):
    body = request.body
    topics = node.topics_image()
    groups = []
    for group_id in body.group_ids:
        if group_id == "":
            described = _failed(group_id, ErrorCode.invalid_group_id)
        elif not authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described = _failed(group_id, ErrorCode.group_authorization_failed)
        else:
            described = node.coordinator.share_describe(group_id, topics)
            if isinstance(described, ErrorCode):  # the group's partition is loading or failed
                described = _failed(group_id, described)
            elif node.access is not None and not all(
                    authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic_name"])
                    for m in described["members"] for t in m["assignment"]["topic_partitions"]):
                described = _failed(group_id, ErrorCode.topic_authorization_failed, _HIDDEN_TOPICS)
        ok = described["error_code"] == ErrorCode.none
        groups.append({**described, "authorized_operations": group_operations(
            node, request, group_id, ok and body.include_authorized_operations)})
    return build_response(KEY, request.version, {"groups": groups})
