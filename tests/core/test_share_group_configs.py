"""The share group configs (share-groups spec §1.11, Kafka's GroupConfig): share.auto.offset.reset
(latest, earliest or by_duration:<ISO-8601 duration>), share.isolation.level, and
share.record.lock.duration.ms and Kafka 4.3's share.delivery.count.limit and
share.partition.max.record.locks within the broker's group.share.min/max."""

from __future__ import annotations

import json

import pytest

from groupd.coordinator.core.group_config import (
    SET,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_ISOLATION_LEVEL,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_RECORD_LOCK_DURATION_MS,
    ConfigError,
    incrementally_altered,
    reset_duration_ms,
    validate,
)
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.storage.files import DataDirError
from groupd.storage.group_configs import GroupConfigStore

BROKER = Settings.load(None, env={})  # lock duration 30000 within [15000, 60000]


@pytest.mark.parametrize("value", ["earliest", " latest ", "by_duration:PT1H", "by_duration:P2D",
                                   "by_duration:pt1.5s", "by_duration:PT0S", "by_duration:P-1DT25H"])
def test_auto_offset_reset_takes_latest_earliest_or_a_duration(value):
    assert incrementally_altered({}, [(SHARE_AUTO_OFFSET_RESET, SET, value)]) == {SHARE_AUTO_OFFSET_RESET: value.strip()}


# Kafka's ShareGroupAutoOffsetResetStrategyTest: the names are case-sensitive, `none` is a consumer's only
@pytest.mark.parametrize("value", ["Earliest", "LATEST", "none", "", "by_duration", "by_duration:", "by_duration:1h",
                                   "by_duration:invalid", "by_duration:-PT1H", "by_duration:PT", "by_duration:P",
                                   "BY_DURATION:PT1H",
                                   # past a Java long (Duration.parse refuses it); a hostile length of digits
                                   "by_duration:P99999999999999999999D", "by_duration:PT" + "9" * 5000 + "S"])
def test_auto_offset_reset_refuses_what_kafka_refuses(value):
    with pytest.raises(ConfigError) as e:
        incrementally_altered({}, [(SHARE_AUTO_OFFSET_RESET, SET, value)])
    assert e.value.error_code is ErrorCode.invalid_config
    assert str(e.value) == (f"Invalid value {value.strip()} for configuration share.auto.offset.reset: Invalid value "
                            f"`{value.strip()}` for configuration share.auto.offset.reset. The value must be either "
                            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


@pytest.mark.parametrize("value, ms", [("by_duration:PT1H", 3_600_000), ("by_duration:P1DT2H3M4.5S", 93_784_500),
                                       ("by_duration:-PT-1M", 60_000), ("latest", None)])
def test_reset_duration_in_ms(value, ms):
    assert reset_duration_ms(value) == ms


def test_isolation_level_is_one_of_two():
    assert incrementally_altered({}, [(SHARE_ISOLATION_LEVEL, SET, "read_committed")]) == {
        SHARE_ISOLATION_LEVEL: "read_committed"}
    with pytest.raises(ConfigError) as e:
        incrementally_altered({}, [(SHARE_ISOLATION_LEVEL, SET, "READ_COMMITTED")])
    assert str(e.value) == ("Invalid value READ_COMMITTED for configuration share.isolation.level: String must be "
                            "one of: read_committed, read_uncommitted")


@pytest.mark.parametrize("name, value, message", [
    (SHARE_DELIVERY_COUNT_LIMIT, "2", None), (SHARE_DELIVERY_COUNT_LIMIT, "10", None),
    (SHARE_DELIVERY_COUNT_LIMIT, "11", ("share.delivery.count.limit must be less than or equal to "
                                        "group.share.max.delivery.count.limit")),
    (SHARE_PARTITION_MAX_RECORD_LOCKS, "100", None), (SHARE_PARTITION_MAX_RECORD_LOCKS, "4000", None),
    (SHARE_PARTITION_MAX_RECORD_LOCKS, "4001", ("share.partition.max.record.locks must be less than or equal "
                                                "to group.share.max.partition.max.record.locks"))])
def test_kafka_43_limits_within_the_broker_bounds(name, value, message):
    configs = incrementally_altered({}, [(name, SET, value)])
    if message is None:
        validate(configs, BROKER)
    else:
        with pytest.raises(ConfigError) as e:
            validate(configs, BROKER)
        assert str(e.value) == message


def test_kafka_43_limits_have_a_floor_before_the_bounds():
    """The ConfigDef's own atLeast(2) / atLeast(100), checked as the value is read."""
    with pytest.raises(ConfigError) as e:
        incrementally_altered({}, [(SHARE_DELIVERY_COUNT_LIMIT, SET, "1")])
    assert str(e.value) == "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"
    with pytest.raises(ConfigError) as e:
        incrementally_altered({}, [(SHARE_PARTITION_MAX_RECORD_LOCKS, SET, "99")])
    assert str(e.value) == ("Invalid value 99 for configuration share.partition.max.record.locks: Value must be at "
                            "least 100")


def test_the_broker_bounds_narrow_what_a_group_may_set():
    narrow = Settings.load(None, env={}, overrides=("group.share.min.delivery.count.limit=4",
                                                    "group.share.max.partition.max.record.locks=2000"))
    with pytest.raises(ConfigError, match="greater than or equal to group.share.min.delivery.count.limit"):
        validate({SHARE_DELIVERY_COUNT_LIMIT: 3}, narrow)
    validate({SHARE_PARTITION_MAX_RECORD_LOCKS: 2000}, narrow)


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
    stored = {"share.auto.offset.reset": "by_duration:PT1H", "share.isolation.level": "read_committed",
              "share.delivery.count.limit": 3}
    (tmp_path / "group_configs.json").write_text(json.dumps({"groups": {"g": stored}}))
    assert GroupConfigStore(str(tmp_path)).overrides == {"g": stored}
    (tmp_path / "group_configs.json").write_text('{"groups": {"g": {"share.record.lock.duration.ms": "x"}}}')
    with pytest.raises(DataDirError):
        GroupConfigStore(str(tmp_path))
