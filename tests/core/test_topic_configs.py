"""Topic configs without a server: Kafka's parsing, ranges and messages (storage/topic_config.py), the
broker defaults from groupd's settings, the incremental operations and the descriptions
(coordinator/core/topic_configs.py)."""

from __future__ import annotations

import pytest

from groupd.coordinator.core import topic_configs as tc
from groupd.coordinator.core.group_config import APPEND, DELETE, SET, SUBTRACT, ConfigError
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode as E
from groupd.storage.topic_config import TopicConfig, TopicConfigError, parse, validate


def settings(*overrides: str) -> Settings:
    return Settings.load(env={}, overrides=list(overrides))


@pytest.mark.parametrize("name, text, value", [
    ("cleanup.policy", "compact", ("compact",)),
    ("cleanup.policy", " compact , delete ", ("compact", "delete")),
    ("cleanup.policy", "", ()),
    ("retention.ms", "-1", -1),
    ("retention.bytes", "-5", -5),
    ("segment.bytes", "1048576", 1048576),
    ("min.cleanable.dirty.ratio", "0.25", 0.25),
    ("preallocate", "TRUE", True),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("max.message.bytes", " 2000000 ", 2000000),
])
def test_values_parse_as_kafka_parses_them(name, text, value):
    assert parse(name, text) == value


