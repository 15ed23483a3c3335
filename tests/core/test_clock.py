"""Deadlines run on the monotonic clock, the timestamps Kafka's records store on the wall clock: a
wall-clock step neither expires sessions nor delays them (issue 11 item 5)."""

from groupd.coordinator.core.classic.group import STABLE
from groupd.storage.records import GroupMetadataKey

from .driver import Driver, E, FakeClock, stable_group

WALL = 1_700_000_000_000  # the wall clock is far from the monotonic one


def test_records_store_wall_clock_timestamps_and_deadlines_use_the_monotonic_clock():
    d = Driver(clock=FakeClock(wall_offset=WALL))
    ids = stable_group(d)
    [record] = [r for r in d.written if isinstance(r.key, GroupMetadataKey) and r.value.members]
    assert record.value.current_state_timestamp == d.now + WALL  # CompletingRebalance, at wall time
    assert d.group().members[ids["a"]].deadline == d.now + 10_000
    d.commit("g", [("t", 0, 1)], generation=1, member_id=ids["a"])
    assert d.shard.offsets["g"][("t", 0)].commit_timestamp == d.now + WALL
    d.assert_replay_matches()


def test_a_wall_clock_step_forward_expires_no_session():
    d = Driver(clock=FakeClock(wall_offset=WALL))
    ids = stable_group(d)
    d.clock.wall_offset += 3_600_000  # NTP steps the wall clock an hour ahead
    d.advance(5_000)
    assert d.heartbeat("g", ids["a"], 1) == d.heartbeat("g", ids["b"], 1) == E.none
    assert d.group().state is STABLE and len(d.group().members) == 2


def test_a_wall_clock_step_back_delays_no_session_expiry():
    d = Driver(clock=FakeClock(wall_offset=WALL))
    ids = stable_group(d)
    d.clock.wall_offset -= 3_600_000
    d.advance(10_000)  # neither member heartbeats for its session timeout
    assert ids["a"] not in d.group().members and ids["b"] not in d.group().members
