"""DescribeGroups (15), v0–v6.

v1 adds throttle time; v2 nothing on the wire; v3 authorized operations (when asked for: every
operation on a group, READ, DELETE and DESCRIBE, since groupd has no ACLs; otherwise Kafka's
"omitted" value); v4 the members' group.instance.id; v5 is flexible; v6 answers an unknown group
GROUP_ID_NOT_FOUND with a message (KIP-1043) instead of an empty "Dead" group.
"""

from __future__ import annotations

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized, authorized_operations
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import LARGE_ANSWER_ROWS, Request, answer_off_loop

KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = (0, 6)


OMITTED = -(2**31)


def group_operations(node, request: Request, group_id: str, include: bool) -> int:
    """The group's authorized operations (KIP-430) when asked for, else INT32_MIN."""
    return authorized_operations(node, request, ResourceType.GROUP, group_id) if include else OMITTED


def _failed(group_id: str, error: ErrorCode, state: str = "", message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": state,
            "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": OMITTED}


def handle(node, request: Request):
    body, version = request.body, request.version
    include = getattr(body, "include_authorized_operations", False)
    groups = []
    for group_id in body.groups:
        if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_failed(group_id, ErrorCode.group_authorization_failed))
            continue
        described = node.coordinator.describe(group_id)
        if isinstance(described, ErrorCode):  # the group's partition is loading or failed
            groups.append(_failed(group_id, described))
        elif described is None or described.get("type", "classic") != "classic":  # spec §7.2
            missing = version >= 6
            message = (f"Group {group_id} not found." if described is None
                       else f"Group {group_id} is not a classic group.")
            dead = _failed(group_id, ErrorCode.group_id_not_found if missing else ErrorCode.none, "Dead",
                           message if missing else None)
            if not missing:  # before v6 a "Dead" group is an answer: Kafka fills its authorized operations
                dead["authorized_operations"] = group_operations(node, request, group_id, include)
            groups.append(dead)
        else:
            groups.append({**described, "error_code": ErrorCode.none, "error_message": None,
                           "authorized_operations": group_operations(node, request, group_id, include)})
    if sum(len(g["members"]) for g in groups) > LARGE_ANSWER_ROWS:  # the descriptions are snapshots
        return answer_off_loop(node, request, lambda: build_response(ApiKey.DESCRIBE_GROUPS, version,
                                                                     {"groups": groups}))
    return build_response(ApiKey.DESCRIBE_GROUPS, version, {"groups": groups})
