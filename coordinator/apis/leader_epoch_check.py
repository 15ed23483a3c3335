"""The current-leader-epoch check of Fetch (v9+), ListOffsets (v4+) and OffsetForLeaderEpoch (Kafka's
`Partition.checkCurrentLeaderEpoch`): a client that names the epoch it believes current learns
whether its metadata is stale (FENCED_LEADER_EPOCH: the leader moved on, refresh) or ahead of this
broker (UNKNOWN_LEADER_EPOCH: retry); -1 asks for no check."""

from __future__ import annotations

from groupd.protocol import ErrorCode

NO_CHECK = -1


def fetch_epoch(partition) -> int:
    """A Fetch partition's current leader epoch (v9+): any negative one is no check there (Kafka's
    `FetchRequest.optionalEpoch`), where ListOffsets and OffsetForLeaderEpoch fence all but -1."""
    current = getattr(partition, "current_leader_epoch", NO_CHECK)
    return NO_CHECK if current < 0 else current


def epoch_error(node, topic: str, partition: int, current: int) -> ErrorCode | None:
    if current == NO_CHECK:
        return None
    epoch = node.cluster.leader_epoch(topic, partition)
    if current < epoch:
        return ErrorCode.fenced_leader_epoch
    if current > epoch:
        return ErrorCode.unknown_leader_epoch
    return None
