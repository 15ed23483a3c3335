"""DescribeLogDirs (35), v1–v4 (Kafka 4 removed v0): the logs this node holds in its data dir, with
their sizes — what kafka-log-dirs, Cruise Control and the web consoles show as topic sizes. v1 adds
throttle time, v2 is flexible, v3 a top-level error code, v4 the volume's total and usable bytes.
Kafka 4.3's v5 (whether the directory is cordoned) is not advertised: kafka-python takes a broker
offering it for Kafka 4.3 and then sends the versions of its own 4.3 table (Produce v9+) instead of
those ApiVersions advertises (kafka/protocol/broker_version_data.py).

One log dir, `data.dir`, holding every data partition this node leads (a partition never written
has a log of 0 bytes, as a created partition has in Kafka; the memory plane reports the bytes it
holds) and every `__consumer_offsets` partition it coordinates. A null topic list asks for all of
them; named partitions this node does not hold are left out. offset_lag is Kafka's
max(high watermark − log end, 0) for a current log: 0. Without DESCRIBE on the cluster:
CLUSTER_AUTHORIZATION_FAILED and no directories.
"""

from __future__ import annotations

import os

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import plane_for

from .request import Request

KEY = ApiKey.DESCRIBE_LOG_DIRS
VERSIONS = (1, 4)


def _offsets_sizes(node) -> dict[int, int]:
    """Bytes of each offsets partition this node has a log of."""
    return {p: writer.plog.size for p, writer in enumerate(node.coordinator.writers) if writer is not None}


def _held(node) -> dict[str, dict[int, int]]:
    """{topic: {partition: bytes}} of every log this node holds."""
    plane = plane_for(node)
    held: dict[str, dict[int, int]] = {}
    for topic in node.catalog:
        for p in range(topic.partitions):
            if node.cluster.leads(topic.name, p):
                log = plane.peek((topic.topic_id, p)) if plane is not None else None
                held.setdefault(topic.name, {})[p] = log.size if log is not None else 0
    offsets = _offsets_sizes(node)
    if offsets:
        held[node.offsets_topic.name] = offsets
    return held


def handle(node, request: Request):
    if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return build_response(KEY, request.version, {"error_code": ErrorCode.cluster_authorization_failed,
                                                     "results": []})
    held = _held(node)
    wanted = request.body.topics
    if wanted is not None:
        asked = {(t.topic, p) for t in wanted for p in t.partitions}
        held = {name: {p: size for p, size in parts.items() if (name, p) in asked} for name, parts in held.items()}
    directory = os.path.abspath(node.settings.data_dir)
    volume = os.statvfs(directory)
    topics = [{"name": name, "partitions": [{"partition_index": p, "partition_size": size, "offset_lag": 0,
                                             "is_future_key": False} for p, size in sorted(parts.items())]}
              for name, parts in sorted(held.items()) if parts]
    return build_response(KEY, request.version, {"error_code": ErrorCode.none, "results": [{
        "error_code": ErrorCode.none, "log_dir": directory, "topics": topics,
        "total_bytes": volume.f_blocks * volume.f_frsize, "usable_bytes": volume.f_bavail * volume.f_frsize}]})
