"""DeleteGroups (42), v0–v2.

v1 changes only quota semantics; v2 is flexible. Only an Empty group can be deleted: its offsets
and then the group are tombstoned, and the result leaves once that is durable. Live groups answer
NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. Duplicate ids are answered once.
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request, respond

KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


def handle(node, request: Request):
    body, version = request.body, request.version
    ids = list(dict.fromkeys(body.groups_names))
    results = [node.coordinator.delete_group(group_id)
               if authorized(node, request, AclOperation.DELETE, ResourceType.GROUP, group_id)
               else ErrorCode.group_authorization_failed for group_id in ids]
    pending = [r for r in results if isinstance(r, asyncio.Future)]

    def make(_=None):
        errors = [r.result() if isinstance(r, asyncio.Future) else r for r in results]
        return build_response(ApiKey.DELETE_GROUPS, version, {"results": [
            {"group_id": gid, "error_code": error} for gid, error in zip(ids, errors)]})

    return make() if not pending else respond(asyncio.gather(*pending), make)
