"""A data topic's configs as the disk records plane reads them (`segment.bytes`, `retention.bytes`,
`retention.ms`): today the broker defaults from the settings. Per-topic configs (CreateTopics configs,
AlterConfigs: storage/catalog.py) plug in here, and only here."""

from __future__ import annotations


def topic_config(settings, topic: str, name: str) -> int:
    """The value of config `name` for `topic` (the broker default until topics carry their own)."""
    defaults = {  # Kafka's topic config → the setting that holds its broker default
        "segment.bytes": settings.log_segment_bytes,
        "retention.bytes": settings.log_retention_bytes,
        "retention.ms": settings.records_retention_ms,
    }
    return defaults[name]
