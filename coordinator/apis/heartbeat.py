"""Heartbeat (12), v0–v4.

v1 adds throttle time; v2 nothing on the wire; v3 static membership (group.instance.id); v4 is
flexible. The hot path: a valid heartbeat only moves the member's session deadline.
"""

from __future__ import annotations

from functools import cache

from groupd.coordinator.core.classic.requests import HeartbeatRequest
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import Encoded, build_response

from .request import Request

KEY = ApiKey.HEARTBEAT
VERSIONS = (0, 4)


@cache
def _response(version: int, error: ErrorCode) -> Encoded:
    return Encoded(build_response(ApiKey.HEARTBEAT, version, {"error_code": error}))


def handle(node, request: Request):
    body = request.body
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(request.version, ErrorCode.group_authorization_failed)
    error = node.coordinator.heartbeat(HeartbeatRequest(body.group_id, body.generation_id, body.member_id,
                                                   getattr(body, "group_instance_id", None)))
    return _response(request.version, error)


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error` (an injected fault's)."""
    return _response(version, error)
