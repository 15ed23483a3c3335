"""The share-partition state machine (share-groups spec §3.1–3.8), one rule per test, with time as
plain monotonic ms (the fake clock)."""

from __future__ import annotations

from groupd.coordinator.core.share.delivery import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    Limits,
    SharePartition,
)
from groupd.protocol import ErrorCode

LIMITS = Limits(lock_ms=1000, delivery_limit=3, max_locks=10)


def sp(start: int = 0) -> SharePartition:
    return SharePartition(start, LIMITS)


def test_acquisition_takes_the_next_available_offsets_up_to_max_records():
    p = sp()
    assert p.acquire("a", 0, 9, 4, now=0) == [(0, 3, 1)]
    assert p.acquire("b", 0, 9, 4, now=0) == [(4, 7, 1)]  # a's offsets are skipped
    assert p.next_fetch_offset() == 8 and p.offsets[0].member == "a" and p.offsets[0].state == ACQUIRED


def test_new_offsets_stop_at_the_record_lock_limit():
    p = sp()
    assert p.acquire("a", 0, 50, 100, now=0) == [(0, 9, 1)]
    assert not p.can_acquire(log_end=51)
    assert p.acquire("a", 10, 50, 100, now=0) == []


def test_acknowledging_the_prefix_moves_the_start_offset_and_frees_locks():
    p = sp()
    p.acquire("a", 0, 9, 10, now=0)
    assert p.acknowledge("a", [(0, 4, (ACCEPT,))], now=1) is ErrorCode.none
    assert p.start == 5 and p.can_acquire(log_end=20)
    assert p.acquire("a", 10, 20, 10, now=2) == [(10, 14, 1)]  # the window is 5..14 now


def test_a_hole_keeps_the_start_offset_until_it_is_terminal():
    p = sp()
    p.acquire("a", 0, 3, 10, now=0)
    p.acknowledge("a", [(1, 3, (ACCEPT,))], now=1)
    assert p.start == 0
    p.acknowledge("a", [(0, 0, (REJECT,))], now=1)
    assert (p.start, p.offsets) == (4, {})


def test_a_batch_reaching_far_below_the_start_offset_is_not_walked():
    """A client may acknowledge from offset 0 on a partition whose SPSO is 10^15: those offsets are
    ignored (answered at once, not one by one), the rest of the batch applies."""
    p = sp(10**15)
    p.acquire("a", 10**15, 10**15 + 1, 10, now=0)
    assert p.acknowledge("a", [(0, 10**15, (ACCEPT,))], now=1) is ErrorCode.none
    assert p.start == 10**15 + 1 and p.offsets[10**15 + 1].state == ACQUIRED
    assert p.acknowledge("a", [(0, 2**62, (ACCEPT,))], now=1) is ErrorCode.invalid_request  # past the window


def test_per_offset_types_and_gap_archive():
    p = sp()
    p.acquire("a", 0, 2, 10, now=0)
    assert p.acknowledge("a", [(0, 2, (ACCEPT, RELEASE, GAP))], now=1) is ErrorCode.none
    assert p.start == 1 and p.offsets[1].state == AVAILABLE and p.offsets[2].state == ARCHIVED


def test_release_keeps_the_delivery_count_and_the_next_delivery_adds_one():
    p = sp()
    p.acquire("a", 0, 0, 1, now=0)
    p.acknowledge("a", [(0, 0, (RELEASE,))], now=1)
    assert (p.offsets[0].state, p.offsets[0].delivery_count) == (AVAILABLE, 1)
    assert p.next_fetch_offset() == 0
    assert p.acquire("b", 0, 0, 1, now=2) == [(0, 0, 2)]


def test_a_lock_that_expires_makes_the_offsets_available_again():
    p = sp()
    p.acquire("a", 0, 1, 10, now=0)
    assert p.acquire("b", 0, 1, 10, now=999) == []
    assert p.acquire("b", 0, 1, 10, now=1000) == [(0, 1, 2)]
    assert p.acknowledge("a", [(0, 1, (ACCEPT,))], now=1001) is ErrorCode.invalid_record_state


def test_the_delivery_limit_archives_instead_of_releasing():
    p = sp()
    for n in (1, 2, 3):
        assert p.acquire("a", 0, 0, 1, now=n * 10) == [(0, 0, n)]
        p.acknowledge("a", [(0, 0, (RELEASE,))], now=n * 10 + 1)
    assert p.start == 1 and p.acquire("a", 0, 0, 1, now=100) == []


def test_the_last_delivery_is_made_and_a_timeout_then_archives():
    p = sp()
    for n in (1, 2, 3):
        assert p.acquire("a", 0, 0, 1, now=n * 2000) == [(0, 0, n)]
    p.expire(now=10_000)
    assert p.start == 1 and not p.offsets