@pytest.mark.parametrize("name, text, message", [
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("retention.ms", "1.5", "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"),
    ("segment.bytes", "2147483648",
     "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
    ("segment.bytes", "1048575",
     "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"),
    ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
    ("min.cleanable.dirty.ratio", "1.5",
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("cleanup.policy", "compact,remove",
     "Invalid value remove for configuration cleanup.policy: String must be one of: compact, delete"),
    ("min.cleanable.dirty.ratio", "1_0",
     "Invalid value 1_0 for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
    ("retention.ms", "\u0663", "Invalid value \u0663 for configuration retention.ms: Not a number of type LONG"),
    ("preallocate", "yes",
     "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: String must be one of: "
                                   "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("retention.hours", "1", "Unknown topic config name: retention.hours"),
])
def test_bad_values_get_kafkas_message(name, text, message):
    with pytest.raises(TopicConfigError) as e:
        parse(name, text)
    assert str(e.value) == message


def test_validate_checks_names_nulls_and_consistency():
    with pytest.raises(TopicConfigError, match="^Null value not supported for topic configs: retention.ms$"):
        validate({"retention.ms": None})
    with pytest.raises(TopicConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        validate({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(TopicConfigError, match="Tiered Storage functionality is disabled"):
        validate({"remote.storage.enable": "true"})
    assert validate({"cleanup.policy": "compact"})["cleanup.policy"] == ("compact",)


def test_the_settings_behind_topic_defaults_have_kafkas_defaults():
    from groupd.coordinator.settings import KEYS_BY_NAME
    assert {name: KEYS_BY_NAME[name].default for name in tc.SETTINGS} == tc.SETTINGS


def test_broker_defaults_follow_kafkas_synonyms():
    assert tc.broker_defaults(settings())["retention.ms"] == 7 * 24 * 3600_000
    assert tc.broker_defaults(settings("log.retention.hours=1"))["retention.ms"] == 3600_000
    assert tc.broker_defaults(settings("log.retention.hours=1", "log.retention.minutes=2"))["retention.ms"] == 120_000
    assert tc.broker_defaults(settings("log.retention.minutes=2", "log.retention.ms=5"))["retention.ms"] == 5
    assert tc.broker_defaults(settings("log.retention.ms=-7"))["retention.ms"] == -1
    assert tc.broker_defaults(settings("log.roll.hours=2"))["segment.ms"] == 7200_000
    s = settings("log.cleanup.policy=compact,delete", "message.max.bytes=2000", "log.segment.bytes=2097152",
                 "log.cleaner.min.compaction.lag.ms=9", "log.message.timestamp.type=LogAppendTime")
    assert TopicConfig.of(tc.broker_defaults(s)) == TopicConfig.of({
        **tc.broker_defaults(settings()), "cleanup.policy": ("compact", "delete"), "max.message.bytes": 2000,
        "segment.bytes": 2097152, "min.compaction.lag.ms": 9, "message.timestamp.type": "LogAppendTime"})


def test_the_defaults_come_from_the_file_the_environment_and_set_too(tmp_path):
    path = tmp_path / "groupd.yaml"
    path.write_text("log.cleanup.policy: compact\nlog.retention.ms: null\n")
    s = Settings.load(str(path), env={"GROUPD_LOG_ROLL_MS": "60000"}, overrides=["log.retention.bytes=10"])
    defaults = tc.broker_defaults(s)
    assert (defaults["cleanup.policy"], defaults["segment.ms"], defaults["retention.bytes"]) == \
        (("compact",), 60000, 10)
    assert s.origins["log.cleanup.policy"].startswith("file")


def test_the_settings_refuse_what_kafka_refuses():
    from groupd.coordinator.settings import ConfigError as SettingsError
    for bad in ("log.cleanup.policy=compacted", "log.segment.bytes=1000", "log.message.timestamp.type=createtime",
                "log.roll.ms=0", "default.replication.factor=0"):
        with pytest.raises(SettingsError, match=bad.split("=")[0]):
            settings(bad)


def error(call, *args) -> tuple[E, str]:
    with pytest.raises(ConfigError) as e:
        call(*args)
    return e.value.error_code, str(e.value)


def test_incremental_operations_as_kafkas_controller():
    assert tc.incrementally_altered({}, [("cleanup.policy", APPEND, "compact")]) == {"cleanup.policy": "delete,compact"}
    assert tc.incrementally_altered({"cleanup.policy": "compact,delete"}, [("cleanup.policy", SUBTRACT, "delete")]) \
        == {"cleanup.policy": "compact"}
    assert tc.incrementally_altered({"cleanup.policy": "compact"}, [("cleanup.policy", APPEND, "compact")]) \
        == {"cleanup.policy": "compact"}
    assert tc.incrementally_altered({"retention.ms": "1"}, [("retention.ms", DELETE, None), ("segment.ms", SET, "5")]) \
        == {"segment.ms": "5"}
    assert error(tc.incrementally_altered, {}, [("retention.ms", APPEND, "1")]) == (
        E.invalid_config, "Can't APPEND to key retention.ms because its type is not LIST.")
    assert error(tc.incrementally_altered, {}, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]) == (
        E.invalid_request, "Error due to duplicate config keys")
    assert error(tc.incrementally_altered, {}, [("retention.ms", SET, None)]) == (
        E.invalid_request, "Null value not supported for : retention.ms")
    assert error(tc.checked, {"retention.ms": "x"}, settings())[0] == E.invalid_config


def test_describe_reports_exactly_compact_and_the_sources():
    entries = {e["name"]: e for e in tc.describe(settings("log.segment.bytes=2097152"), {"cleanup.policy": "compact"},
                                                 None, True, True)}
    assert (entries["cleanup.policy"]["value"], entries["cleanup.policy"]["config_source"]) == ("compact", 1)
    assert entries["cleanup.policy"]["documentation"].startswith("This config designates the retention policy")
    assert (entries["segment.bytes"]["value"], entries["segment.bytes"]["config_source"]) == ("2097152", 4)
    assert [(s["name"], s["source"]) for s in entries["segment.bytes"]["synonyms"]] == [
        ("log.segment.bytes", 4), ("log.segment.bytes", 5)]
    assert entries["remote.storage.enable"]["synonyms"] == [] and entries["remote.storage.enable"]["config_source"] == 5
    only = tc.describe(settings(), {}, ["retention.ms"], False, False)
    assert [(e["name"], e["synonyms"], e["documentation"]) for e in only] == [("retention.ms", [], None)]
