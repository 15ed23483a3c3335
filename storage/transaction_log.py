"""One `__transaction_state` partition on disk: the offsets log's segments and batches
(storage/log.py), holding transactional ids' records (storage/transaction_records.py) instead.

    <data.dir>/__transaction_state-<p>/<20-digit base offset>.log
"""

from __future__ import annotations

import logging
import os

from .log import LoadResult, PartitionLog, list_segments
from .scanner import record_count, scan_segments
from .transaction_records import TxnValue, decode_key, decode_value, encode_key, encode_value

log = logging.getLogger("groupd.storage")

TOPIC = "__transaction_state"

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
                for r in b.batch:
                    try:
                        txn_id = decode_key(bytes(r.key))
                        value = decode_value(None if r.value is None else bytes(r.value))
                    except Exception:  # noqa: BLE001  (any undecodable record is counted and skipped)
                        result.skipped += 1
                    else:
                        apply(txn_id, value)
                result.next_offset = max(result.next_offset, b.batch.next_offset)
                result.bytes += b.size
            self._settle(path, found, last, result)
        if result.skipped:
            log.warning("partition %s: skipped %d records that do not decode", self.name, result.skipped)
        self._open_end(result)
        return result
