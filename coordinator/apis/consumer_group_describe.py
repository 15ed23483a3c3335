"""ConsumerGroupDescribe (69), v0–v1 (KIP-848, spec §1.5–1.6, §7.2).

v1 adds each member's MemberType (1: a consumer-protocol member). A group that is missing or not
a consumer group is GROUP_ID_NOT_FOUND (clients then fall back to DescribeGroups); an empty id
INVALID_GROUP_ID. Partitions are listed with their topic names; topics no longer known are left out.
"""

from __future__ import annotations

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .describe_groups import OMITTED
from .modern_describe import described_groups, failed
from .request import Request

KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
VERSIONS = (0, 1)


def _assigned_topics(described: dict) -> set[str]:
    """The topics of every member's current and target assignment (Kafka 4.0 checks both, PR 19042)."""
    return {t["topic_name"] for m in described["members"] for which in ("assignment", "target_assignment")
            for t in m[which]["topic_partitions"]}


def handle(node, request: Request):
    body = request.body
    if "consumer" not in node.settings.group_coordinator_rebalance_protocols:
        return build_response(KEY, request.version, {"groups": [
            {**failed(g, ErrorCode.unsupported_version), "authorized_operations": OMITTED} for g in body.group_ids]})
    groups = described_groups(node, request, node.coordinator.consumer_describe, _assigned_topics)
    return build_response(KEY, request.version, {"groups": groups})
