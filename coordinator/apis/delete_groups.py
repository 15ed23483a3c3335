"""DeleteGroups (42), v0–v2.

v1 changes only quota semantics; v2 is flexible. Only an Empty group can be deleted: its offsets
and then the group are tombstoned, and the result leaves once that is durable. Live groups answer
NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. Duplicate ids are answered once. A deleted share
group's share-partition state is deleted too (coordinator/runtime/share_partitions.py) before the answer,
on the data partitions this node leads (with workers or in cluster mode, not yet on the others').
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_common import led_share_state

KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


def handle(node, request: Request):
    body, version = request.body, request.version
    ids = list(dict.fromkeys(body.groups_names))
    results = [node.coordinator.delete_group(group_id)
               if authorized(node, request, AclOperation.DELETE, ResourceType.GROUP, group_id)
               else ErrorCode.group_authorization_failed for group_id in ids]
    pending = [r for r in results if isinstance(r, asyncio.Future)]

    async def make():
        if pending:
            await asyncio.gather(*pending)
        errors = [r.result() if isinstance(r, asyncio.Future) else r for r in results]
        deleted = [gid for gid, error in zip(ids, errors) if error is ErrorCode.none]
        if deleted:
            await deliveries_for(node).forget_groups(deleted, led_share_state(node))
        return build_response(ApiKey.DELETE_GROUPS, version, {"results": [
            {"group_id": gid, "error_code": error} for gid, error in zip(ids, errors)]})

    return asyncio.ensure_future(make())
