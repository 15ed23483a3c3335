"""The catalog keeps each topic's config overrides in topics.json and gives the records plane a
topic's effective config, typed (`TopicCatalog.topic_config`)."""

from __future__ import annotations

from groupd.storage.catalog import TopicCatalog
from groupd.storage.topic_config import DEFAULT
from groupd.coordinator.core import topic_configs as tc
from groupd.coordinator.settings import Settings


async def test_the_catalog_reads_a_topics_effective_config(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    catalog.use_defaults(tc.broker_defaults(Settings.load(env={}, overrides=["log.retention.bytes=1000"])))
    await catalog.add("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1048576"})
    config = catalog.topic_config("t")
    assert (config.compact, config.delete, config.segment_bytes, config.retention_bytes) == (True, False, 1048576, 1000)
    await catalog.reconfigure("t", {"retention.ms": "5"})
    assert (catalog.topic_config("t").compact, catalog.topic_config("t").retention_ms) == (False, 5)
    assert catalog.topic_config("unknown").segment_bytes == DEFAULT.segment_bytes
    again = TopicCatalog(str(tmp_path))  # from topics.json
    assert dict(again.get("t").configs) == {"retention.ms": "5"}
    assert await catalog.reconfigure("gone", {}) is None
    await catalog.resize("t", 3)  # other changes keep the configs
    assert dict(catalog.get("t").configs) == {"retention.ms": "5"}


def test_a_catalog_without_configs_reads_as_before(tmp_path):
    (tmp_path / "topics.json").write_text(
        '{"topics": [{"name": "old", "partitions": 2, "id": "0b6b3b3c-7c39-4a55-8d4e-1f2a3b4c5d6e"}]}')
    catalog = TopicCatalog(str(tmp_path))
    assert catalog.get("old").configs == () and catalog.topic_config("old") == DEFAULT
