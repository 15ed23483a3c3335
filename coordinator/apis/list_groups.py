"""ListGroups (16), v0–v5.

v1 adds throttle time; v2 nothing on the wire; v3 is flexible; v4 a states filter and each
group's state; v5 a types filter and each group's type (classic groups are "classic").
Filters compare case-insensitively after trimming; an unknown value matches nothing.
"""

from __future__ import annotations

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.LIST_GROUPS
VERSIONS = (0, 5)


def handle(node, request: Request):
    body = request.body
    states = {s.strip().lower() for s in getattr(body, "states_filter", ())}
    types = {t.strip().lower() for t in getattr(body, "types_filter", ())}
    listed = node.coordinator.list_groups()
    if isinstance(listed, ErrorCode):  # a partition is still loading: no partial answer (spec §9.2)
        return build_response(ApiKey.LIST_GROUPS, request.version, {"error_code": listed, "groups": []})
    if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False):
        # without DESCRIBE on the cluster, only the groups this principal may describe (never an error)
        listed = [g for g in listed
                  if authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, audit=False)]
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "",
               "group_state": g.state_name, "group_type": g.type}
              for g in listed
              if (not states or g.state_name.lower() in states) and (not types or g.type in types)]
    return build_response(ApiKey.LIST_GROUPS, request.version, {"error_code": ErrorCode.none, "groups": groups})
