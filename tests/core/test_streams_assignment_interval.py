"""Kafka 4.3's assignment interval for streams groups (group.streams.assignment.interval.ms, a group's
streams.assignment.interval.ms), with the fake clock: a target assignment is computed at most once per
interval from the last one's timestamp; changes in between bump the group epoch and wait, answered
ASSIGNMENT_DELAYED, while each member reconciles towards the last target; the next heartbeat after the
interval computes one target for all of them. See docs/streams-groups.md."""

import pytest

from groupd.coordinator.core.group_config import ConfigError, validate
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.core.streams.machine import StreamsSettings
from groupd.coordinator.settings import ConfigError as SettingsError
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode

from .driver import Driver
from .test_streams_heartbeat import READY, assert_replay_matches, group, hb, join, owned, statuses, tasks

E = ErrorCode
ALL = {(s, p) for s in "01" for p in range(3)}
DELAYED = 5  # StreamsGroupHeartbeatResponse.Status.ASSIGNMENT_DELAYED
INTERVAL_DETAIL = "Assignment delayed due to the configured assignment interval."


def driver(interval_ms=1000, group_configs=None) -> Driver:
    streams = StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=interval_ms,
                              group_configs=group_configs or {})
    return Driver(GroupSettings(streams=streams))


def details(reply) -> list[str]:
    return [s["status_detail"] for s in reply["status"] or ()]


def test_a_new_groups_first_target_is_computed_at_once():
    d = driver()
    a = d.streams_heartbeat(join("a", "p1"), READY)
    assert a["member_epoch"] == 1 and tasks(a) == ALL and statuses(a) == set()
    assert group(d).target_epoch.assignment_timestamp == d.clock.read().wall


def test_joins_within_the_interval_wait_and_are_assigned_together():
    d = driver()
    d.streams_heartbeat(join("a", "p1"), READY)
    d.advance(200)
    b = d.streams_heartbeat(join("b", "p2"), READY)
    # the group epoch moves, the target does not: b is at the assignment epoch with no tasks
    assert group(d).group_epoch == 2 and group(d).assignment_epoch == 1
    assert b["member_epoch"] == 1 and tasks(b) == set()
    assert statuses(b) == {DELAYED} and details(b) == [INTERVAL_DETAIL]
    assert group(d).state_name == "Assigning"
    d.advance(300)
    c = d.streams_heartbeat(join("c", "p3"), READY)
    assert c["member_epoch"] == 1 and tasks(c) == set() and statuses(c) == {DELAYED}
    a = d.streams_heartbeat(hb("a", 1, owned=owned(ALL)), READY)  # a keeps everything meanwhile
    assert a["member_epoch"] == 1 and statuses(a) == {DELAYED} and tasks(a) is None
    assert group(d).assignment_epoch == 1
    # 1 s after the first target: the next heartbeat computes one target for b and c
    d.advance(499)
    assert statuses(d.streams_heartbeat(hb("a", 1, owned=owned(ALL)), READY)) == {DELAYED}
    d.advance(1)
    a = d.streams_heartbeat(hb("a", 1, owned=owned(ALL)), READY)
    assert statuses(a) == set() and group(d).assignment_epoch == 3
    assert len(tasks(a)) == 2  # a revokes four of its six tasks first
    targets = group(d).targets
    assert {m: len(t.active.get("0", ())) + len(t.active.get("1", ())) for m, t in targets.items()} == {
        "a": 2, "b": 2, "c": 2}
    assert group(d).target_epoch.assignment_timestamp == d.clock.read().wall
    assert_replay_matches(d)


def test_a_leave_within_the_interval_waits_too():
    d = driver()
    d.streams_heartbeat(join("a", "p1"), READY)
    d.advance(1000)
    d.streams_heartbeat(join("b", "p2"), READY)  # computed at once: the interval had passed
    keep = tasks(d.streams_heartbeat(hb("a", 1), READY))
    d.streams_heartbeat(hb("a", 1, owned=owned(keep)), READY)
    assert group(d).assignment_epoch == 2 and len(keep) == 3
    d.advance(100)
    d.streams_heartbeat(hb("b", -1), READY)
    a = d.streams_heartbeat(hb("a", 2, owned=owned(keep)), READY)
    assert statuses(a) == {DELAYED} and group(d).assignment_epoch == 2  # b's tasks wait for the interval
    d.advance(900)
    a = d.streams_heartbeat(hb("a", 2, owned=owned(keep)), READY)
    assert statuses(a) == set() and a["member_epoch"] == 3 and tasks(a) == ALL
    assert_replay_matches(d)


