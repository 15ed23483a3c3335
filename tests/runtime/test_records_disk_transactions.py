"""Transactions on the disk records plane without a server: `txn_data.write_marker` (contract seam 1)
appends a durable COMMIT/ABORT marker, the last stable offset follows, aborts become ranges; a reload
rebuilds open transactions, their first offsets and the aborted ranges from the batches and markers on
disk; the cleaner never compacts past the first unstable offset."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import types

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from groupd.coordinator.runtime.txn_data import write_marker
from groupd.protocol import ErrorCode as E
from groupd.storage.records_plane import register
from tests.runtime.test_records_disk_retention import plane_with

T = 1_700_000_000_000


def txn_batch(pid: int, seq: int, n: int = 2, transactional: bool = True, key: bytes | None = None,
              ts: int = T) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(transactional), producer_id=pid,
                                  producer_epoch=0, base_sequence=seq, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=key or f"k{i}".encode(), value=b"v", headers=[])
    return bytes(b.build())


class Node:
    """What write_marker reads of a node: settings, catalog, cluster (partition 0 is led here)."""

    def __init__(self, plane, topic) -> None:
        self.settings = plane.settings
        two = dataclasses.replace(topic, partitions=2)  # partition 1: another node's
        self.catalog = types.SimpleNamespace(get=lambda name: two if name == topic.name else None)
        self.cluster = types.SimpleNamespace(leads=lambda _name, p: p == 0)


def node_for(plane, topic) -> Node:
    node = Node(plane, topic)
    register(node, plane)
    return node


async def appended(plane, topic, data: bytes, txn_id: str | None = "tx", now: int = T) -> int:
    answer, done = plane.append(topic, 0, data, 8, now, -1, txn_id)
    assert answer.error is E.none, answer
    assert await done is None
    return answer.base_offset


def test_markers_move_the_last_stable_offset_and_a_reload_rebuilds_it(tmp_path):
    async def first_run() -> None:
        plane, topic = plane_with(tmp_path, {})
        node = node_for(plane, topic)
        try:
            assert await appended(plane, topic, txn_batch(1, 0)) == 0
            assert await appended(plane, topic, txn_batch(-1, -1, transactional=False), None) == 2
            assert await appended(plane, topic, txn_batch(2, 0)) == 4
            part = plane.partition(topic, 0)
            assert (part.last_stable_offset, part.high_watermark) == (0, 6)
            assert await write_marker(node, "t", 0, 1, 0, True, 3) is E.none
            assert (part.last_stable_offset, part.high_watermark) == (4, 7)
            assert await write_marker(node, "t", 0, 2, 0, False, 3) is E.none
            assert (part.last_stable_offset, part.high_watermark) == (8, 8)
            assert part.producers.txns.aborted_in(0, 8) == [(2, 4)]
            assert await appended(plane, topic, txn_batch(3, 0)) == 8  # left open across the restart
            # the seam's errors, as WriteTxnMarkers answers per partition
            assert await write_marker(node, "t", 1, 3, 0, True, 3) is E.not_leader_or_follower
            assert await write_marker(node, "nope", 0, 3, 0, True, 3) is E.unknown_topic_or_partition
            assert await write_marker(node, "t", 0, 2, -1, True, 3) is E.invalid_producer_epoch
            assert part.high_watermark == 10  # refused markers take no offset
        finally:
            await plane.close()

    async def second_run() -> None:
        plane, topic = plane_with(tmp_path, {})
        node = node_for(plane, topic)
        try:
            part = plane.partition(topic, 0)
            assert (part.last_stable_offset, part.high_watermark) == (8, 10)
            assert part.producers.txns.aborted_in(0, 10) == [(2, 4)]
            pid, epoch, last_seq, last_ts, coordinator_epoch, txn_start = sorted(part.producers.active())[1]
            assert (pid, epoch, last_seq, coordinator_epoch, txn_start) == (2, 0, 1, 3, -1)
            assert last_ts > T  # the marker's time
            # the open transaction's producer may not write outside it, and its marker still ends it
            answer, _ = plane.append(topic, 0, txn_batch(3, 2, transactional=False), 8, T, -1)
            assert answer.error is E.invalid_txn_state
            assert await write_marker(node, "t", 0, 3, 0, False, 3) is E.none
            assert (part.last_stable_offset, part.high_watermark) == (11, 11)
            assert part.producers.txns.aborted_in(0, 11) == [(2, 4), (3, 8)]
        finally:
            await plane.close()

    asyncio.run(first_run())
    asyncio.run(second_run())


def test_compaction_stops_at_the_first_unstable_offset(tmp_path):
    async def run() -> None:
        plane, topic = plane_with(tmp_path, {"cleanup.policy": "compact", "segment.ms": "1000",
                                             "min.cleanable.dirty.ratio": "0.01"})
        try:  # every batch 2 s after the one before: a segment each
            await appended(plane, topic, txn_batch(-1, -1, transactional=False, key=b"a"), None)
            await appended(plane, topic, txn_batch(5, 0, key=b"a", ts=T + 2000))  # opens a transaction at 2
            for i in range(4):
                await appended(plane, topic, txn_batch(-1, -1, transactional=False, key=b"a", ts=T + 4000 + 2000 * i),
                               None)
            part = plane.partition(topic, 0)
            assert part.last_stable_offset == 2 and len(part.dlog.segments) > 2
            assert len(part.dlog.segments) == 6
            due = plane._filthiest(T + 20_000)
            assert due is not None and due[3] == 2  # only the segment wholly below the open transaction
        finally:
            await plane.close()

    asyncio.run(run())



def test_compaction_drops_an_aborted_transactions_records_and_keeps_its_marker(tmp_path):
    from groupd.storage.compaction import read_closed
    from groupd.storage.records_plane.cleaner import compact_segments

    async def run() -> None:
        plane, topic = plane_with(tmp_path, {"cleanup.policy": "compact", "segment.ms": "1000"})
        node = node_for(plane, topic)
        wall = int(time.time() * 1000)  # the marker carries the wall clock's time
        start, now = wall - 600_000, wall + 60_000
        try:  # every batch 2 s or more after the one before: a segment each
            await appended(plane, topic, txn_batch(-1, -1, n=1, transactional=False, key=b"a", ts=start), None,
                           now)  # 0: committed
            await appended(plane, topic, txn_batch(5, 0, n=1, key=b"a", ts=start + 2000), now=now)  # 1: aborted below
            assert await write_marker(node, "t", 0, 5, 0, False, 1) is E.none  # 2
            for i in range(2):
                await appended(plane, topic, txn_batch(-1, -1, n=1, transactional=False, key=b"b",
                                                       ts=wall + 5000 + 5000 * i), None, now)
            part = plane.partition(topic, 0)
            assert part.last_stable_offset == part.high_watermark == 5
            assert [base for base, _ in part.dlog.segments] == [0, 1, 2, 3, 4]
            paths = [path for _, path in part.dlog.segments[:-1]]
            compact_segments(part.dlog.directory, paths, now, 86_400_000, None, False,
                             list(part.producers.txns.aborted))
            kept = []
            for path in paths:
                for b in read_closed(path)[1]:
                    batch = b.batch
                    kept.append((batch.base_offset, bool(batch.is_control_batch), [r.offset for r in batch]))
            # the committed value of a stays (the aborted one is no later value of it); the marker stays
            assert (0, False, [0]) in kept and (2, True, [2]) in kept
            assert not any(1 in offsets and not control for _, control, offsets in kept)
        finally:
            await plane.close()

    asyncio.run(run())


def test_a_marker_whose_write_fails_is_kafka_storage_error_and_changes_nothing(tmp_path):
    async def run() -> None:
        plane, topic = plane_with(tmp_path, {})
        node = node_for(plane, topic)
        try:
            assert await appended(plane, topic, txn_batch(1, 0)) == 0
            part = plane.partition(topic, 0)
            real = part.dlog.write_batches

            def full(*_args):
                part.dlog.write_batches = real
                raise OSError(28, "No space left on device")

            part.dlog.write_batches = full
            assert await write_marker(node, "t", 0, 1, 0, False, 1) is E.kafka_storage_error
            assert (part.last_stable_offset, part.high_watermark) == (0, 2)  # the transaction is still open
            assert part.producers.txns.aborted_in(0, 100) == []
            assert await write_marker(node, "t", 0, 1, 0, False, 1) is E.none  # the retry takes the same offset
            assert (part.last_stable_offset, part.high_watermark) == (3, 3)
            assert part.producers.txns.aborted_in(0, 100) == [(1, 0)]
        finally:
            await plane.close()

    asyncio.run(run())
