"""One `__transaction_state` partition on disk: the offsets log's segments and batches
(storage/log.py), holding transactional ids' records (storage/transaction_records.py) instead.

    <data.dir>/__transaction_state-<p>/<20-digit base offset>.log

In cluster mode (`StampedTransactionLog`) each owner writes segments of its own,
`<base offset>-<stamp>.log` (its home claim's stamp), starting at the offset it found, and a stamp's
records count below the first offset of any later stamp (the data partitions' rule, docs/records-plane.md):
what a deposed owner still writes after its successor loaded is in its own file, at offsets the
successor took, and never read; no two owners write one file.
"""

from __future__ import annotations

import logging
import os

from .log import LoadResult, PartitionLog, list_segments
from .owned_log import stamped_segments
from .scanner import record_count, scan_segments
from .transaction_records import TxnValue, decode_key, decode_value, encode_key, encode_value

log = logging.getLogger("groupd.storage")

TOPIC = "__transaction_state"
END = 1 << 62  # no bound

TxnRecord = tuple[str, TxnValue | None]  # (transactional id, its state; None: a tombstone)


def encode(records: list[TxnRecord]) -> list[tuple[bytes, bytes | None]]:
    return [(encode_key(txn_id), encode_value(value)) for txn_id, value in records]


class TransactionPartitionLog(PartitionLog):
    def __init__(self, data_dir: str, partition: int, segment_bytes: int) -> None:
        super().__init__(data_dir, partition, segment_bytes)
        self.directory = os.path.join(data_dir, f"{TOPIC}-{partition}")

    @property
    def name(self) -> str:
        return f"{TOPIC}-{self.partition}"

    def load(self, apply) -> LoadResult:
        """Replay every record into `apply(transactional_id, value)`, oldest first; a record that does
        not decode is skipped with a count (its batch's CRC held: a newer Kafka's record type)."""
        os.makedirs(self.directory, exist_ok=True)
        self.segments = list_segments(self.directory)
        result = LoadResult()
        for _base, path, data, found, last in scan_segments(self.segments):
            result.records += sum(record_count(data, b) for b in found.batches)
            del data
            for b in found.batches:
                _replay(b.batch, apply, result)
                result.next_offset = max(result.next_offset, b.batch.next_offset)
                result.bytes += b.size
            self._settle(path, found, last, result)
        if result.skipped:
            log.warning("partition %s: skipped %d records that do not decode", self.name, result.skipped)
        self._open_end(result)
        return result


def _replay(batch, apply, result: LoadResult, below: int | None = None) -> None:
    """A batch's records into `apply(transactional_id, value)` (those under `below` only); a record
    that does not decode is counted and skipped (its batch's CRC held: a newer Kafka's record type)."""
    for r in batch:
        if below is not None:
            if r.offset >= below:
                break
            result.records += 1
        try:
            txn_id = decode_key(bytes(r.key))
            value = decode_value(None if r.value is None else bytes(r.value))
        except Exception:  # noqa: BLE001  (any undecodable record is counted and skipped)
            result.skipped += 1
        else:
            apply(txn_id, value)


class StampedTransactionLog(TransactionPartitionLog):
    """A partition as one cluster-mode owner (claim `stamp`) holds it: it reads every earlier stamp's
    segments, never changing them (a torn tail is where their valid batches end), each up to the first
    offset of a later stamp, then appends to segments of its own stamp from the next offset on."""

    def __init__(self, data_dir: str, partition: int, segment_bytes: int, stamp: int) -> None:
        super().__init__(data_dir, partition, segment_bytes)
        self.stamp = stamp

    def load(self, apply) -> LoadResult:
        os.makedirs(self.directory, exist_ok=True)
        chains = sorted((s, segments) for s, segments in stamped_segments(self.directory).items() if s < self.stamp)
        result = LoadResult()
        for i, (_stamp, segments) in enumerate(chains):
            below = min([segs[0][0] for _, segs in chains[i + 1:]], default=END)
            for base, _path, _data, found, _last in scan_segments(segments):
                if base >= below:
                    break
                for b in found.batches:
                    if b.base_offset >= below:
                        break
                    _replay(b.batch, apply, result, below)
                    result.next_offset = max(result.next_offset, min(b.batch.next_offset, below))
                    result.bytes += b.size
            if below != END:  # the offsets under a later stamp's start are taken, records or not
                result.next_offset = max(result.next_offset, below)
        if result.skipped:
            log.warning("partition %s: skipped %d records that do not decode", self.name, result.skipped)
        self.segments = []
        self.next_offset = result.next_offset
        self._roll(self.next_offset)
        return result
