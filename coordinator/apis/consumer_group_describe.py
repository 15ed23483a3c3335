"""ConsumerGroupDescribe (69), v0–v1 (KIP-848, spec §1.5–1.6, §7.2).

v1 adds each member's MemberType (1: a consumer-protocol member). A group that is missing or not
a consumer group is GROUP_ID_NOT_FOUND (clients then fall back to DescribeGroups); an empty id
INVALID_GROUP_ID. Partitions are listed with their topic names; topics no longer known are left out.
"""

from __future__ import annotations

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .describe_groups import OMITTED, group_operations
from .request import Request

KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
VERSIONS = (0, 1)


def _failed(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}


_HIDDEN_TOPICS = "The described group uses topics that the client is not authorized to describe."


def _assigned_topics(described: dict) -> set[str]:
    """The topics of every member's current and target assignment (Kafka 4.0 checks both, PR 19042)."""
    return {t["topic_name"] for m in described["members"] for which in ("assignment", "target_assignment")
            for t in m[which]["topic_partitions"]}


def handle(node, request: Request):
    body = request.body
    if "consumer" not in node.settings.group_coordinator_rebalance_protocols:
        return build_response(KEY, request.version, {"groups": [
            {**_failed(g, ErrorCode.unsupported_version), "authorized_operations": OMITTED} for g in body.group_ids]})
    topics = node.topics_image()
    groups = []
    for group_id in body.group_ids:
        if group_id == "":
            described = _failed(group_id, ErrorCode.invalid_group_id)
        elif not authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described = _failed(group_id, ErrorCode.group_authorization_failed)
        else:
            described = node.coordinator.consumer_describe(group_id, topics)
            if isinstance(described, ErrorCode):  # the group's partition is loading or failed
                described = _failed(group_id, described)
            elif node.access is not None and not all(
                    authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                    for name in _assigned_topics(described)):
                described = _failed(group_id, ErrorCode.topic_authorization_failed, _HIDDEN_TOPICS)
        ok = described["error_code"] == ErrorCode.none
        groups.append({**described, "authorized_operations": group_operations(
            node, request, group_id, ok and body.include_authorized_operations)})
    return build_response(KEY, request.version, {"groups": groups})
