"""`__consumer_offsets` as clients see it: Kafka lists it in Metadata as an internal topic of
`offsets.topic.num.partitions` partitions led by this node, refuses Produce to it, and answers
ListOffsets (and Fetch, coordinator/apis/fetch.py) from the offsets log itself."""

from __future__ import annotations

import uuid

from groupd.storage.catalog import Topic

NAME = "__consumer_offsets"
INVALID_APPEND = f"Cannot append to internal topic {NAME}"  # Kafka's ReplicaManager message
_ID_NAMESPACE = uuid.UUID("5f0c1c3e-6a4e-4d2b-9c39-2b8f3e0a7d11")


def configs(settings) -> dict[str, str]:
    """The offsets topic's config overrides, as Kafka creates __consumer_offsets (DescribeConfigs)."""
    return {"cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(settings.offsets_topic_segment_bytes)}


def topic(settings, cluster_id: str) -> Topic:
    """The topic, with an id that stays the same for the data directory (derived from its cluster id)."""
    return Topic(NAME, settings.offsets_topic_num_partitions, uuid.uuid5(_ID_NAMESPACE, f"{cluster_id}/{NAME}"))


def log_range(coordinator, partition: int) -> tuple[int, int] | None:
    """(log start offset, log end offset) of an offsets partition, None while it is not loaded."""
    writer = coordinator.writers[partition]
    if writer is None:
        return None
    segments = writer.plog.segments
    return (segments[0][0] if segments else 0), writer.end_offset
