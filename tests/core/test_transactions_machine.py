"""The transaction coordinator's rules (coordinator/core/transactions/machine.py), driven with a
hand-moved clock: each prepared transition is "written" (applied) or failed (abandoned) by hand, and
the records replayed into a fresh core must give the same state."""

import itertools

import pytest

from groupd.coordinator.core.transactions.machine import MAX_EPOCH, TransactionCore
from groupd.protocol import ErrorCode
from groupd.storage.transaction_records import TxnState, TxnValue, decode_value, encode_value, encode_value_v1

E = ErrorCode


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def advance(self, ms: int) -> None:
        self.ms += ms


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def core():
    c = TransactionCore(max_timeout_ms=900_000, id_expiration_ms=604_800_000)
    c.log = []  # every durable record, to replay
    return c


_ids = itertools.count(1000)


def durable(core, step):
    assert step.transition is not None
    core.written(step.transition)
    core.log.append((step.transition.transactional_id, step.transition.value))
    return step.error


def init(core, clock, txn="t", timeout=60_000, expected=(-1, -1)):
    step = core.init_producer_id(txn, timeout, expected[0], expected[1], clock.ms, lambda: next(_ids))
    if step.transition is not None:
        return durable(core, step)
    return step.error


def begin(core, clock, txn="t", parts=(("a", 0),)):
    m = core.txns[txn]
    return durable(core, core.add_partitions(txn, m.producer_id, m.producer_epoch, parts, clock.ms))


def finish(core, clock, txn="t"):
    """The markers are written: Complete*."""
    t = core.complete(txn, clock.ms)
    core.written(t)
    core.log.append((txn, t.value))


def replayed(core):
    fresh = TransactionCore(core.max_timeout_ms, core.id_expiration_ms)
    for txn, value in core.log:
        fresh.apply(txn, decode_value(encode_value(value)))
    return {k: m.value() for k, m in fresh.txns.items()}


def test_first_init_gives_a_new_producer_id_with_epoch_0(core, clock):
    assert init(core, clock) == E.none
    m = core.txns["t"]
    assert (m.producer_epoch, m.state, m.timeout_ms) == (0, TxnState.EMPTY, 60_000)
    assert replayed(core) == {"t": m.value()}


def test_init_bounds_the_timeout_by_transaction_max_timeout(core, clock):
    assert init(core, clock, timeout=900_001) == E.invalid_transaction_timeout
    assert init(core, clock, timeout=0) == E.invalid_transaction_timeout
    assert "t" not in core.txns
    assert init(core, clock, txn="") == E.invalid_request


def test_init_again_bumps_the_epoch(core, clock):
    init(core, clock)
    pid = core.txns["t"].producer_id
    assert init(core, clock) == E.none
    assert (core.txns["t"].producer_id, core.txns["t"].producer_epoch) == (pid, 1)


def test_init_fences_an_ongoing_transaction_until_its_abort_completes(core, clock):
    init(core, clock)
    begin(core, clock)
    step = core.init_producer_id("t", 60_000, -1, -1, clock.ms, lambda: next(_ids))
    assert step.error == E.concurrent_transactions
    assert step.transition.value.state == TxnState.PREPARE_ABORT and step.transition.value.producer_epoch == 1
    durable(core, step)
    # the old producer is fenced, and a retry waits for the markers
    assert core.end_txn("t", core.txns["t"].producer_id, 0, True, clock.ms).error == E.producer_fenced
    assert init(core, clock) == E.concurrent_transactions
    finish(core, clock)
    assert core.txns["t"].state == TxnState.COMPLETE_ABORT
    assert init(core, clock) == E.none
    assert core.txns["t"].producer_epoch == 2


def test_expected_producer_id_and_epoch_v3(core, clock):
    init(core, clock)
    pid = core.txns["t"].producer_id
    assert init(core, clock, expected=(pid + 7, 0)) == E.producer_fenced
    assert init(core, clock, expected=(pid, 0)) == E.none  # the current epoch: bumped
    assert core.txns["t"].producer_epoch == 1
    assert init(core, clock, expected=(pid, 0)) == E.none  # a retry of that bump: no second bump
    assert core.txns["t"].producer_epoch == 1
    assert init(core, clock, expected=(pid, 5)) == E.producer_fenced


def test_epoch_exhaustion_rotates_the_producer_id(core, clock):
    init(core, clock)
    old = core.txns["t"].value()
    core.apply("t", TxnValue(old.producer_id, MAX_EPOCH - 1, 60_000, TxnState.COMPLETE_COMMIT, frozenset(),
                             clock.ms, -1))
    assert init(core, clock) == E.none
    m = core.txns["t"]
    assert m.producer_id != old.producer_id and m.producer_epoch == 0 and m.previous_producer_id == old.producer_id


