"""Compaction of `__transaction_state` in cluster mode (storage/stamped_compaction.py): the owner
rewrites, in place, what the stamp rule counts below its active segment, earlier owners' segments
included; a load gives the same state after as before, the log shrinks, a deposed owner's late
writes stay unloaded (and go from its file), and nothing at or past the owner's active segment or
of a later stamp is touched."""

import os
import time

from groupd.storage.scanner import scan
from groupd.storage.stamped_compaction import compact_stamped, counted_inputs
from groupd.storage.transaction_log import StampedTransactionLog, TransactionPartitionLog, encode
from groupd.storage.transaction_records import TxnState, TxnValue

NOW = 10_000_000
DAY = 86_400_000


def value(pid: int, epoch: int) -> TxnValue:
    return TxnValue(pid, epoch, 60_000, TxnState.EMPTY, frozenset(), 1000 + epoch, -1)


def write(plog, txn_id: str, pid: int, *epochs: int) -> None:
    for epoch in epochs:
        plog.append_encoded(encode([(txn_id, value(pid, epoch))]), fsync=True)


def state(tmp_path, stamp: int) -> tuple[dict, int]:
    """What an owner of claim `stamp` loads: each id's last (producer id, epoch), and the next offset."""
    plog = StampedTransactionLog(str(tmp_path), 0, 4096, stamp)
    seen: dict = {}
    result = plog.load(lambda txn_id, v: seen.__setitem__(txn_id, None if v is None else
                                                           (v.producer_id, v.producer_epoch)))
    plog.close()
    for name in os.listdir(plog.directory):  # an empty segment of its own: not part of what it found
        if name.endswith(f"-{stamp}.log") and os.path.getsize(os.path.join(plog.directory, name)) == 0:
            os.remove(os.path.join(plog.directory, name))
    return seen, result.next_offset


def size(directory) -> int:
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))


def test_compaction_keeps_the_state_a_load_gives_and_drops_late_writes(tmp_path):
    lone = TransactionPartitionLog(str(tmp_path), 0, 4096)  # a lone node's records first
    lone.load(lambda *_: None)
    write(lone, "a", 1, *range(30))
    lone.close()
    first = StampedTransactionLog(str(tmp_path), 0, 4096, stamp=100)
    first.load(lambda *_: None)
    write(first, "a", 1, *range(30, 60))
    write(first, "b", 2, *range(40))
    second = StampedTransactionLog(str(tmp_path), 0, 4096, stamp=200)  # claims while the first still runs
    second.load(lambda *_: None)
    write(first, "a", 666, 999)  # the deposed owner's late write, past the second's start
    write(second, "a", 1, *range(60, 100))  # several segments of 4096 bytes
    write(second, "c", 3, *range(20))
    directory = second.directory
    before, before_bytes = state(tmp_path, 300), size(directory)
    assert before == ({"a": (1, 99), "b": (2, 39), "c": (3, 19)}, 160)
    active_base = second.segments[-1][0]
    assert len(second.segments) >= 2 and active_base > 100

    result = compact_stamped(directory, 200, active_base, NOW, DAY)
    assert result.segments_cleaned > 0 and result.records_after < result.records_before
    assert size(directory) < before_bytes
    assert state(tmp_path, 300) == before
    # the late write went with the rewrite of the deposed owner's file; the active segment was not read
    deposed = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith("-100.log")]
    assert deposed and all(b.batch.next_offset <= 100 for p in deposed for b in scan(open(p, "rb").read()).batches)
    assert all(base < active_base for base, _, _, _ in counted_inputs(directory, 200, active_base))

    write(second, "a", 1, 100)  # the owner goes on appending, and compacting again changes nothing
    again = compact_stamped(directory, 200, active_base, NOW, DAY)
    assert again.segments_cleaned == 0
    second.close()
    first.close()
    assert state(tmp_path, 400) == ({"a": (1, 100), "b": (2, 39), "c": (3, 19)}, 161)


def test_a_deposed_owners_compaction_leaves_its_successors_segments_alone(tmp_path):
    first = StampedTransactionLog(str(tmp_path), 0, 4096, stamp=10)
    first.load(lambda *_: None)
    write(first, "a", 1, *range(80))
    second = StampedTransactionLog(str(tmp_path), 0, 4096, stamp=20)
    second.load(lambda *_: None)
    write(second, "a", 1, *range(80, 90))
    theirs = {p: open(p, "rb").read() for _, p in second.segments}
    compact_stamped(first.directory, 10, first.segments[-1][0], NOW, DAY)  # late, after it was deposed
    assert {p: open(p, "rb").read() for p in theirs} == theirs
    first.close()
    second.close()
    assert state(tmp_path, 30) == ({"a": (1, 89)}, 90)


def test_a_tombstone_older_than_the_retention_goes_with_the_values_it_deleted(tmp_path):
    owner = StampedTransactionLog(str(tmp_path), 0, 4096, stamp=5)
    owner.load(lambda *_: None)
    write(owner, "gone", 4, *range(50))
    owner.append_encoded(encode([("gone", None)]), fsync=True)
    write(owner, "kept", 5, *range(100))
    active_base = owner.segments[-1][0]
    assert active_base > 51  # the tombstone is in a closed segment
    compact_stamped(owner.directory, 5, active_base, int(time.time() * 1000) + 2 * DAY, DAY)
    owner.close()
    seen, _ = state(tmp_path, 6)
    assert "gone" not in seen and seen["kept"] == (5, 99)


def test_rewrites_cut_short_by_a_crash_are_removed_by_the_next_owner_too(tmp_path):
    """A kill -9 in the middle of a rewrite leaves `<segment>.log.cleaned-<stamp>`; a successor (a higher
    stamp) removes it as well as its own, and leaves a later owner's alone."""
    owner = StampedTransactionLog(str(tmp_path), 0, 4096, stamp=20)
    owner.load(lambda *_: None)
    write(owner, "a", 1, *range(40))
    d = owner.directory
    for name in ("00000000000000000000.log.cleaned-10", "00000000000000000000.log.cleaned-20",
                 "00000000000000000000.log.cleaned-30"):
        open(os.path.join(d, name), "wb").close()
    compact_stamped(d, 20, owner.segments[-1][0], NOW, DAY)
    owner.close()
    assert sorted(n for n in os.listdir(d) if ".cleaned-" in n) == ["00000000000000000000.log.cleaned-30"]
