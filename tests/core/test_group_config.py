"""Per-group configs (spec §2.4; Kafka's GroupConfig): how AlterConfigs/IncrementalAlterConfigs
change a group's overrides, the check against the broker's bounds with Kafka's messages, and the
consumer machine answering the next heartbeat with the group's interval and arming its session."""

import pytest

from groupd.coordinator.core.consumer.machine import ConsumerSettings
from groupd.coordinator.core.group_config import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    ConfigError,
    incrementally_altered,
    replaced,
    validate,
)
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.storage.files import DataDirError
from groupd.storage.group_configs import GroupConfigStore

from .driver import Driver
from .test_consumer_classic_members import classic_member
from .test_consumer_heartbeat import TOPICS, hb, join

E = ErrorCode
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
BROKER = Settings.load(None, env={})  # Kafka's defaults: session 45000 in [45000, 60000], heartbeat 5000 in [5000, 15000]


def error(f, *args) -> tuple[ErrorCode, str]:
    with pytest.raises(ConfigError) as e:
        f(*args)
    return e.value.error_code, str(e.value)


def test_set_and_delete_change_the_overrides():
    current = incrementally_altered({}, [(SESSION, SET, "50000"), (HEARTBEAT, SET, " 6000 ")])
    assert current == {SESSION: 50000, HEARTBEAT: 6000}
    assert incrementally_altered(current, [(SESSION, DELETE, None)]) == {HEARTBEAT: 6000}


def test_the_legacy_alter_replaces_the_whole_set():
    assert replaced([(HEARTBEAT, "6000")]) == {HEARTBEAT: 6000}
    assert replaced([]) == {}


@pytest.mark.parametrize("ops, expected", [
    ([("share.session.timeout.ms", SET, "50000")], (E.invalid_config, "Unknown group config name: share.session.timeout.ms")),
    ([(SESSION, SET, "abc")], (E.invalid_config, "Invalid value abc for configuration consumer.session.timeout.ms: "
                                                 "Not a number of type INT")),
    ([(SESSION, SET, "0")], (E.invalid_config, "Invalid value 0 for configuration consumer.session.timeout.ms: "
                                               "Value must be at least 1")),
    ([(SESSION, SET, None)], (E.invalid_request, "Null value not supported for : consumer.session.timeout.ms")),
    ([(SESSION, APPEND, "1")], (E.invalid_config, "Config value append is not allowed for config key: "
                                                  "consumer.session.timeout.ms")),
    ([(SESSION, SUBTRACT, "1")], (E.invalid_config, "Config value subtract is not allowed for config key: "
                                                    "consumer.session.timeout.ms")),
    ([(SESSION, SET, "50000"), (SESSION, DELETE, None)], (E.invalid_request, "Error due to duplicate config keys")),
])
def test_a_bad_change_is_refused_with_kafkas_error(ops, expected):
    assert error(incrementally_altered, {}, ops) == expected


@pytest.mark.parametrize("overrides, message", [
    ({SESSION: 44999}, "consumer.session.timeout.ms must be greater than or equal to "
                       "group.consumer.min.session.timeout.ms"),
    ({SESSION: 60001}, "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({HEARTBEAT: 4999}, "consumer.heartbeat.interval.ms must be greater than or equal to "
                        "group.consumer.min.heartbeat.interval.ms"),
    ({HEARTBEAT: 15001}, "consumer.heartbeat.interval.ms must be less than or equal to "
                         "group.consumer.max.heartbeat.interval.ms"),
])
def test_values_outside_the_broker_bounds_are_invalid_config(overrides, message):
    assert error(validate, overrides, BROKER) == (E.invalid_config, message)


def test_the_session_timeout_must_exceed_the_heartbeat_interval_defaults_included():
    wide = Settings.load(None, env={}, overrides=["group.consumer.min.session.timeout.ms=1000",
                                                  "group.consumer.min.heartbeat.interval.ms=1000"])
    validate({SESSION: 5001}, wide)
    assert error(validate, {SESSION: 5000}, wide) == (
        E.invalid_config, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    assert error(validate, {SESSION: 3000, HEARTBEAT: 3000}, wide)[0] == E.invalid_config


# -- the consumer machine reads them ---------------------------------------------------------------

@pytest.fixture
def overrides():
    return {}


@pytest.fixture
def d(overrides):
    return Driver(GroupSettings(consumer=ConsumerSettings(group_configs=overrides)))


def test_the_next_heartbeat_gets_the_groups_interval_and_session(d, overrides):
    r = d.consumer_heartbeat(join("a"), TOPICS)
    assert r["heartbeat_interval_ms"] == 5000
    assert d.shard.consumer.session[("g", "a")] == d.now + 45000
    overrides["g"] = {HEARTBEAT: 7000, SESSION: 55000}
    d.advance(1000)
    r = d.consumer_heartbeat(hb("a", 1), TOPICS)
    assert r["heartbeat_interval_ms"] == 7000
    assert d.shard.consumer.session[("g", "a")] == d.now + 55000
    overrides["other"] = {HEARTBEAT: 9000}  # another group's override changes nothing here
    assert d.consumer_heartbeat(hb("a", 1), TOPICS)["heartbeat_interval_ms"] == 7000


def test_the_session_override_fences_a_silent_member_when_it_runs_out(d, overrides):
    overrides["g"] = {SESSION: 50000}
    d.consumer_heartbeat(join("a"), TOPICS)
    d.consumer_heartbeat(join("b"), TOPICS)
    joined = d.now
    while d.now + 5000 < joined + 50000:  # a keeps heartbeating, b is silent
        d.advance(5000)
        d.consumer_heartbeat(hb("a", d.shard.groups["g"].members["a"].member_epoch), TOPICS)
        assert "b" in d.shard.groups["g"].members
    d.advance(5000)
    assert "b" not in d.shard.groups["g"].members


def test_a_classic_member_keeps_the_session_timeout_of_its_join(d, overrides):
    overrides["g"] = {SESSION: 50000}
    d.consumer_heartbeat(join("a"), TOPICS)
    member_id, r = classic_member(d, "c")
    assert r["error_code"] == E.none
    assert d.shard.consumer.session[("g", member_id)] == d.now + 10_000  # its JoinGroup's 10 s


# -- kept across restarts --------------------------------------------------------------------------

async def test_the_store_writes_each_change_and_a_restart_reads_it_back(tmp_path):
    store = GroupConfigStore(str(tmp_path))
    held = store.overrides
    await store.set("g", {SESSION: 50000})
    await store.set("h", {HEARTBEAT: 6000})
    await store.set("h", {})
    assert held == {"g": {SESSION: 50000}}  # changed in place: readers holding it see it
    assert GroupConfigStore(str(tmp_path)).overrides == {"g": {SESSION: 50000}}


def test_a_damaged_file_stops_the_start_with_one_line(tmp_path):
    (tmp_path / "group_configs.json").write_text('{"groups": {"g": {"consumer.session.timeout.ms": "x"}}}')
    with pytest.raises(DataDirError, match="group_configs.json are damaged"):
        GroupConfigStore(str(tmp_path))