def test_an_interval_of_zero_assigns_every_change_at_once():
    d = driver(interval_ms=0)
    d.streams_heartbeat(join("a", "p1"), READY)
    b = d.streams_heartbeat(join("b", "p2"), READY)
    assert b["member_epoch"] == 2 and statuses(b) == set() and group(d).assignment_epoch == 2


def test_the_groups_config_overrides_the_broker_interval():
    d = driver(interval_ms=1000, group_configs={"g": {"streams.assignment.interval.ms": 5000}})
    d.streams_heartbeat(join("a", "p1"), READY)
    d.advance(1000)
    assert statuses(d.streams_heartbeat(join("b", "p2"), READY)) == {DELAYED}
    d.advance(4000)
    assert statuses(d.streams_heartbeat(hb("b", 1), READY)) == set() and group(d).assignment_epoch == 2
    off = driver(interval_ms=1000, group_configs={"g": {"streams.assignment.interval.ms": 0}})
    off.streams_heartbeat(join("a", "p1"), READY)
    assert statuses(off.streams_heartbeat(join("b", "p2"), READY)) == set()


def test_a_wall_clock_stepped_back_does_not_hold_assignments():
    d = driver()
    d.streams_heartbeat(join("a", "p1"), READY)
    d.clock.wall_offset = -60_000  # NTP stepped the clock back a minute
    b = d.streams_heartbeat(join("b", "p2"), READY)
    assert statuses(b) == set() and group(d).assignment_epoch == 2


def test_the_interval_runs_from_the_durable_timestamp_after_a_load():
    d = driver()
    d.streams_heartbeat(join("a", "p1"), READY)
    d.advance(300)
    d.streams_heartbeat(join("b", "p2"), READY)
    fresh = d.replay()
    assert fresh.groups["g"].target_epoch.assignment_timestamp == d.clock.read().wall - 300
    assert fresh.groups["g"].group_epoch == 2 and fresh.groups["g"].assignment_epoch == 1


# -- the settings and the group config: Kafka's names, defaults and bounds


def test_the_broker_settings_are_kafkas():
    s = Settings.load(None, env={})
    assert (s.group_streams_assignment_interval_ms, s.group_streams_min_assignment_interval_ms,
            s.group_streams_max_assignment_interval_ms, s.group_streams_assignor_offload_enable) == (
        1000, 0, 15000, True)
    assert Settings.load(None, env={}, overrides=["group.streams.assignment.interval.ms=0"]
                         ).group_streams_assignment_interval_ms == 0


@pytest.mark.parametrize("overrides", [["group.streams.assignment.interval.ms=16000"],
                                       ["group.streams.min.assignment.interval.ms=2000"],
                                       ["group.streams.assignment.interval.ms=-1"]])
def test_a_broker_interval_outside_its_bounds_stops_the_start(overrides):
    with pytest.raises(SettingsError, match="assignment.interval.ms"):
        Settings.load(None, env={}, overrides=overrides)


@pytest.mark.parametrize("value, message", [
    (15001, "streams.assignment.interval.ms must be less than or equal to group.streams.max.assignment.interval.ms"),
])
def test_a_group_interval_outside_the_broker_bounds_is_invalid_config(value, message):
    with pytest.raises(ConfigError) as e:
        validate({"streams.assignment.interval.ms": value}, Settings.load(None, env={}))
    assert (e.value.error_code, str(e.value)) == (E.invalid_config, message)
    bounded = Settings.load(None, env={}, overrides=["group.streams.min.assignment.interval.ms=500"])
    with pytest.raises(ConfigError, match="must be greater than or equal to group.streams.min.assignment.interval.ms"):
        validate({"streams.assignment.interval.ms": 0}, bounded)
    validate({"streams.assignment.interval.ms": 0}, Settings.load(None, env={}))  # 0 is allowed by default
