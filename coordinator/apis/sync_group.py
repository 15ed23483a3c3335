"""SyncGroup (14), v0–v5.

v1 adds throttle time; v2 nothing on the wire; v3 static membership (group.instance.id); v4 is
flexible; v5 carries protocol type and name both ways (a v5 request without them is refused
with INCONSISTENT_GROUP_PROTOCOL, as Kafka's request layer does).

No SyncGroup reply of a generation, the leader's or the followers', leaves before the leader's
assignment is durable.
"""

from __future__ import annotations

from groupd.coordinator.core.classic.replies import sync_reply
from groupd.coordinator.core.classic.requests import SyncRequest
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import Encoded

from .direct_encoding import INT16, INT32, NO_TAGS, blob, nullable_string
from .request import Request, respond

KEY = ApiKey.SYNC_GROUP
VERSIONS = (0, 5)


def handle(node, request: Request):
    body, version = request.body, request.version
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(version, sync_reply(ErrorCode.group_authorization_failed))
    protocol_type = getattr(body, "protocol_type", None)
    protocol_name = getattr(body, "protocol_name", None)
    if version >= 5 and (protocol_type is None or protocol_name is None):
        return _response(version, sync_reply(ErrorCode.inconsistent_group_protocol))
    assignments = {a.member_id: a.assignment for a in body.assignments}
    result = node.coordinator.sync(SyncRequest(body.group_id, body.generation_id, body.member_id,
                                          getattr(body, "group_instance_id", None), protocol_type, protocol_name,
                                          assignments), node.topics_image())
    return respond(result, lambda reply: _response(version, reply))


_THROTTLE = INT32.pack(0)


def _response(version: int, reply: dict) -> Encoded:
    """The response, written straight to bytes (direct_encoding.py); byte-identical to kio's
    encoding of every version (tests/protocol/test_framing.py)."""
    flexible = version >= 4
    error = reply["error_code"]
    out = [_THROTTLE] if version >= 1 else []
    out.append(INT16.pack(error))
    if version >= 5:
        out += (nullable_string(reply["protocol_type"], flexible), nullable_string(reply["protocol_name"], flexible))
    out.append(blob(reply["assignment"], flexible))
    if flexible:
        out.append(NO_TAGS)
    return Encoded.of(b"".join(out), flexible, error)


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error` (an injected fault's)."""
    return _response(version, sync_reply(error))
