"""StreamsGroupDescribe (89), v0–v1 (KIP-1071), as Kafka 4.3 answers it.

A group that is missing or not a streams group is GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID;
ACLs: Describe on the group, and on every topic a member's tasks read (else
TOPIC_AUTHORIZATION_FAILED, as for the other group types). The topology is the configured one:
partition counts resolved, Subtopologies null while the topology is refused (missing or incorrectly
partitioned topics). TaskOffsets and TaskEndOffsets are empty: Kafka 4.3 refuses them in heartbeats.
v1 (Kafka 4.4, KIP-1331 and KIP-1357; codec from protocol/newer_versions.py): TopologyDescription is
null and TopologyDescriptionStatus NOT_STORED (1) for a described group when IncludeTopologyDescription
asks for it (0, NOT_REQUESTED, otherwise), as Kafka 4.4 answers without a topology-description plugin;
AssignorName is the group's assignor, `sticky` (null on an error).
"""

from __future__ import annotations

from groupd.coordinator.core.streams import assignor
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .modern_describe import described_groups
from .request import Request

KEY = ApiKey.STREAMS_GROUP_DESCRIBE
VERSIONS = (0, 1)
NOT_REQUESTED, NOT_STORED = 0, 1  # TopologyDescriptionStatus


def _read_topics(described: dict) -> set[str]:
    topology = described.get("topology") or {}
    return {t for s in topology.get("subtopologies") or ()
            for t in (*s["source_topics"], *(r["name"] for r in s["repartition_source_topics"]))}


def handle(node, request: Request):
    groups = described_groups(node, request, node.coordinator.streams_describe, _read_topics)
    wanted = request.version >= 1 and request.body.include_topology_description
    for g in groups:
        g.setdefault("topology", None)
        ok = g["error_code"] == ErrorCode.none
        g["topology_description_status"] = NOT_STORED if wanted and ok else NOT_REQUESTED
        g["assignor_name"] = assignor.NAME if ok else None
    return build_response(KEY, request.version, {"groups": groups})
