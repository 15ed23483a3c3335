"""DeleteGroups (42), v0–v2.

v1 changes only quota semantics; v2 is flexible. Only an Empty group can be deleted: its offsets
and then the group are tombstoned, and the result leaves once that is durable. Live groups answer
NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. Duplicate ids are answered once. A deleted share
group's share-partition state is deleted too (coordinator/runtime/share_partitions.py) before the answer:
on the data partitions this node leads, and on those of the group's initialized share-partitions that
other workers or nodes lead, at their leaders (DeleteShareGroupState, share_state_at_leaders.py). A
leader that cannot be reached keeps that state (one log line); the group is deleted either way.
"""

from __future__ import annotations

import asyncio
import logging

from groupd.coordinator.runtime.share_partitions import deliveries_for
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request
from .share_common import led_share_state
from .share_state_at_leaders import delete

log = logging.getLogger("groupd")

KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


def handle(node, request: Request):
    body, version = request.body, request.version
    ids = list(dict.fromkeys(body.groups_names))
    initialized = {gid: _initialized_elsewhere(node, gid) for gid in ids}  # read before the group goes
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
            for gid in deleted:
                if initialized[gid]:
                    await _delete_elsewhere(node, gid, initialized[gid])
        return build_response(ApiKey.DELETE_GROUPS, version, {"results": [
            {"group_id": gid, "error_code": error} for gid, error in zip(ids, errors)]})

    return asyncio.ensure_future(make())


def _initialized_elsewhere(node, group_id: str) -> list:
    """The share group's initialized share-partitions (topic, partition) another worker or node leads."""
    found = node.coordinator.share_initialized(group_id)
    if isinstance(found, ErrorCode):
        return []
    out = []
    for topic_id, partitions in found.items():
        topic = node.catalog.by_id(topic_id)
        if topic is not None:
            out.extend((topic, p) for p in sorted(partitions)
                       if 0 <= p < topic.partitions and not node.cluster.leads(topic.name, p))
    return out


async def _delete_elsewhere(node, group_id: str, partitions: list) -> None:
    failed = {k: r[0] for k, r in (await delete(node, group_id, partitions)).items() if r[0] is not ErrorCode.none}
    if failed:
        log.error("share state not deleted group=%s partitions=%s", group_id,
                  ",".join(f"{t}:{p}={e.name}" for (t, p), e in sorted(failed.items())))
