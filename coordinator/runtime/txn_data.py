"""Transaction markers on data partitions (contract seam 1 of issue 23): what WriteTxnMarkers (27) does
to one data partition this process leads, in either records plane, as Kafka's
`ReplicaManager.appendRecords(origin = COORDINATOR)` with an end-transaction marker.

`write_marker` appends the producer's COMMIT or ABORT control batch, which ends its open transaction on
the partition (the last stable offset moves once the marker is durable; an abort is remembered for
read_committed fetches), and returns Kafka's per-partition error once the marker is durable:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (not led here, or its log is loading),
INVALID_PRODUCER_EPOCH (older than the producer's), TRANSACTION_COORDINATOR_FENCED (a coordinator
epoch older than the last marker's), KAFKA_STORAGE_ERROR (the write failed: nothing changed).
"""

from __future__ import annotations

import logging

from groupd.coordinator.system_clock import wall_ms
from groupd.protocol import ErrorCode
from groupd.storage.records_plane import plane_for

log = logging.getLogger("groupd")


async def write_marker(node, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int) -> ErrorCode:
    plane = plane_for(node)
    found = node.catalog.get(topic)
    if plane is None or found is None or not 0 <= partition < found.partitions:
        error, message = ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
    elif not node.cluster.leads(topic, partition):
        error, message = ErrorCode.not_leader_or_follower, "This server is not the leader for that topic-partition."
    else:
        now = wall_ms()
        if getattr(plane, "DISK", False):
            outcome = plane.write_marker(found, partition, producer_id, producer_epoch, commit, coordinator_epoch, now)
        else:
            outcome = plane.write_marker((found.topic_id, partition), producer_id, producer_epoch, commit,
                                         coordinator_epoch, now)
        error, message = outcome if isinstance(outcome, tuple) else await outcome
    if error is not ErrorCode.none:
        log.info("transaction marker refused partition=%s-%d producer_id=%d epoch=%d %s error=%s: %s", topic,
                 partition, producer_id, producer_epoch, "commit" if commit else "abort", error.name, message)
    return error
