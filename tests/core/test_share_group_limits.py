"""A share group's own limits and what it never delivers (share-groups spec §1.11, §3.4, §3.7):
Kafka 4.3's share.delivery.count.limit and share.partition.max.record.locks over the broker's,
and offsets archived instead of acquired (transaction markers; aborted transactions under
read_committed). Time is plain monotonic ms (the fake clock)."""

from __future__ import annotations

from groupd.coordinator.core.group_config import SHARE_DELIVERY_COUNT_LIMIT, SHARE_PARTITION_MAX_RECORD_LOCKS
from groupd.coordinator.core.share.delivery import ACQUIRED, ARCHIVED, RELEASE, Limits, SharePartition
from groupd.protocol import ErrorCode

BROKER = Limits(lock_ms=1000, delivery_limit=5, max_locks=200)


def test_a_group_without_overrides_keeps_the_broker_limits():
    assert BROKER.for_group({}) is BROKER


def test_the_group_delivery_count_limit_archives_sooner():
    p = SharePartition(0, BROKER.for_group({SHARE_DELIVERY_COUNT_LIMIT: 2}))
    assert p.acquire("a", 0, 0, 1, now=0) == [(0, 0, 1)]
    assert p.acknowledge("a", [(0, 0, (RELEASE,))], now=1) is ErrorCode.none
    assert p.acquire("a", 0, 0, 1, now=2) == [(0, 0, 2)]
    assert p.acknowledge("a", [(0, 0, (RELEASE,))], now=3) is ErrorCode.none
    assert p.acquire("a", 0, 0, 1, now=4) == [] and p.start == 1  # archived at 2 deliveries, not 5


def test_the_group_record_lock_limit_caps_what_is_in_flight():
    p = SharePartition(0, BROKER.for_group({SHARE_PARTITION_MAX_RECORD_LOCKS: 100}))
    assert p.acquire("a", 0, 499, 500, now=0) == [(0, 99, 1)]
    assert not p.can_acquire(log_end=500)


def test_a_changed_limit_applies_to_a_loaded_share_partition():
    """Kafka 4.3 reads the group config at each use: raising the lock limit lets more in."""
    p = SharePartition(0, BROKER.for_group({SHARE_PARTITION_MAX_RECORD_LOCKS: 100}))
    p.acquire("a", 0, 499, 500, now=0)
    p.limits = BROKER.for_group({SHARE_PARTITION_MAX_RECORD_LOCKS: 150})
    assert p.acquire("a", 100, 499, 500, now=1) == [(100, 149, 1)]


def test_undeliverable_offsets_are_archived_not_acquired():
    """A committed transaction's data 0-2 and its marker at 3, then a plain record at 4."""
    p = SharePartition(0, BROKER)
    assert p.acquire("a", 0, 4, 10, now=0, undeliverable=[(3, 3)]) == [(0, 2, 1), (4, 4, 1)]
    assert p.offsets[3].state == ARCHIVED and p.offsets[3].delivery_count == 0
    assert p.acknowledge("a", [(0, 2, (1,)), (4, 4, (1,))], now=1) is ErrorCode.none
    assert p.start == 5 and p.offsets == {}


def test_an_archived_prefix_moves_the_start_offset_at_once():
    """An aborted transaction 0-2 and its marker at 3 under read_committed: nothing to deliver."""
    p = SharePartition(0, BROKER)
    assert p.acquire("a", 0, 3, 10, now=0, undeliverable=[(3, 3), (0, 2)]) == []
    assert p.start == 4 and p.next_fetch_offset() == 4


def test_undeliverable_does_not_touch_offsets_already_in_flight():
    p = SharePartition(0, BROKER)
    p.acquire("a", 0, 1, 10, now=0)
    assert p.acquire("b", 0, 3, 10, now=0, undeliverable=[(0, 3)]) == []
    assert [p.offsets[o].state for o in range(4)] == [ACQUIRED, ACQUIRED, ARCHIVED, ARCHIVED]
