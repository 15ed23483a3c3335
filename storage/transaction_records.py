"""The records of `__transaction_state`, byte-compatible with Kafka's TransactionLogKey (v0) and
TransactionLogValue: v0 for a transaction a transactions-v1 client runs, v1 (flexible, with the tagged
PreviousProducerId, NextProducerId and ClientTransactionVersion) once a transactions-v2 client ends one,
as Kafka's TransactionLog.valueToBytes chooses: one record per transactional id, the last one wins, a
null value (tombstone) when the id expires.

Pure encoding (no I/O): the transaction coordinator's core builds these, storage/transaction_log.py
writes and loads them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from .wire import CorruptRecord, Reader, cint32s, cstr, int32s, str16, tagged, uvarint

KEY_VERSION = 0
_HEAD_V0 = struct.Struct(">qhib")  # ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus
_TIMES = struct.Struct(">qq")  # TransactionLastUpdateTimestampMs, TransactionStartTimestampMs


class TxnState(IntEnum):
    """Kafka's TransactionState ids, as the log stores them."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name DescribeTransactions / ListTransactions use (TransactionState.stateName)."""
        return _LABELS[self]


_LABELS = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
           TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
           TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
           TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}


@dataclass(frozen=True, slots=True)
class TxnValue:
    """One transactional id's state as stored: Kafka's TxnTransitMetadata."""
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int  # -1 until a transaction starts
    previous_producer_id: int = -1  # v1 only (tagged)
    next_producer_id: int = -1  # v1 only (tagged): the id a TV2 end rotates to (its epoch exhausted)
    client_transaction_version: int = 0  # v1 only (tagged): 2 once a TV2 client drives the transaction


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + str16(transactional_id)


def decode_key(data: bytes) -> str:
    r = Reader(data)
    version = r.i16()
    if version != KEY_VERSION:
        raise CorruptRecord(f"unknown __transaction_state key version {version}")
    return r.str16()


def _by_topic(partitions: frozenset[tuple[str, int]]) -> list[tuple[str, tuple[int, ...]]]:
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        topics.setdefault(topic, []).append(p)
    return [(t, tuple(ps)) for t, ps in topics.items()]


def encode_value(value: TxnValue | None) -> bytes | None:
    """Version 1 when a TV2 client drives the transaction, else version 0 (Kafka's choice); Empty stores
    null partitions in v0 (as Kafka)."""
    if value is None:
        return None
    if value.client_transaction_version >= 2:
        return encode_value_v1(value)
    out = [struct.pack(">h", 0), _HEAD_V0.pack(value.producer_id, value.producer_epoch, value.timeout_ms,
                                                int(value.state))]
    if value.state == TxnState.EMPTY:
        out.append(struct.pack(">i", -1))
    else:
        topics = _by_topic(value.partitions)
        out.append(struct.pack(">i", len(topics)))
        out.extend(str16(t) + int32s(ps) for t, ps in topics)
    out.append(_TIMES.pack(value.last_update_ms, value.start_ms))
    return b"".join(out)


def encode_value_v1(value: TxnValue) -> bytes:
    """Version 1 (flexible), what Kafka writes for a transactions-v2 client (tagged fields at their
    defaults are left out, as Kafka's generated writer does)."""
    topics = _by_topic(value.partitions)
    parts = b"\x00" if value.state == TxnState.EMPTY else uvarint(len(topics) + 1) + b"".join(
        cstr(t) + cint32s(ps) + b"\x00" for t, ps in topics)
    tags = [(0, struct.pack(">q", value.previous_producer_id))] if value.previous_producer_id != -1 else []
    if value.next_producer_id != -1:
        tags.append((1, struct.pack(">q", value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((2, struct.pack(">h", value.client_transaction_version)))
    return (struct.pack(">h", 1) + _HEAD_V0.pack(value.producer_id, value.producer_epoch, value.timeout_ms,
                                                 int(value.state)) + parts
            + _TIMES.pack(value.last_update_ms, value.start_ms) + tagged(tags))


def decode_value(data: bytes | None) -> TxnValue | None:
    if data is None:
        return None
    r = Reader(data)
    version = r.i16()
    if version not in (0, 1):
        raise CorruptRecord(f"unknown __transaction_state value version {version}")
    flexible = version == 1
    producer_id, epoch, timeout_ms, status = r.unpack(_HEAD_V0)
    try:
        state = TxnState(status)
    except ValueError:
        raise CorruptRecord(f"unknown transaction status {status}") from None
    partitions: set[tuple[str, int]] = set()
    count = r.ccount() if flexible else r.i32()
    for _ in range(max(count, 0)):
        if flexible:
            topic = r.cstr()
            ids = r.int32s(r.ccount())
            r.skip_tags()
        else:
            topic = r.str16()
            ids = r.int32s(r.count32())
        partitions.update((topic, p) for p in ids)
    last_update_ms, start_ms = r.unpack(_TIMES)
    previous = next_id = -1
    client_version = 0
    if flexible:
        for tag, field in r.tags():
            if tag == 0:
                previous = field.i64()
            elif tag == 1:
                next_id = field.i64()
            elif tag == 2:
                client_version = field.i16()
    return TxnValue(producer_id, epoch, timeout_ms, state, frozenset(partitions), last_update_ms, start_ms,
                    previous, next_id, client_version)
