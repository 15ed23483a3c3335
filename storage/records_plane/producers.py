"""Idempotent producers' state of one data partition, shared by both planes: the last batches of
each producer id (Kafka keeps 5) for duplicate detection and sequence checks, their epochs, and
idle producers forgotten after `producer.id.expiration.ms`. Sans-IO: the time comes in.

The disk plane rebuilds this state at load from the batch headers it scans (Kafka restores it
from producer snapshots; a scan of the same headers gives the same answer), and drops the entries
a failed write cut back (`forget_from`)."""

from __future__ import annotations

from collections import deque

from groupd.protocol import ErrorCode

from .batches import BatchError, ProducedBatch, _add_sequence

PRODUCER_BATCHES_KEPT = 5  # Kafka keeps the last 5 batches per producer for duplicate detection
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms: idle producers are forgotten


class _Producer:
    __slots__ = ("epoch", "recent", "last_ms")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.last_ms = 0
        # (first sequence, last sequence, base offset) of the last batches appended
        self.recent: deque[tuple[int, int, int]] = deque(maxlen=PRODUCER_BATCHES_KEPT)


class Producers:
    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

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
        if state.recent:
            last_seq = state.recent[-1][1]
            if batch.base_sequence != (last_seq + 1) % (2**31):
                raise BatchError(ErrorCode.out_of_order_sequence_number,
                                 f"Out of order sequence number for producer {batch.producer_id}: "
                                 f"{batch.base_sequence} (incoming seq. number), {last_seq} (current end "
                                 "sequence number)")
        return None

    def record(self, producer_id: int, epoch: int, base_sequence: int, count: int, base: int, now_ms: int) -> None:
        """An appended batch of producer `producer_id` (≥ 0) at offset `base`."""
        producers = self._producers
        state = producers.pop(producer_id, None)  # re-inserted last: oldest first
        if state is None or state.epoch != epoch:
            state = _Producer(epoch)
        producers[producer_id] = state
        state.last_ms = max(state.last_ms, now_ms)
        state.recent.append((base_sequence, _add_sequence(base_sequence, count - 1), base))
        while producers:  # forget idle producers, as Kafka does after producer.id.expiration.ms
            oldest = next(iter(producers.values()))
            if now_ms - oldest.last_ms <= PRODUCER_ID_EXPIRATION_MS:
                break
            del producers[next(iter(producers))]

    def forget_from(self, offset: int) -> None:
        """Drop what batches at or after `offset` taught (a failed write cut them back)."""
        for pid in list(self._producers):
            state = self._producers[pid]
            kept = [r for r in state.recent if r[2] < offset]
            if not kept:
                del self._producers[pid]
            elif len(kept) != len(state.recent):
                state.recent.clear()
                state.recent.extend(kept)
