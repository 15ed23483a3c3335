"""The catalog keeps each topic's config overrides in topics.json and gives the records plane a
topic's effective config, typed (`TopicCatalog.topic_config`)."""

from __future__ import annotations

import asyncio

import pytest

from groupd.coordinator.core import topic_configs as tc
from groupd.coordinator.settings import Settings
from groupd.storage.catalog import TopicCatalog
from groupd.storage.topic_config import DEFAULT


async def test_the_catalog_reads_a_topics_effective_config(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    catalog.use_defaults(tc.broker_defaults(Settings.load(env={}, overrides=["log.retention.bytes=1000"])))
    await catalog.add("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1048576"})
    config = catalog.topic_config("t")
    assert (config.compact, config.delete, config.segment_bytes, config.retention_bytes) == (True, False, 1048576, 1000)
    await catalog.reconfigure("t", lambda current: {"retention.ms": "5"})
    assert (catalog.topic_config("t").compact, catalog.topic_config("t").retention_ms) == (False, 5)
    assert catalog.topic_config("unknown").segment_bytes == DEFAULT.segment_bytes
    again = TopicCatalog(str(tmp_path))  # from topics.json
    assert dict(again.get("t").configs) == {"retention.ms": "5"}
    assert await catalog.reconfigure("gone", lambda current: {}) is None
    await catalog.resize("t", 3)  # other changes keep the configs
    assert dict(catalog.get("t").configs) == {"retention.ms": "5"}


def test_a_catalog_without_configs_reads_as_before(tmp_path):
    (tmp_path / "topics.json").write_text(
        '{"topics": [{"name": "old", "partitions": 2, "id": "0b6b3b3c-7c39-4a55-8d4e-1f2a3b4c5d6e"}]}')
    catalog = TopicCatalog(str(tmp_path))
    assert catalog.get("old").configs == () and catalog.topic_config("old") == DEFAULT


async def test_concurrent_changes_each_start_from_the_last(tmp_path):
    """Two IncrementalAlterConfigs of one topic in flight at once: both hold (each is applied to the
    overrides as the other left them, under the catalog's write lock)."""
    catalog = TopicCatalog(str(tmp_path))
    await catalog.add("t", 1)
    await asyncio.gather(*(catalog.reconfigure("t", lambda current, n=n: {**current, n: "1"})
                           for n in ("retention.ms", "segment.ms", "retention.bytes")))
    assert dict(catalog.get("t").configs) == {"retention.ms": "1", "segment.ms": "1", "retention.bytes": "1"}


async def test_a_refused_change_writes_nothing(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    await catalog.add("t", 1, {"retention.ms": "1"})

    def refuse(current):
        raise ValueError("no")
    with pytest.raises(ValueError):
        await catalog.reconfigure("t", refuse)
    assert dict(TopicCatalog(str(tmp_path)).get("t").configs) == {"retention.ms": "1"}
