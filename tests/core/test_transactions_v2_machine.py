"""Transactions v2 (KIP-890 part 2) in the transaction coordinator's core, one rule per test, as
Kafka's TransactionCoordinator.endTransaction and TransactionMetadata have them: an implicit add marks
the transaction TV2, EndTxn v5 bumps the epoch (markers and Complete* carry the bumped one), a retry
is the epoch just bumped from, an exhausted epoch rotates the producer id, an abort needs no
partition; and the log keeps the client's transaction version (replayed, the state is the same)."""

import pytest

from groupd.coordinator.core.transactions.machine import MAX_EPOCH, TransactionCore
from groupd.protocol import ErrorCode
from groupd.storage.transaction_records import TxnState, TxnValue, decode_value, encode_value
from tests.core.test_transactions_machine import Clock, _ids, durable, finish, init

E = ErrorCode
NOW = 1_700_000_000_000


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def core():
    c = TransactionCore(max_timeout_ms=900_000, id_expiration_ms=604_800_000)
    c.log = []  # every durable record, to replay
    return c


def add_v2(core, clock, parts=(("a", 0),), txn="t"):
    m = core.txns[txn]
    return durable(core, core.add_partitions(txn, m.producer_id, m.producer_epoch, parts, clock.ms, 2))


def end_v2(core, clock, pid, epoch, commit=True, txn="t"):
    step = core.end_txn(txn, pid, epoch, commit, clock.ms, 2, lambda: next(_ids))
    if step.transition is not None:
        durable(core, step)
    return step


def replayed(core) -> TransactionCore:
    fresh = TransactionCore(core.max_timeout_ms, core.id_expiration_ms)
    for txn, value in core.log:
        fresh.apply(txn, decode_value(encode_value(value)))
    return fresh


def test_an_implicit_add_marks_the_transaction_tv2(core, clock):
    init(core, clock)
    add_v2(core, clock)
    m = core.txns["t"]
    assert (m.state, m.client_version) == (TxnState.ONGOING, 2)
    assert replayed(core).txns["t"].client_version == 2


def test_end_v5_bumps_the_epoch_and_the_markers_carry_it(core, clock):
    init(core, clock)
    m = core.txns["t"]
    pid, epoch = m.producer_id, m.producer_epoch
    add_v2(core, clock)
    assert end_v2(core, clock, pid, epoch).error == E.none
    assert (m.state, m.producer_epoch, m.partitions) == (TxnState.PREPARE_COMMIT, epoch + 1, {("a", 0)})
    assert m.end_identity() == (pid, epoch + 1)
    finish(core, clock)
    assert (m.state, m.producer_id, m.producer_epoch) == (TxnState.COMPLETE_COMMIT, pid, epoch + 1)


def test_a_retry_is_the_epoch_bumped_from(core, clock):
    init(core, clock)
    m = core.txns["t"]
    pid, epoch = m.producer_id, m.producer_epoch
    add_v2(core, clock)
    end_v2(core, clock, pid, epoch)
    step = end_v2(core, clock, pid, epoch)
    assert (step.error, step.transition) == (E.concurrent_transactions, None)  # markers still being written
    assert end_v2(core, clock, pid, epoch + 1).error == E.producer_fenced  # Prepare*: only a retry is valid
    finish(core, clock)
    step = end_v2(core, clock, pid, epoch)
    assert (step.error, step.transition) == (E.none, None)
    assert end_v2(core, clock, pid, epoch, commit=False).error == E.invalid_txn_state
    assert end_v2(core, clock, pid, epoch + 1).error == E.invalid_txn_state  # the same epoch is the next end
    assert end_v2(core, clock, pid, epoch + 2).error == E.producer_fenced
    assert end_v2(core, clock, pid + 1, epoch + 1).error == E.invalid_producer_id_mapping


def test_an_abort_needs_no_partition(core, clock):
    init(core, clock)
    m = core.txns["t"]
    pid, epoch = m.producer_id, m.producer_epoch
    assert end_v2(core, clock, pid, epoch).error == E.invalid_txn_state  # Empty: nothing to commit
    assert end_v2(core, clock, pid, epoch, commit=False).error == E.none
    assert (m.state, m.producer_epoch, m.partitions, m.start_ms) == (TxnState.PREPARE_ABORT, epoch + 1, set(),
                                                                     clock.ms)
    finish(core, clock)
    # CompleteAbort, the current epoch (not a retry): aborted again, bumped again
    assert end_v2(core, clock, pid, epoch + 1, commit=False).error == E.none
    assert m.producer_epoch == epoch + 2


def test_an_exhausted_epoch_rotates_the_producer_id_at_completion(core, clock):
    init(core, clock)
    old = core.txns["t"]
    pid = old.producer_id
    core.apply("t", TxnValue(pid, MAX_EPOCH - 1, 60_000, TxnState.ONGOING, frozenset({("a", 0)}), clock.ms,
                             clock.ms, client_transaction_version=2))
    m = core.txns["t"]
    assert end_v2(core, clock, pid, MAX_EPOCH - 1).error == E.none
    assert (m.producer_id, m.producer_epoch) == (pid, MAX_EPOCH)  # the markers' epoch
    new_pid = m.next_producer_id
    assert new_pid not in (-1, pid) and m.end_identity() == (new_pid, 0)
    finish(core, clock)
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id, m.next_producer_id) == (new_pid, 0, pid, -1)
    # the client's retry with the old id and its last epoch is recognised
    step = end_v2(core, clock, pid, MAX_EPOCH - 1)
    assert (step.error, step.transition) == (E.none, None)
    assert replayed(core).txns["t"].value() == m.value()


def test_an_end_at_the_maximum_epoch_keeps_it_and_rotates_the_id(core, clock):
    """A fence (timeout, InitProducerId) may leave a TV2 transaction at epoch 32767: its next end must not
    write 32768 (no such short), it keeps the epoch for the markers and takes a new producer id."""
    init(core, clock)
    pid = core.txns["t"].producer_id
    core.apply("t", TxnValue(pid, MAX_EPOCH, 60_000, TxnState.ONGOING, frozenset({("a", 0)}), clock.ms,
                             clock.ms, client_transaction_version=2))
    m = core.txns["t"]
    assert end_v2(core, clock, pid, MAX_EPOCH).error == E.none
    assert m.producer_epoch == MAX_EPOCH and m.next_producer_id not in (-1, pid)
    new_pid = m.next_producer_id
    finish(core, clock)
    assert (m.producer_id, m.producer_epoch) == (new_pid, 0)
    assert replayed(core).txns["t"].value() == m.value()  # every record encodes (an epoch of 32768 does not)


def test_tv1_end_keeps_the_epoch(core, clock):
    init(core, clock)
    m = core.txns["t"]
    pid, epoch = m.producer_id, m.producer_epoch
    add_v2(core, clock)
    durable(core, core.end_txn("t", pid, epoch, True, clock.ms))
    assert (m.state, m.producer_epoch) == (TxnState.PREPARE_COMMIT, epoch)


def test_the_log_value_is_v1_for_a_tv2_client():
    tv2 = TxnValue(7, 3, 60_000, TxnState.PREPARE_COMMIT, frozenset({("a", 0)}), NOW, NOW, 5, 9, 2)
    data = encode_value(tv2)
    assert data[:2] == b"\x00\x01" and decode_value(data) == tv2
    tv1 = TxnValue(7, 3, 60_000, TxnState.ONGOING, frozenset({("a", 0)}), NOW, NOW)
    assert encode_value(tv1)[:2] == b"\x00\x00" and decode_value(encode_value(tv1)) == tv1
