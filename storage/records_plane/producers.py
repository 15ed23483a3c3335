"""Idempotent producers' state of one data partition, shared by both planes: the last batches of
each producer id (Kafka keeps 5) for duplicate detection and sequence checks, their epochs, and
idle producers forgotten after `producer.id.expiration.ms`. Sans-IO: the time comes in.

The disk plane rebuilds this state at load from the batch headers it scans (Kafka restores it
from producer snapshots; a scan of the same headers gives the same answer), and drops the entries
a failed write cut back (`forget_from`). Transactions ride on it (transactions.py): a transactional
batch opens its producer's transaction on the partition, a marker ends it; a producer with an open
transaction is never forgotten as idle (Kafka's `isProducerExpired`)."""

from __future__ import annotations

from collections import deque

from groupd.protocol import ErrorCode

from .batches import BatchError, ProducedBatch, _add_sequence
from .transactions import PartitionTxns

PRODUCER_BATCHES_KEPT = 5  # Kafka keeps the last 5 batches per producer for duplicate detection
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms: idle producers are forgotten


class _Producer:
    __slots__ = ("coordinator_epoch", "epoch", "last_ms", "last_timestamp", "recent")

    def __init__(self, epoch: int, coordinator_epoch: int = -1) -> None:
        self.epoch = epoch
        self.last_ms = 0  # when it last wrote here (its idleness is measured from it)
        self.last_timestamp = -1  # the max timestamp of its last batch or marker (DescribeProducers)
        self.coordinator_epoch = coordinator_epoch  # of the last marker written for it
        # (first sequence, last sequence, base offset) of the last batches appended
        self.recent: deque[tuple[int, int, int]] = deque(maxlen=PRODUCER_BATCHES_KEPT)


class Producers:
    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}
        self.txns = PartitionTxns()

    def check(self, batch: ProducedBatch) -> int | None:
        """Kafka's idempotence checks for a batch from producer `batch.producer_id`: None to
        append it, the base offset of the batch it duplicates (answered as success), or raises
        BatchError (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER)."""
        if batch.producer_id < 0:
            return None
        state = self._producers.get(batch.producer_id)
        if state is None:
            return None  # unknown producer (or state lost): any sequence is accepted, as in Kafka
        if batch.producer_epoch < state.epoch:
            raise BatchError(ErrorCode.invalid_producer_epoch,
                             f"Epoch {batch.producer_epoch} of producer {batch.producer_id} is older "
                             f"than its current epoch {state.epoch}")
        if batch.producer_epoch > state.epoch:
            if batch.base_sequence != 0:
                raise BatchError(ErrorCode.out_of_order_sequence_number,
                                 f"Invalid sequence number for new epoch {batch.producer_epoch} of "
                                 f"producer {batch.producer_id}: {batch.base_sequence} (expected 0)")
            return None
        for first, last, base in state.recent:
            if first == batch.base_sequence and last == batch.last_sequence:
                return base
        if not batch.transactional and batch.producer_id in self.txns.open:
            raise BatchError(ErrorCode.invalid_txn_state,
                             f"Expected transactional write from producer {batch.producer_id}")
        if state.recent:
            last_seq = state.recent[-1][1]
            if batch.base_sequence != (last_seq + 1) % (2**31):
                raise BatchError(ErrorCode.out_of_order_sequence_number,
                                 f"Out of order sequence number for producer {batch.producer_id}: "
                                 f"{batch.base_sequence} (incoming seq. number), {last_seq} (current end "
                                 "sequence number)")
        return None

    def in_transaction(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer has a transaction open here at `epoch` (Kafka's hasOngoingTransaction:
        under transactions v2 an end bumps the epoch, so an open one of an older epoch is the last
        transaction, its marker still to come, and a batch of the next needs the coordinator first)."""
        state = self._producers.get(producer_id)
        return producer_id in self.txns.open and state is not None and state.epoch == epoch

    def record(self, producer_id: int, epoch: int, base_sequence: int, count: int, base: int, now_ms: int,
               transactional: bool = False, max_timestamp: int = -1) -> None:
        """An appended batch of producer `producer_id` (≥ 0) at offset `base`."""
        state = self._touch(producer_id, epoch, now_ms)
        state.last_timestamp = max_timestamp
        state.recent.append((base_sequence, _add_sequence(base_sequence, count - 1), base))
        if transactional:
            self.txns.data(producer_id, base)
        self._expire(now_ms)

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> tuple[ErrorCode, str] | None:
        """Kafka's checks of an end-transaction marker (`appendEndTxnMarker`): an epoch older than the
        producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than the last marker's
        TRANSACTION_COORDINATOR_FENCED; None: write it."""
        state = self._producers.get(producer_id)
        if state is None:
            return None
        if epoch < state.epoch:
            return ErrorCode.invalid_producer_epoch, (f"Epoch {epoch} of the marker for producer {producer_id} "
                                                      f"is older than its current epoch {state.epoch}")
        if coordinator_epoch < state.coordinator_epoch:
            return ErrorCode.transaction_coordinator_fenced, (
                f"Coordinator epoch {coordinator_epoch} of the marker for producer {producer_id} is older "
                f"than the last one's {state.coordinator_epoch}")
        return None

    def marker(self, producer_id: int, epoch: int, coordinator_epoch: int, offset: int, commit: bool,
               now_ms: int) -> None:
        """An end-transaction marker of the producer appended at `offset`."""
        state = self._touch(producer_id, epoch, now_ms)
        state.coordinator_epoch, state.last_timestamp = coordinator_epoch, now_ms  # the marker's timestamp
        self.txns.marker(producer_id, offset, commit)
        self._expire(now_ms)

    def _touch(self, producer_id: int, epoch: int, now_ms: int) -> _Producer:
        producers = self._producers
        state = producers.pop(producer_id, None)  # re-inserted last: oldest first
        if state is None or state.epoch != epoch:
            state = _Producer(epoch, -1 if state is None else state.coordinator_epoch)
        producers[producer_id] = state
        state.last_ms = max(state.last_ms, now_ms)
        return state

    def _expire(self, now_ms: int) -> None:
        """Forget idle producers, as Kafka does after producer.id.expiration.ms (never one with an
        open transaction: it moves to the back)."""
        producers = self._producers
        for _ in range(len(producers)):
            pid = next(iter(producers))
            if now_ms - producers[pid].last_ms <= PRODUCER_ID_EXPIRATION_MS:
                break
            state = producers.pop(pid)
            if pid in self.txns.open:
                producers[pid] = state

    def active(self) -> list[tuple[int, int, int, int, int, int]]:
        """DescribeProducers: (producer id, epoch, last sequence, last timestamp, coordinator epoch,
        first offset of its open transaction or -1) per producer known here."""
        return [(pid, s.epoch, s.recent[-1][1] if s.recent else -1, s.last_timestamp,
                 s.coordinator_epoch, self.txns.open.get(pid, -1)) for pid, s in self._producers.items()]

    def forget_from(self, offset: int) -> None:
        """Drop what batches at or after `offset` taught (a failed write cut them back)."""
        self.txns.forget_from(offset)
        for pid in list(self._producers):
            state = self._producers[pid]
            kept = [r for r in state.recent if r[2] < offset]
            if not kept and pid not in self.txns.open:
                del self._producers[pid]
            elif len(kept) != len(state.recent):
                state.recent.clear()
                state.recent.extend(kept)
