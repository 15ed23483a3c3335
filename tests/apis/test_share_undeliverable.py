"""What a share-partition never hands out (share-groups spec §3.4; Kafka's
SharePartition.filterAbortedTransactionalAcquiredRecords): transaction markers always, and under
read_committed the batches of aborted transactions, found from the batch headers and the data
partition's aborted ranges; and the answer's bytes cut to the batches of the acquired ranges."""

from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from groupd.coordinator.apis.share_common import batch_spans, cut, undeliverable
from groupd.storage.records_plane.transactions import PartitionTxns, marker_batch

PRODUCER = 7


def data_batch(base: int, count: int, transactional: bool) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(transactional),
                                  producer_id=PRODUCER if transactional else -1, producer_epoch=0,
                                  base_sequence=base if transactional else -1, batch_size=1 << 20)
    for i in range(count):
        b.append(i, timestamp=1000, key=None, value=b"v%d" % (base + i), headers=[])
    return at(bytes(b.build()), base)


def at(batch: bytes, base: int) -> bytes:
    """The batch placed at offset `base` (the base offset is not under the CRC)."""
    return struct.pack(">q", base) + batch[8:]


def log() -> tuple[bytes, PartitionTxns]:
    """A committed transaction 0-1 (marker 2), an aborted one 3-4 (marker 5), a plain record 6."""
    txns = PartitionTxns()
    txns.data(PRODUCER, 0)
    txns.marker(PRODUCER, 2, commit=True)
    txns.data(PRODUCER, 3)
    txns.marker(PRODUCER, 5, commit=False)
    data = b"".join((data_batch(0, 2, True), at(marker_batch(PRODUCER, 0, True, 0, 1000), 2),
                     data_batch(3, 2, True), at(marker_batch(PRODUCER, 0, False, 0, 1000), 5),
                     data_batch(6, 1, False)))
    return data, txns


def test_markers_are_never_delivered_and_aborted_data_only_under_read_committed():
    data, txns = log()
    spans = batch_spans(data)
    assert [(first, last) for first, last, _, _ in spans] == [(0, 1), (2, 2), (3, 4), (5, 5), (6, 6)]
    assert undeliverable(data, spans, None) == [(2, 2), (5, 5)]  # read_uncommitted
    assert undeliverable(data, spans, txns) == [(2, 2), (3, 4), (5, 5)]  # read_committed


def test_a_committed_transaction_of_a_producer_that_aborted_later_is_delivered():
    data, txns = log()
    spans = batch_spans(data)
    assert (0, 1) not in undeliverable(data, spans, txns)


def test_the_answer_keeps_only_the_batches_of_the_acquired_ranges():
    data, _ = log()
    spans = batch_spans(data)
    kept = cut(data, spans, [(0, 1, 1), (6, 6, 1)])
    assert [(first, last) for first, last, _, _ in batch_spans(kept)] == [(0, 1), (6, 6)]
