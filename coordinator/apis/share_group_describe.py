"""ShareGroupDescribe (77), v1 (KIP-932, share-groups spec §1.3).

v0 existed only in Kafka 4.0 (unstable) and was removed in 4.1; v1 has the same layout. A group
that is missing or not a share group is GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID; ACLs:
Describe on the group, and on every topic a member is assigned (else TOPIC_AUTHORIZATION_FAILED,
as Kafka). Partitions are listed with their topic names; topics no longer known are left out.
"""

from __future__ import annotations

from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .modern_describe import described_groups
from .request import Request

KEY = ApiKey.SHARE_GROUP_DESCRIBE
VERSIONS = (1, 1)


def _assigned_topics(described: dict) -> set[str]:
    return {t["topic_name"] for m in described["members"] for t in m["assignment"]["topic_partitions"]}


def handle(node, request: Request):
    groups = described_groups(node, request, node.coordinator.share_describe, _assigned_topics)
    return build_response(KEY, request.version, {"groups": groups})
