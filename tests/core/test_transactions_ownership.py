"""Transaction partitions moving between workers or nodes, sans-IO (coordinator/core/transactions/
ownership.py and TransactionCore.forget/adopt): which offsets partition a transaction partition rides
on, a transaction's markers grouped per leading broker, and the ids of a lost partition dropped while
a gained one's loaded ids join (those in Prepare* due for markers)."""

from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.core.transactions.machine import TransactionCore
from groupd.coordinator.core.transactions.ownership import home_partition, marker_batches
from groupd.protocol import ErrorCode
from groupd.storage.transaction_records import TxnState


def test_a_transaction_partition_rides_on_the_offsets_partition_of_its_number():
    assert [home_partition(t, 50) for t in (0, 7, 49)] == [0, 7, 49]
    assert [home_partition(t, 8) for t in (0, 7, 8, 49)] == [0, 7, 0, 1]


def test_markers_are_batched_per_leading_broker_and_leaderless_partitions_wait():
    leaders = {("t", 0): 1, ("t", 1): 2, ("__consumer_offsets", 4): 2, ("u", 0): None}
    by_broker, leaderless = marker_batches(sorted(leaders), lambda topic, p: leaders[(topic, p)])
    assert by_broker == {2: [("__consumer_offsets", 4), ("t", 1)], 1: [("t", 0)]}
    assert leaderless == [("u", 0)]


def _core() -> TransactionCore:
    return TransactionCore(max_timeout_ms=900_000, id_expiration_ms=604_800_000)


def _prepared_commit(core: TransactionCore, txn_id: str, producer_id: int) -> None:
    step = core.init_producer_id(txn_id, 60_000, -1, -1, 1000, lambda: producer_id)
    core.written(step.transition)
    step = core.add_partitions(txn_id, producer_id, 0, [("t", 0)], 1001)
    core.written(step.transition)
    step = core.end_txn(txn_id, producer_id, 0, True, 1002)
    core.written(step.transition)


def test_losing_a_partition_drops_its_ids_and_gaining_one_adopts_its_loaded_ids():
    ids = [f"tx-{i}" for i in range(40)]
    owner = _core()
    for n, txn_id in enumerate(ids):
        _prepared_commit(owner, txn_id, 100 + n)
    of = lambda txn_id: partition_for(txn_id, 4)  # noqa: E731
    gone = owner.forget(of, {1, 3})
    assert sorted(gone) == sorted(i for i in ids if of(i) in (1, 3))
    assert all(of(i) in (0, 2) for i in owner.txns)
    assert owner.verify(gone[0], 0, 0, ("t", 0)) == ErrorCode.invalid_producer_id_mapping  # not here any more

    loaded = _core()  # the next owner's load of partitions 1 and 3, into a core of its own
    for n, txn_id in enumerate(ids):
        if of(txn_id) in (1, 3):
            _prepared_commit(loaded, txn_id, 100 + n)
    successor = _core()
    joined = successor.adopt(loaded)
    assert sorted(m.transactional_id for m in joined) == sorted(gone)
    assert {m.transactional_id for m in successor.preparing()} == set(gone)  # their markers are due again
    assert all(m.state == TxnState.PREPARE_COMMIT for m in joined)
