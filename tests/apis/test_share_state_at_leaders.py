"""share_state_at_leaders.at_leaders, the group coordinator's round trips to share-partitions' leaders,
without sockets: partitions grouped per leader, this node's answered in process, a leader that moved
asked again at the new one, a leader nobody can reach (or none at all) answering COORDINATOR_NOT_AVAILABLE
for its partitions while the others' results stand, and an index the topic does not have never sent."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from groupd.coordinator.apis import share_state_at_leaders as at
from groupd.protocol import ErrorCode

TOPIC = SimpleNamespace(name="t", topic_id=uuid.UUID(int=7), partitions=4)


class View:
    node_id = 1

    def __init__(self, leaders: dict[int, int | None]) -> None:
        self.leaders = leaders

    def leader(self, topic: str, partition: int) -> int | None:
        return self.leaders[partition]


@pytest.fixture(autouse=True)
def short_retries(monkeypatch):
    monkeypatch.setattr(at, "RETRY_S", 0.3)
    monkeypatch.setattr(at, "RETRY_FIRST_S", 0.01)


def node(leaders: dict[int, int | None], channel=True):
    return SimpleNamespace(cluster=View(leaders), broker_channel=object() if channel else None)


async def run(n, there, partitions=(0, 1, 2, 3)):
    asked_here: list[int] = []

    async def here(topic, index):
        asked_here.append(index)
        return ErrorCode.none, f"here {index}"

    results = await at.at_leaders(n, [(TOPIC, p) for p in partitions], here, there, lambda e: (e, None))
    return {k[1]: v for k, v in results.items()}, asked_here


async def test_each_leader_is_asked_once_for_its_partitions_and_this_node_answers_its_own():
    asked: list[tuple[int, list[int]]] = []

    async def there(channel, broker, keys):
        asked.append((broker, sorted(i for _, i in keys)))
        return {k: (ErrorCode.none, f"at {broker}") for k in keys}

    results, here = await run(node({0: 1, 1: 2, 2: 1, 3: 2}), there)
    assert results == {0: (ErrorCode.none, "here 0"), 1: (ErrorCode.none, "at 2"), 2: (ErrorCode.none, "here 2"),
                       3: (ErrorCode.none, "at 2")}
    assert asked == [(2, [1, 3])] and sorted(here) == [0, 2]


async def test_a_moved_leader_is_looked_up_again():
    n = node({0: 1, 1: 2, 2: 1, 3: 3})

    async def there(channel, broker, keys):
        if broker == 2:  # it no longer leads partition 1: node 3 does now
            n.cluster.leaders[1] = 3
            return {k: (ErrorCode.not_leader_or_follower, None) for k in keys}
        return {k: (ErrorCode.none, f"at {broker}") for k in keys}

    results, _ = await run(n, there)
    assert results[1] == (ErrorCode.none, "at 3") and results[3] == (ErrorCode.none, "at 3")


async def test_an_unreachable_leader_fails_only_its_partitions():
    async def there(channel, broker, keys):
        if broker == 3:
            return {k: (at.UNREACHABLE, None) for k in keys}
        return {k: (ErrorCode.none, f"at {broker}") for k in keys}

    results, _ = await run(node({0: 1, 1: 2, 2: 3, 3: None}), there)
    assert results == {0: (ErrorCode.none, "here 0"), 1: (ErrorCode.none, "at 2"),
                       2: (ErrorCode.coordinator_not_available, None),  # asked until the deadline
                       3: (ErrorCode.coordinator_not_available, None)}  # nobody leads it


async def test_without_a_broker_channel_other_leaders_cannot_be_reached():
    async def there(channel, broker, keys):
        raise AssertionError("nothing to send with")

    results, _ = await run(node({0: 1, 1: 2, 2: 1, 3: 2}, channel=False), there)
    assert results[1][0] is ErrorCode.coordinator_not_available and results[0][0] is ErrorCode.none


async def test_an_index_the_topic_does_not_have_is_not_sent():
    async def there(channel, broker, keys):
        raise AssertionError("not asked")

    results, here = await run(node({0: 1}), there, partitions=(0, 4, -1))
    assert results == {0: (ErrorCode.none, "here 0"), 4: (ErrorCode.unknown_topic_or_partition, None),
                       -1: (ErrorCode.unknown_topic_or_partition, None)}
    assert here == [0]