def test_add_partitions_starts_the_transaction_and_checks_the_producer(core, clock):
    init(core, clock)
    m = core.txns["t"]
    assert core.add_partitions("u", m.producer_id, 0, [("a", 0)], clock.ms).error == E.invalid_producer_id_mapping
    assert core.add_partitions("t", m.producer_id + 1, 0, [("a", 0)], clock.ms).error == \
        E.invalid_producer_id_mapping
    assert core.add_partitions("t", m.producer_id, 3, [("a", 0)], clock.ms).error == E.producer_fenced
    begin(core, clock)
    assert (m.state, m.partitions, m.start_ms) == (TxnState.ONGOING, {("a", 0)}, clock.ms)
    # already in: nothing to write
    assert core.add_partitions("t", m.producer_id, 0, [("a", 0)], clock.ms).transition is None
    clock.advance(5)
    begin(core, clock, parts=[("b", 1)])
    assert m.partitions == {("a", 0), ("b", 1)} and m.start_ms == clock.ms - 5
    assert replayed(core) == {"t": m.value()}


def test_a_request_during_a_write_gets_concurrent_transactions_and_a_failed_write_changes_nothing(core, clock):
    init(core, clock)
    m = core.txns["t"]
    step = core.add_partitions("t", m.producer_id, 0, [("a", 0)], clock.ms)
    assert core.end_txn("t", m.producer_id, 0, True, clock.ms).error == E.concurrent_transactions
    core.abandon(step.transition)
    assert m.state == TxnState.EMPTY and m.partitions == frozenset() and m.pending is None


def test_a_failed_first_init_forgets_the_id(core, clock):
    step = core.init_producer_id("t", 60_000, -1, -1, clock.ms, lambda: 5)
    core.abandon(step.transition)
    assert "t" not in core.txns


def test_end_txn_rules(core, clock):
    init(core, clock)
    m = core.txns["t"]
    assert core.end_txn("t", m.producer_id, 0, True, clock.ms).error == E.invalid_txn_state  # Empty
    begin(core, clock)
    assert core.end_txn("t", m.producer_id, 1, True, clock.ms).error == E.producer_fenced
    assert core.end_txn("t", m.producer_id + 1, 0, True, clock.ms).error == E.invalid_producer_id_mapping
    step = core.end_txn("t", m.producer_id, 0, True, clock.ms)
    assert step.error == E.none and step.transition.value.state == TxnState.PREPARE_COMMIT
    durable(core, step)
    assert core.end_txn("t", m.producer_id, 0, True, clock.ms).error == E.concurrent_transactions
    assert core.end_txn("t", m.producer_id, 0, False, clock.ms).error == E.invalid_txn_state
    assert core.add_partitions("t", m.producer_id, 0, [("a", 0)], clock.ms).error == E.concurrent_transactions
    finish(core, clock)
    assert m.state == TxnState.COMPLETE_COMMIT and m.partitions == frozenset()
    assert core.end_txn("t", m.producer_id, 0, True, clock.ms) .error == E.none  # a retry
    assert core.end_txn("t", m.producer_id, 0, False, clock.ms).error == E.invalid_txn_state
    assert replayed(core) == {"t": m.value()}


def test_timed_out_transactions_are_aborted_under_a_bumped_epoch(core, clock):
    init(core, clock, timeout=10_000)
    begin(core, clock)
    clock.advance(10_000)
    assert core.timed_out(clock.ms) == []
    clock.advance(1)
    (t,) = core.timed_out(clock.ms)
    assert t.value.state == TxnState.PREPARE_ABORT and t.value.producer_epoch == 1
    assert core.timed_out(clock.ms) == []  # being written
    core.written(t)
    m = core.txns["t"]
    assert core.end_txn("t", m.producer_id, 0, True, clock.ms).error == E.producer_fenced


def test_idle_ids_expire_with_a_tombstone(core, clock):
    init(core, clock)
    init(core, clock, txn="busy")
    begin(core, clock, txn="busy")
    clock.advance(604_800_000)
    expired = core.expired(clock.ms)
    assert [(t.transactional_id, t.value) for t in expired] == [("t", None)]
    core.written(expired[0])
    assert set(core.txns) == {"busy"}


def test_verify_answers_from_the_transaction(core, clock):
    init(core, clock)
    m = core.txns["t"]
    assert core.verify("t", m.producer_id, 0, ("a", 0)) == E.transaction_abortable  # not in it
    begin(core, clock)
    assert core.verify("t", m.producer_id, 0, ("a", 0)) == E.none
    assert core.verify("t", m.producer_id, 0, ("a", 1)) == E.transaction_abortable
    assert core.verify("t", m.producer_id, 1, ("a", 0)) == E.producer_fenced
    assert core.verify("x", m.producer_id, 0, ("a", 0)) == E.invalid_producer_id_mapping


def test_records_round_trip_v0_and_v1():
    v = TxnValue(7, 3, 60_000, TxnState.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}), 11, 10)
    assert decode_value(encode_value(v)) == v
    assert decode_value(encode_value_v1(v)) == v
    empty = TxnValue(7, 3, 60_000, TxnState.EMPTY, frozenset(), 11, -1, previous_producer_id=4)
    assert decode_value(encode_value_v1(empty)) == empty
    # Kafka's v0 bytes: version, pid, epoch, timeout, status, null partitions, two timestamps
    assert encode_value(TxnValue(1, 0, 5, TxnState.EMPTY, frozenset(), 2, -1)) == bytes.fromhex(
        "0000" "0000000000000001" "0000" "00000005" "00" "ffffffff" "0000000000000002" "ffffffffffffffff")
