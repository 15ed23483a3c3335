"""A data topic's configs as the disk records plane reads them (`segment.bytes`, `retention.bytes`,
`retention.ms`): today the broker defaults from the settings. Per-topic configs (CreateTopics configs,
AlterConfigs: storage/catalog.py) plug in here, and only here."""

from __future__ import annotations

DEFAULTS = {  # Kafka's topic config → the setting holding the broker default
    "segment.bytes": "log_segment_bytes",
    "retention.bytes": "log_retention_bytes",
    "retention.ms": "records_retention_ms",
}


def topic_config(settings, topic: str, name: str) -> int:
    """The value of config `name` for `topic` (the broker default until topics carry their own)."""
    return getattr(settings, DEFAULTS[name])
