"""JoinGroup (11), v0–v9.

v1 adds the rebalance timeout (v0: it equals the session timeout); v2 throttle time; v3 nothing
on the wire; v4 dynamic members joining with an empty id get MEMBER_ID_REQUIRED and must re-join
with the id they were given; v5 static membership (group.instance.id); v6 is flexible; v7 echoes
the protocol type and makes the protocol name nullable; v8 adds a reason (logged only); v9
SkipAssignment (KIP-814: a static leader re-joining a Stable group keeps the old assignment).
"""

from __future__ import annotations

from groupd.coordinator.core.classic.replies import join_reply
from groupd.coordinator.core.classic.requests import JoinRequest
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import Encoded

from .direct_encoding import INT16, INT32, NO_TAGS, array_length, blob, nullable_string, string
from .request import Request, ms, respond

KEY = ApiKey.JOIN_GROUP
VERSIONS = (0, 9)


def handle(node, request: Request):
    body, version = request.body, request.version
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(version, join_reply(ErrorCode.group_authorization_failed))
    session_ms = ms(body.session_timeout)
    req = JoinRequest(
        group_id=body.group_id, member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=ms(body.rebalance_timeout) if version >= 1 else session_ms,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in body.protocols),
        version=version, client_id=request.header.client_id, client_host=request.client_host,
        reason=getattr(body, "reason", None))
    return respond(node.coordinator.join(req, node.topics_image()), lambda reply: _response(version, reply))


_THROTTLE = INT32.pack(0)


def _response(version: int, reply: dict) -> Encoded:
    """The response, written straight to bytes (direct_encoding.py); byte-identical to kio's
    encoding of every version (tests/protocol/test_framing.py)."""
    flexible = version >= 6
    name = reply["protocol_name"]
    if version < 7:  # the name is not nullable before v7; from v7 an empty name is sent as null
        name = name or ""
    elif name == "":
        name = None
    error = reply["error_code"]
    out = [_THROTTLE] if version >= 2 else []
    out += (INT16.pack(error), INT32.pack(reply["generation_id"]))
    if version >= 7:
        out.append(nullable_string(reply["protocol_type"], flexible))
    out.append(nullable_string(name, flexible) if version >= 7 else string(name, flexible))
    out.append(string(reply["leader"], flexible))
    if version >= 9:
        out.append(b"\x01" if reply["skip_assignment"] else b"\x00")
    members = reply["members"]
    out += (string(reply["member_id"], flexible), array_length(len(members), flexible))
    for m in members:
        out.append(string(m["member_id"], flexible))
        if version >= 5:
            out.append(nullable_string(m["group_instance_id"], flexible))
        out.append(blob(m["metadata"], flexible))
        if flexible:
            out.append(NO_TAGS)
    if flexible:
        out.append(NO_TAGS)
    return Encoded.of(b"".join(out), flexible, error)


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error` (an injected fault's)."""
    return _response(version, {**join_reply(error, body.member_id), "protocol_name": "" if version < 7 else None})
