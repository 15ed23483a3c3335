"""The fault table (coordinator/chaos/faults.py) on a hand-moved clock: which requests a fault meets, how
counts and durations retire it, and the names operators type."""

import pytest

from groupd.coordinator.chaos.faults import GROUP_APIS, FaultError, FaultTable, api_named, error_named, groups_of
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

A, E = ApiKey, ErrorCode


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def table(clock):
    return FaultTable(clock)


def test_a_counted_error_meets_its_group_and_api_only_then_retires(table):
    table.arm("error", (A.HEARTBEAT,), "g", error=E.rebalance_in_progress, count=2)
    assert table.take(A.HEARTBEAT, ("other",)) == (0, None)
    assert table.take(A.SYNC_GROUP, ("g",)) == (0, None)
    assert table.take(A.HEARTBEAT, ("g",)) == (0, E.rebalance_in_progress)
    assert table.list()[0]["remaining"] == 1 and table.list()[0]["hits"] == 1
    assert table.take(A.HEARTBEAT, ("g",)) == (0, E.rebalance_in_progress)
    assert not table.active and table.take(A.HEARTBEAT, ("g",)) == (0, None)


def test_a_timed_fault_expires_on_the_clock(table, clock):
    table.arm("move-coordinator", GROUP_APIS, "g", error=E.not_coordinator, for_ms=1500)
    clock.now += 1.4
    assert table.take(A.OFFSET_COMMIT, ("g",)) == (0, E.not_coordinator)
    assert table.list()[0]["expires_in_ms"] == 100
    clock.now += 0.1
    assert table.take(A.OFFSET_COMMIT, ("g",)) == (0, None) and table.list() == []


def test_delays_add_up_and_the_first_error_wins_leaving_the_second_armed(table):
    table.arm("delay", (A.SYNC_GROUP,), None, delay_ms=100, count=1)
    table.arm("error", (A.SYNC_GROUP,), None, error=E.not_coordinator, count=1)
    table.arm("error", (A.SYNC_GROUP,), None, error=E.unknown_member_id, count=1)
    assert table.take(A.SYNC_GROUP, ("g",)) == (100, E.not_coordinator)
    assert [f["error"] for f in table.list()] == ["UNKNOWN_MEMBER_ID"]


def test_bounds_are_one_of_count_or_duration(table):
    for bounds in ({}, {"count": 1, "for_ms": 10}, {"count": 0}, {"for_ms": -5}):
        with pytest.raises(FaultError):
            table.arm("error", (A.HEARTBEAT,), None, error=E.not_coordinator, **bounds)
    assert table.clear() == 0


def test_names_as_operators_type_them():
    assert api_named("SyncGroup") is api_named("SYNC_GROUP") is api_named("sync-group") is A.SYNC_GROUP
    assert error_named("REBALANCE_IN_PROGRESS") is E.rebalance_in_progress
    for bad in ("NONE", "NO_SUCH_ERROR"):
        with pytest.raises(FaultError):
            error_named(bad)


def test_groups_of_reads_each_request_shape():
    class Body:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    assert groups_of(A.HEARTBEAT, Body(group_id="g")) == ("g",)
    assert groups_of(A.OFFSET_FETCH, Body(groups=[Body(group_id="a"), Body(group_id="b")])) == ("a", "b")
    assert groups_of(A.FIND_COORDINATOR, Body(key="g")) == ("g",)
    assert groups_of(A.FIND_COORDINATOR, Body(coordinator_keys=("a", "b"))) == ("a", "b")
    assert groups_of(A.METADATA, Body()) == ()
