"""`__transaction_state` in cluster mode (storage/transaction_log.py StampedTransactionLog): each owner
writes segments of its own stamp from the offset it found; a stamp's records count below the first
offset of any later stamp, so what a deposed owner writes after its successor loaded is never read."""

from groupd.storage.transaction_log import StampedTransactionLog, TransactionPartitionLog, encode
from groupd.storage.transaction_records import TxnState, TxnValue


def value(epoch: int) -> TxnValue:
    return TxnValue(7, epoch, 60_000, TxnState.EMPTY, frozenset(), 1000 + epoch, -1)


def write(plog, *epochs: int) -> None:
    for epoch in epochs:
        plog.append_encoded(encode([("tx", value(epoch))]), fsync=True)


def load(plog) -> tuple[list[int], int]:
    seen: list[int] = []
    result = plog.load(lambda txn_id, v: seen.append(v.producer_epoch))
    return seen, result.next_offset


def test_a_deposed_owners_late_writes_are_never_loaded(tmp_path):
    lone = TransactionPartitionLog(str(tmp_path), 3, 1 << 20)  # a lone node's records, then cluster mode
    load(lone)
    write(lone, 0, 1)
    lone.close()

    first = StampedTransactionLog(str(tmp_path), 3, 1 << 20, stamp=100)
    assert load(first) == ([0, 1], 2)
    write(first, 2, 3)  # offsets 2, 3

    second = StampedTransactionLog(str(tmp_path), 3, 1 << 20, stamp=200)  # claims while the first still runs
    assert load(second) == ([0, 1, 2, 3], 4)
    write(first, 99)  # the deposed owner's late write: its own file, offset 4, which the second took
    write(second, 4)
    first.close()
    second.close()
    names = sorted(p.name for p in (tmp_path / "__transaction_state-3").iterdir())
    assert names == ["00000000000000000000.log", "00000000000000000002-100.log", "00000000000000000004-200.log"]

    third = StampedTransactionLog(str(tmp_path), 3, 1 << 20, stamp=300)
    assert load(third) == ([0, 1, 2, 3, 4], 5)
    third.close()


def test_a_successor_that_wrote_nothing_still_bounds_the_deposed_stamp(tmp_path):
    first = StampedTransactionLog(str(tmp_path), 0, 1 << 20, stamp=10)
    load(first)
    write(first, 1)
    second = StampedTransactionLog(str(tmp_path), 0, 1 << 20, stamp=20)
    assert load(second) == ([1], 1)
    write(first, 99)  # late, at offset 1
    second.close()
    first.close()
    third = StampedTransactionLog(str(tmp_path), 0, 1 << 20, stamp=30)
    assert load(third) == ([1], 1)
    third.close()
