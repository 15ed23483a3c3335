import pytest

from coordinator.shard import GroupSettings

from .driver import Driver, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def d(clock) -> Driver:
    """A shard with Kafka's default group settings (initial rebalance delay 3000 ms)."""
    return Driver(GroupSettings(), clock)
