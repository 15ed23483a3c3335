"""OffsetFetch (9), v1–v9 (Kafka 4 removed v0).

v1 has no top-level error: group-level errors go into every partition entry; v2 makes the topic
list nullable (null = every committed offset) and adds a top-level error; v3 throttle time;
v5 the committed leader epoch; v6 is flexible; v7 RequireStable (read after in-flight commits);
v8 batches several groups (each answered on its own, in request order); v9 member id and epoch
(checked on consumer groups: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH;
ignored for classic groups). v10 (topic ids) is not advertised.

Nothing committed → offset -1, leader epoch -1, metadata "", error 0; an unknown group is not an
error. Topic existence is not checked.

Authorization (Kafka's order): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED where the
version puts group errors), then DESCRIBE on each requested topic: a denied topic is not asked for
and answers TOPIC_AUTHORIZATION_FAILED per partition; a request for every offset drops the topics
the principal may not describe.
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.core.requests import OffsetFetchRequest
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import LARGE_ANSWER_ROWS, Request, answer_off_loop, respond

KEY = ApiKey.OFFSET_FETCH
VERSIONS = (1, 9)


def _topics(rows, error: ErrorCode = ErrorCode.none) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for topic, partition, value in rows:
        # a partition's own error: a topic the principal may not describe, an unstable offset
        own = value if isinstance(value, ErrorCode) else None
        if own is not None:
            value = None
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": value.offset if value else -1,
            "committed_leader_epoch": value.leader_epoch if value else -1,
            "metadata": value.metadata if value else "",
            "error_code": own if own is not None else error})
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def _group(requested, result) -> tuple[list[dict], ErrorCode]:
    """(topics, group error) from the coordinator's rows or its group-level error."""
    if isinstance(result, ErrorCode):
        return [], result
    return _topics(result), ErrorCode.none


def _fetch(node, request: Request, group_id: str, topics, require_stable: bool, member_id: str | None = None,
           member_epoch: int = -1):
    """The coordinator's rows (a denied topic's partitions carry TOPIC_AUTHORIZATION_FAILED as their
    value), its group-level error, or a future of either."""
    if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed

    def describable(name: str, audit: bool = True) -> bool:
        return authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name, audit)

    if topics is None:
        result = node.coordinator.fetch_offsets(OffsetFetchRequest(group_id, None, require_stable, member_id,
                                                                   member_epoch))
        if node.access is None:
            return result
        return respond(result, lambda rows: rows if isinstance(rows, ErrorCode) else
                       [r for r in rows if describable(r[0], audit=False)])
    wanted, denied = [], []
    for t in topics:
        (wanted if describable(t.name) else denied).append((t.name, list(t.partition_indexes)))
    result = node.coordinator.fetch_offsets(OffsetFetchRequest(group_id, wanted, require_stable, member_id,
                                                               member_epoch))
    if not denied:
        return result
    refused = [(name, p, ErrorCode.topic_authorization_failed) for name, parts in denied for p in parts]
    return respond(result, lambda rows: rows if isinstance(rows, ErrorCode) else rows + refused)


def handle(node, request: Request):
    body, version = request.body, request.version
    require_stable = getattr(body, "require_stable", False)
    if version >= 8:
        results = [_fetch(node, request, g.group_id, g.topics, require_stable, getattr(g, "member_id", None),
                          getattr(g, "member_epoch", -1)) for g in body.groups]
        pending = [r for r in results if isinstance(r, asyncio.Future)]

        def make(_=None):
            groups = []
            for g, r in zip(body.groups, results):
                topics, error = _group(g.topics, r.result() if isinstance(r, asyncio.Future) else r)
                groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
            return build_response(ApiKey.OFFSET_FETCH, version, {"groups": groups})

        if pending:
            return respond(asyncio.gather(*pending), make)
        if sum(len(r) for r in results if isinstance(r, list)) > LARGE_ANSWER_ROWS:
            return answer_off_loop(node, request, make)  # the rows are a snapshot of immutable values
        return make()

    def make_single(result):
        if isinstance(result, ErrorCode) and version == 1:
            # v1 has no top-level error: the group's error goes into every requested partition
            rows = [(t.name, p, None) for t in body.topics or () for p in t.partition_indexes]
            return build_response(ApiKey.OFFSET_FETCH, version, {"topics": _topics(rows, result)})
        topics, error = _group(body.topics, result)
        return build_response(ApiKey.OFFSET_FETCH, version, {"topics": topics, "error_code": error})

    result = _fetch(node, request, body.group_id, body.topics, require_stable)
    if isinstance(result, list) and len(result) > LARGE_ANSWER_ROWS:
        return answer_off_loop(node, request, lambda: make_single(result))
    return respond(result, make_single)


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error` (an injected fault's): per group from v8, in every requested
    partition at v1 (no top-level error there), else top-level."""
    if version >= 8:
        return build_response(ApiKey.OFFSET_FETCH, version, {
            "groups": [{"group_id": g.group_id, "topics": [], "error_code": error} for g in body.groups]})
    if version == 1:
        return build_response(ApiKey.OFFSET_FETCH, version, {"topics": [{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": error} for p in t.partition_indexes]} for t in body.topics or ()]})
    return build_response(ApiKey.OFFSET_FETCH, version, {"topics": [], "error_code": error})