def test_lock_timeouts_and_archiving_at_the_limit_are_told_to_the_observer():
    """What no acknowledgement reports (the runtime counts them in its metrics): each offset whose lock
    ran out, and each offset archived at the delivery limit, whether by a release or a timeout."""
    p, seen = sp(), []
    p.observe = lambda event, n: seen.append((event, n))
    p.acquire("a", 0, 2, 10, now=0)
    p.expire(now=999)
    assert seen == []
    p.expire(now=1000)
    assert seen == [("lock_timeout", 3)]
    for n in (2, 3):
        p.acquire("a", 0, 0, 1, now=n * 2000)
        p.acknowledge("a", [(0, 0, (RELEASE,))], now=n * 2000 + 1)
    assert seen[-1] == ("delivery_limit", 1) and p.start == 1
    assert p.copy().observe is p.observe


def test_acknowledging_another_members_or_an_unacquired_offset_changes_nothing():
    p = sp()
    p.acquire("a", 0, 3, 10, now=0)
    assert p.acknowledge("b", [(0, 0, (ACCEPT,))], now=1) is ErrorCode.invalid_record_state
    # all or nothing: the first batch is valid, the second is not
    assert p.acknowledge("a", [(0, 1, (ACCEPT,)), (2, 5, (ACCEPT,))], now=1) is ErrorCode.invalid_request
    p.acknowledge("a", [(0, 0, (ACCEPT,))], now=1)
    assert p.acknowledge("a", [(1, 1, (ACCEPT,)), (0, 0, (ACCEPT,))], now=1) is ErrorCode.none  # 0: below SPSO
    assert p.acknowledge("a", [(1, 1, (ACCEPT,))], now=1) is ErrorCode.none  # 1 is below the SPSO now
    assert p.start == 2
    assert p.acknowledge("a", [(2, 2, (ACCEPT,)), (3, 3, (REJECT,))], now=1) is ErrorCode.none
    assert p.acknowledge("a", [(4, 4, (ACCEPT,))], now=1) is ErrorCode.invalid_request


def test_releasing_a_member_returns_its_offsets_only():
    p = sp()
    p.acquire("a", 0, 1, 2, now=0)
    p.acquire("b", 0, 3, 2, now=0)
    assert p.release_member("a", now=1)
    assert [p.offsets[o].state for o in range(4)] == [AVAILABLE, AVAILABLE, ACQUIRED, ACQUIRED]


def test_the_snapshot_keeps_terminal_and_counted_offsets_never_acquired_ones():
    p = sp()
    p.acquire("a", 0, 4, 10, now=0)
    p.acknowledge("a", [(1, 1, (ACCEPT,)), (2, 2, (RELEASE,)), (3, 3, (REJECT,))], now=1)
    p.acquire("b", 2, 2, 1, now=2)  # count 2 now, persisted count stays 1
    epoch, start, batches = p.snapshot()
    assert (start, batches) == (0, [(1, 1, ACKNOWLEDGED, 1), (2, 2, AVAILABLE, 1), (3, 3, ARCHIVED, 1)])
    q = SharePartition.restore(epoch, start, batches, LIMITS)
    assert q.next_fetch_offset() == 0  # offset 0 was ACQUIRED: delivered again
    assert q.acquire("c", 0, 4, 10, now=0) == [(0, 0, 1), (2, 2, 2), (4, 4, 1)]


def test_the_log_start_passing_the_start_offset_moves_it():
    p = sp()
    p.acquire("a", 0, 1, 2, now=0)
    p.acknowledge("a", [(1, 1, (RELEASE,))], now=1)
    p.move_start_to(5)
    assert p.start == 5 and p.next_fetch_offset() == 5 and list(p.offsets) == [0]  # 0: still locked
    assert p.acknowledge("a", [(0, 0, (ACCEPT,))], now=2) is ErrorCode.none  # ignored below the SPSO


def test_renew_gives_a_fresh_lock_and_changes_nothing_else():
    p = sp()
    p.acquire("a", 0, 1, 2, now=0)
    assert p.acknowledge("a", [(0, 1, (RENEW,))], now=900) is ErrorCode.none
    assert p.acquire("b", 0, 1, 2, now=1500) == []  # still a's: the lock runs to 1900
    assert (p.offsets[0].state, p.offsets[0].delivery_count, p.offsets[0].member) == (ACQUIRED, 1, "a")
    assert p.acknowledge("b", [(0, 0, (RENEW,))], now=1500) is ErrorCode.invalid_record_state
    assert p.acquire("b", 0, 1, 2, now=1900) == [(0, 1, 2)]
