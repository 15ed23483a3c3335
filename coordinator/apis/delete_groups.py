"""DeleteGroups (42), v0–v2.

v1 changes only quota semantics; v2 is flexible. Only an Empty group can be deleted: its offsets
and then the group are tombstoned, and the result leaves once that is durable. Live groups answer
NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. Duplicate ids are answered once. An empty share
group's share-partition state is deleted first, as Kafka's coordinator has its persister delete it
before the group (coordinator/runtime/share_partitions.py): on the data partitions this node leads,
and on those of the group's initialized share-partitions that other workers or nodes lead, at their
leaders (DeleteShareGroupState, share_state_at_leaders.py). A group whose state could not all be
deleted stays and answers that error (KAFKA_STORAGE_ERROR here, a leader's error, or
COORDINATOR_NOT_AVAILABLE for a leader that cannot be reached); what was deleted stays deleted.
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
    allowed = {gid: authorized(node, request, AclOperation.DELETE, ResourceType.GROUP, gid) for gid in ids}
    # an empty share group's state goes first, at every leader (Kafka's order): deleted after that
    share = [gid for gid in ids if allowed[gid] and node.coordinator.share_group_has_members(gid) is False]
    results: dict = {gid: node.coordinator.delete_group(gid) if allowed[gid] else ErrorCode.group_authorization_failed
                     for gid in ids if gid not in share}

    async def make():
        if share:
            failed = await deliveries_for(node).forget_groups(share, led_share_state(node))
            for gid in share:
                error = ErrorCode.kafka_storage_error if gid in failed else await _delete_elsewhere(node, gid)
                results[gid] = node.coordinator.delete_group(gid) if error is ErrorCode.none else error
        pending = [r for r in results.values() if isinstance(r, asyncio.Future)]
        if pending:
            await asyncio.gather(*pending)
        errors = {gid: r.result() if isinstance(r, asyncio.Future) else r for gid, r in results.items()}
        return build_response(ApiKey.DELETE_GROUPS, version, {"results": [
            {"group_id": gid, "error_code": errors[gid]} for gid in ids]})

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


async def _delete_elsewhere(node, group_id: str) -> ErrorCode:
    """The share group's state at the leaders of its initialized share-partitions led elsewhere: the
    first partition's error (one log line), or NONE."""
    partitions = _initialized_elsewhere(node, group_id)
    if not partitions:
        return ErrorCode.none
    failed = {k: r[0] for k, r in (await delete(node, group_id, partitions)).items() if r[0] is not ErrorCode.none}
    if not failed:
        return ErrorCode.none
    log.error("share group not deleted: its state remains group=%s partitions=%s", group_id,
              ",".join(f"{t}:{p}={e.name}" for (t, p), e in sorted(failed.items())))
    return next(iter(failed.values()))
