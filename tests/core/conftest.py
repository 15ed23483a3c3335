import pytest

from groupd.coordinator.core.partition import GroupSettings

from .driver import Driver, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def d(clock) -> Driver:
    """A shard with Kafka's default group settings (initial rebalance delay 3000 ms). After every
    scenario, with its writes completed, a replay of the log it wrote equals its memory."""
    driver = Driver(GroupSettings(), clock)
    yield driver
    if driver.replayable:
        driver.finish_writes()
        driver.assert_replay_matches()
