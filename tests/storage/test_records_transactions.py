"""Transactions on a data partition, sans-IO (storage/records_plane/transactions.py, producers.py, the
memory plane): the first offset of an open transaction holds the last stable offset, a marker ends it,
an abort is remembered as a range for read_committed fetches, a non-transactional write while one is
open is INVALID_TXN_STATE, markers older than the producer's epoch or coordinator epoch are refused,
and the marker batch is Kafka's EndTransactionMarker."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from groupd.protocol import ErrorCode as E
from groupd.storage.batch_crc import crc_ok
from groupd.storage.records_plane.batches import BatchError
from groupd.storage.records_plane.log import TopicPartitionLog
from groupd.storage.records_plane.plane import MemoryPlane
from groupd.storage.records_plane.transactions import (
    ABORT,
    COMMIT,
    PartitionTxns,
    end_of_batches,
    marker_batch,
    marker_of,
)
from tests.storage.test_records_plane import NOW, append, batch

KEY = ("topic-a", 0)


def test_the_last_stable_offset_waits_for_the_first_open_transaction():
    txns = PartitionTxns()
    assert txns.stable_offset(10) == 10
    txns.data(7, 3)
    txns.data(7, 5)  # the same transaction: its first offset stays
    txns.data(8, 6)
    assert txns.stable_offset(10) == 3
    txns.marker(7, 9, commit=True)
    assert txns.stable_offset(9) == 3  # the marker is not below the high watermark yet
    assert txns.stable_offset(10) == 6
    txns.marker(8, 10, commit=False)
    assert txns.stable_offset(11) == 11
    assert txns.aborted_in(0, 11) == [(8, 6)]
    assert txns.stable_offset(11, log_start=12) == 11  # never past the high watermark


def test_aborted_ranges_overlapping_a_fetch():
    txns = PartitionTxns()
    for pid, first, marker in ((1, 0, 4), (2, 5, 9), (3, 10, 12)):
        txns.data(pid, first)
        txns.marker(pid, marker, commit=False)
    assert txns.aborted_in(0, 100) == [(1, 0), (2, 5), (3, 10)]
    assert txns.aborted_in(5, 10) == [(2, 5)]  # last offset ≥ 5, first offset < 10
    assert txns.aborted_in(4, 5) == [(1, 0)]
    assert txns.aborted_in(13, 100) == []
    txns.trim_before(9)
    assert txns.aborted_in(0, 100) == [(2, 5), (3, 10)]


def test_a_cut_back_reopens_a_transaction_whose_marker_was_lost():
    txns = PartitionTxns()
    txns.data(1, 0)
    txns.marker(1, 5, commit=False)
    txns.data(2, 6)
    txns.forget_from(5)
    assert txns.open == {1: 0} and txns.aborted_in(0, 100) == []


def test_the_marker_batch_is_kafkas_end_transaction_marker():
    data = marker_batch(42, 3, commit=True, coordinator_epoch=7, timestamp_ms=NOW)
    assert crc_ok(bytearray(data))
    b = DefaultRecordBatch(data)
    assert (b.is_control_batch, b.is_transactional, b.producer_id, b.producer_epoch, b.base_sequence) == \
        (True, True, 42, 3, -1)
    (record,) = list(b)
    assert struct.unpack(">hh", record.key) == (0, COMMIT) and struct.unpack(">hi", record.value) == (0, 7)
    assert marker_of(DefaultRecordBatch(data)) == (COMMIT, 7)  # (a batch iterates once)
    assert marker_of(DefaultRecordBatch(marker_batch(1, 0, False, 0, NOW))) == (ABORT, 0)
    assert end_of_batches(data) == 1 and end_of_batches(b"") is None


def test_a_producer_with_an_open_transaction_cannot_write_outside_it():
    log = TopicPartitionLog(1 << 30, -1)
    assert append(log, batch(2, pid=7, epoch=0, seq=0, transactional=True)) == 0
    with pytest.raises(BatchError) as e:
        append(log, batch(1, pid=7, epoch=0, seq=2))
    assert e.value.error is E.invalid_txn_state
    assert append(log, batch(1, pid=7, epoch=0, seq=2, transactional=True)) == 2
    assert log.last_stable_offset == 0 and log.high_watermark == 3


def memory_plane() -> MemoryPlane:
    return MemoryPlane(1 << 30, -1, 1 << 20, max_bytes=1 << 30)


def test_commit_and_abort_markers_on_the_memory_plane():
    plane = memory_plane()
    assert plane.append(KEY, batch(2, pid=1, epoch=0, seq=0, transactional=True), 8, NOW,
                        transactional_id="a").error is E.none
    assert plane.append(KEY, batch(1), 8, NOW).base_offset == 2
    assert plane.append(KEY, batch(1, pid=2, epoch=0, seq=0, transactional=True), 8, NOW,
                        transactional_id="b").base_offset == 3
    log = plane.peek(KEY)
    assert (log.last_stable_offset, log.high_watermark) == (0, 4)
    assert plane.write_marker(KEY, 1, 0, True, 5, NOW) == (E.none, None)
    assert (log.last_stable_offset, log.high_watermark) == (3, 5)
    assert plane.write_marker(KEY, 2, 0, False, 5, NOW) == (E.none, None)
    assert (log.last_stable_offset, log.high_watermark) == (6, 6)
    assert log.producers.txns.aborted_in(0, 6) == [(2, 3)]
    stored = [DefaultRecordBatch(b.data) for b in log.batches]
    assert [(b.base_offset, b.is_control_batch) for b in stored] == [(0, False), (2, False), (3, False), (4, True),
                                                                    (5, True)]
    # read_committed reads stop at the last stable offset
    plane.append(KEY, batch(1, pid=1, epoch=0, seq=2, transactional=True), 8, NOW, transactional_id="a")
    assert log.bases == [0, 2, 3, 4, 5, 6]
    assert [DefaultRecordBatch(b.data).base_offset for b in log.read(0, 1 << 20, True, end=log.last_stable_offset)] \
        == [0, 2, 3, 4, 5]


def test_markers_are_checked_against_the_producers_epochs():
    plane = memory_plane()
    plane.append(KEY, batch(1, pid=1, epoch=3, seq=0, transactional=True), 8, NOW, transactional_id="a")
    error, message = plane.write_marker(KEY, 1, 2, True, 0, NOW)
    assert error is E.invalid_producer_epoch and "older" in message
    assert plane.write_marker(KEY, 1, 3, False, 5, NOW)[0] is E.none
    assert plane.write_marker(KEY, 1, 3, False, 4, NOW)[0] is E.transaction_coordinator_fenced
    assert plane.peek(KEY).high_watermark == 2  # the refused markers took no offset
    # a marker for a producer with no open transaction here is written (Kafka's empty transaction)
    assert plane.write_marker(KEY, 9, 0, True, 5, NOW) == (E.none, None)
    assert plane.peek(KEY).high_watermark == 3


def test_transactional_batches_need_a_transactional_id_and_the_coordinators_verification():
    plane = memory_plane()
    r = plane.append(KEY, batch(1, pid=1, epoch=0, seq=0, transactional=True), 8, NOW)
    assert r.error is E.transactional_id_authorization_failed
    asked = []

    def verify(pid: int, epoch: int) -> E:
        asked.append((pid, epoch))
        return E.invalid_txn_state if pid == 2 else E.none

    assert plane.append(KEY, batch(1, pid=2, epoch=0, seq=0, transactional=True), 8, NOW, transactional_id="b",
                        verify=verify).error is E.invalid_txn_state
    assert plane.append(KEY, batch(1, pid=1, epoch=0, seq=0, transactional=True), 8, NOW, transactional_id="a",
                        verify=verify).error is E.none
    # once its transaction is open on the partition, the producer is not verified again (Kafka's KIP-890)
    assert plane.append(KEY, batch(1, pid=1, epoch=0, seq=1, transactional=True), 8, NOW, transactional_id="a",
                        verify=verify).error is E.none
    assert asked == [(2, 0), (1, 0)]
    assert plane.peek(KEY).high_watermark == 2


def test_describe_producers_state():
    plane = memory_plane()
    plane.append(KEY, batch(2, pid=1, epoch=0, seq=0, transactional=True), 8, NOW, transactional_id="a")
    plane.append(KEY, batch(3, pid=2, epoch=1, seq=0), 8, NOW + 1)
    # the last timestamp is the batch's max timestamp (Kafka's ProducerStateEntry), not the time of the append
    assert sorted(plane.peek(KEY).producers.active()) == [(1, 0, 1, NOW + 1, -1, 0), (2, 1, 2, NOW + 2, -1, -1)]
    plane.write_marker(KEY, 1, 0, True, 4, NOW + 2)
    assert min(plane.peek(KEY).producers.active()) == (1, 0, 1, NOW + 2, 4, -1)


def test_an_open_transactions_producer_is_not_forgotten_when_idle():
    log = TopicPartitionLog(1 << 30, -1)
    append(log, batch(1, pid=1, epoch=0, seq=0, transactional=True), now=NOW)
    append(log, batch(1, pid=2, epoch=0, seq=0), now=NOW)
    append(log, batch(1, pid=3, epoch=0, seq=0), now=NOW + 2 * 86_400_000)
    assert sorted(p[0] for p in log.producers.active()) == [1, 3]
    assert log.last_stable_offset == 0


def test_transactional_records_are_found_before_the_batches_are_parsed():
    from groupd.storage.records_plane.batches import has_transactional

    txn = batch(1, pid=1, epoch=0, seq=0, transactional=True)
    assert has_transactional(batch(1) + txn) and not has_transactional(batch(2) + batch(1))
    assert not has_transactional(None) and not has_transactional(b"")
    assert not has_transactional(txn[:40])  # too short for a header: left to split, which refuses it
