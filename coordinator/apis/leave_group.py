"""LeaveGroup (13), v0–v5.

v1 adds throttle time; v2 nothing on the wire; v3 batches members (identities with member id and
group.instance.id; an empty member id with an instance id removes that static member, as
`kafka-consumer-groups --delete-members` does); v4 is flexible; v5 adds a reason per member.
v0–v2 carry one member id and answer with a single top-level error.
"""

from __future__ import annotations

from groupd.coordinator.core.classic.requests import LeaveRequest
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request, respond

KEY = ApiKey.LEAVE_GROUP
VERSIONS = (0, 5)


def handle(node, request: Request):
    body, version = request.body, request.version
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(version, {"error_code": ErrorCode.group_authorization_failed, "members": []})
    if version >= 3:
        identities = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        identities = [(body.member_id, None)]
    return respond(node.coordinator.leave(LeaveRequest(body.group_id, identities)), lambda reply: _response(version, reply))


def _response(version: int, reply: dict):
    error, members = reply["error_code"], reply["members"]
    if version < 3:
        if error is ErrorCode.none and members:
            error = members[0][2]
        return build_response(ApiKey.LEAVE_GROUP, version, {"error_code": error})
    return build_response(ApiKey.LEAVE_GROUP, version, {"error_code": error, "members": [
        {"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in members]})


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error` (an injected fault's)."""
    return build_response(ApiKey.LEAVE_GROUP, version, {"error_code": error, "members": []})
