"""The share group configs (share-groups spec §1.11, Kafka's GroupConfig): share.auto.offset.reset
(latest or earliest) and share.record.lock.duration.ms within the broker's group.share.min/max."""

from __future__ import annotations

import pytest

from groupd.coordinator.core.group_config import (
    SET,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_RECORD_LOCK_DURATION_MS,
    ConfigError,
    incrementally_altered,
    validate,
)
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.storage.files import DataDirError
from groupd.storage.group_configs import GroupConfigStore

BROKER = Settings.load(None, env={})  # lock duration 30000 within [15000, 60000]


def test_auto_offset_reset_takes_latest_or_earliest():
    altered = incrementally_altered({}, [(SHARE_AUTO_OFFSET_RESET, SET, "Earliest")])
    assert altered == {SHARE_AUTO_OFFSET_RESET: "earliest"}
    with pytest.raises(ConfigError) as e:
        incrementally_altered({}, [(SHARE_AUTO_OFFSET_RESET, SET, "by_duration:PT1H")])  # not resolved yet
    assert e.value.error_code is ErrorCode.invalid_config


@pytest.mark.parametrize("value, ok", [("15000", True), ("60000", True), ("14999", False), ("60001", False)])
def test_lock_duration_within_the_broker_bounds(value, ok):
    configs = incrementally_altered({}, [(SHARE_RECORD_LOCK_DURATION_MS, SET, value)])
    if ok:
        validate(configs, BROKER)
    else:
        with pytest.raises(ConfigError) as e:
            validate(configs, BROKER)
        assert e.value.error_code is ErrorCode.invalid_config and "record.lock.duration.ms" in str(e.value)


def test_the_reset_is_stored_as_a_string_and_nothing_else_is(tmp_path):
    (tmp_path / "group_configs.json").write_text('{"groups": {"g": {"share.auto.offset.reset": "earliest"}}}')
    assert GroupConfigStore(str(tmp_path)).overrides == {"g": {"share.auto.offset.reset": "earliest"}}
    (tmp_path / "group_configs.json").write_text('{"groups": {"g": {"share.record.lock.duration.ms": "x"}}}')
    with pytest.raises(DataDirError):
        GroupConfigStore(str(tmp_path))
