"""Transactions on one data partition, shared by both planes, as Kafka's ProducerStateManager and
TransactionIndex keep them: per producer the first offset of its open transaction, the transactions
whose marker is written but not yet below the high watermark (Kafka's unreplicated transactions:
their data must stay invisible until the marker is durable), and the aborted ranges (producer id,
first offset, last offset = the ABORT marker's) that read_committed fetches are told about.

Last stable offset = min(first offset of any open or not yet durable transaction, high watermark),
never below the log start. Sans-IO: offsets in, answers out. The disk plane rebuilds this state at
load from the batch headers and markers it scans (`scanned`), as it rebuilds producer state.
"""

from __future__ import annotations

import bisect
import struct

from ..batch_crc import set_crc
from ..wire import varint

ABORT, COMMIT = 0, 1
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
# base offset, length, leader epoch, magic, crc, attributes, last offset delta, base and max
# timestamps, producer id, epoch, base sequence, record count: Kafka's v2 batch header
_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta, bytes 23..27
_MARKER_KEY = struct.Struct(">hh")  # version 0, type (0 ABORT, 1 COMMIT)
_MARKER_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


class PartitionTxns:
    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._ending: dict[int, tuple[int, int]] = {}  # marker offset -> (producer id, first offset)
        self.aborted: list[tuple[int, int, int]] = []  # (last offset, producer id, first offset), by last

    # -- appends --------------------------------------------------------------------------------

    def data(self, producer_id: int, base_offset: int) -> None:
        """A transactional batch of `producer_id` appended at `base_offset` (opens its transaction)."""
        self.open.setdefault(producer_id, base_offset)

    def marker(self, producer_id: int, offset: int, commit: bool) -> int | None:
        """The producer's marker appended at `offset`: its transaction ends (the first offset, or None
        when it had none open here, as Kafka writes a marker for an empty transaction too)."""
        first = self.open.pop(producer_id, None)
        if first is None:
            return None
        self._ending[offset] = (producer_id, first)
        if not commit:
            bisect.insort(self.aborted, (offset, producer_id, first))
        return first

    # -- reading ----------------------------------------------------------------------------------

    def stable_offset(self, high_watermark: int, log_start: int = 0) -> int:
        """The last stable offset; forgets the ended transactions whose marker is now durable."""
        for offset in [o for o in self._ending if o < high_watermark]:
            del self._ending[offset]
        lso = high_watermark
        if self.open:
            lso = min(lso, min(self.open.values()))
        if self._ending:
            lso = min(lso, min(first for _, first in self._ending.values()))
        return max(lso, min(log_start, high_watermark))

    def aborted_in(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start, upper): Kafka's
        `collectAbortedTransactions` (last offset ≥ start, first offset < upper)."""
        return [(pid, first) for pid, first, _ in self.aborted_spans(start, upper)]

    def aborted_spans(self, start: int, upper: int) -> list[tuple[int, int, int]]:
        """(producer id, first offset, marker offset) of the same transactions."""
        i = bisect.bisect_left(self.aborted, (start, -1 << 63, -1 << 63))
        return [(pid, first, last) for last, pid, first in self.aborted[i:] if first < upper]

    # -- the log moving under it -------------------------------------------------------------------

    def trim_before(self, log_start: int) -> None:
        """Aborted ranges wholly below the log start are no longer needed (Kafka deletes their index
        with the segment)."""
        i = bisect.bisect_left(self.aborted, (log_start, -1 << 63, -1 << 63))
        if i:
            del self.aborted[:i]

    def forget_from(self, offset: int) -> None:
        """A failed write cut the log back to `offset`: what batches from there on taught goes (a marker
        cut back reopens its transaction)."""
        for marker_offset in [o for o in self._ending if o >= offset]:
            pid, first = self._ending.pop(marker_offset)
            if first < offset:
                self.open[pid] = first
        self.aborted = [a for a in self.aborted if a[0] < offset]
        self.open = {pid: first for pid, first in self.open.items() if first < offset}


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytes:
    """Kafka's end-transaction marker: a control batch (transactional + control attributes) of one
    control record, key = version 0 + type, value = version 0 + coordinator epoch; base sequence -1."""
    key = _MARKER_KEY.pack(0, COMMIT if commit else ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    body = bytearray(b"\x00")  # record attributes
    body += varint(0) + varint(0)  # timestamp delta, offset delta
    body += varint(len(key)) + key + varint(len(value)) + value + varint(0)  # no headers
    record = varint(len(body)) + bytes(body)
    head = _HEADER.pack(0, _HEADER.size - 12 + len(record), 0, 2, 0, _TRANSACTIONAL | _CONTROL, 0,
                        timestamp_ms, timestamp_ms, producer_id, producer_epoch, -1, 1)
    whole = bytearray(head + record)
    set_crc(whole)
    return bytes(whole)


def end_of_batches(data) -> int | None:
    """The offset after the last of the whole v2 batches in `data` (a fetch's bytes); None when empty."""
    pos, end, n = 0, None, len(data)
    while pos + 27 <= n:
        base, length = _BASE_LENGTH.unpack_from(data, pos)
        end = base + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
        pos += 12 + length
    return end


def marker_of(batch) -> tuple[int, int] | None:
    """(ABORT or COMMIT, coordinator epoch) of a control batch (an aiokafka DefaultRecordBatch) holding
    an end-transaction marker; None for any other batch."""
    if not batch.is_control_batch:
        return None
    for record in batch:
        key, value = record.key, record.value
        if key is not None and len(key) >= 4:
            kind = _MARKER_KEY.unpack_from(bytes(key), 0)[1]
            if kind in (ABORT, COMMIT):
                epoch = _MARKER_VALUE.unpack_from(bytes(value), 0)[1] if value is not None and len(value) >= 6 else -1
                return kind, epoch
    return None
