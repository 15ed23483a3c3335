"""Record batches as a producer sends them: split a partition's `records` bytes into v2 batches,
check each one the way a Kafka leader does before it appends, and stamp the broker's fields.

Parsing is aiokafka's (`aiokafka.record`, C-accelerated), the CRC-32C the crc32c library's; this module only
walks the batch boundaries and decides which Kafka error a bad batch gets. A batch's bytes are
stored as sent: the broker rewrites only `baseOffset` (bytes 0–7) and `partitionLeaderEpoch`
(bytes 12–15), both in front of the CRC-32C, which covers attributes onward, so the CRC stays
valid (Kafka's `DefaultRecordBatch` does the same).
"""

from __future__ import annotations

import dataclasses
import struct

from groupd.protocol import ErrorCode

from ..aiokafka_record_code import CorruptRecordException, DefaultRecordBatch, MemoryRecords, UnsupportedCodecError
from ..batch_crc import crc_ok

HEADER_SIZE = 61  # the v2 batch header, up to and including the record count
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes outside `batchLength`
_LENGTH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_COUNT_AT = HEADER_SIZE - 4
_FIRST_TIMESTAMP = struct.Struct(">q")
_FIRST_TIMESTAMP_AT = 27  # baseOffset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2, lastOffsetDelta 4
NO_PRODUCER_ID = -1
_EPOCH = struct.Struct(">i")  # partitionLeaderEpoch, bytes 12..16
_ATTRIBUTES = struct.Struct(">h")  # bytes 21..23
_TRANSACTIONAL = 0x10
_CODEC, _LOG_APPEND_TIME, _CONTROL = 0x07, 0x08, 0x20  # the other attribute bits
# the v2 header, read once per batch (aiokafka's DefaultRecordBatch.HEADER_STRUCT, without building a reader
# on a copy of the batch): baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, firstTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, records count
_HEADER = struct.Struct(">qiibIhiqqqhii")
ZSTD = 4
CREATE_TIME, LOG_APPEND_TIME = 0, 1


class BatchError(Exception):
    """A batch Kafka would refuse: the error code for the partition and a message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclasses.dataclass(slots=True)
class ProducedBatch:
    """One v2 record batch and the header fields the log and the idempotence checks need."""

    data: bytearray | bytes  # the whole batch, baseOffset first (bytes once stamped and stored)
    count: int  # records in it (lastOffsetDelta + 1)
    max_timestamp: int
    timestamp_type: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool = False
    seq: int = 0  # the plane's append order over all partitions (its memory cap drops the oldest)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def last_sequence(self) -> int:
        return _add_sequence(self.base_sequence, self.count - 1)

    def stamp(self, base_offset: int, leader_epoch: int = 0) -> None:
        """Give the batch its offsets and the leader's epoch (the CRC does not cover these bytes); the
        data becomes immutable bytes, which a fetch then joins without copying each batch."""
        data = bytearray(self.data)
        _OFFSET.pack_into(data, 0, base_offset)
        _EPOCH.pack_into(data, 12, leader_epoch)
        self.data = bytes(data)


def _add_sequence(seq: int, delta: int) -> int:
    return (seq + delta) % (2**31)  # sequences wrap at Int32.MAX_VALUE, as in Kafka


def split(records: bytes | None, produce_version: int, max_batch_bytes: int) -> list[ProducedBatch]:
    """The batches of one partition of a Produce request, validated; raises BatchError.

    Kafka (ProduceRequest.validateRecords, LogValidator) refuses: no batch at all, a magic other
    than 2, zstd before Produce v7 (UNSUPPORTED_COMPRESSION_TYPE), a truncated or CRC-failing
    batch (CORRUPT_MESSAGE), a batch over `max.message.bytes` (MESSAGE_TOO_LARGE), an empty batch
    and control batches written by a client (INVALID_RECORD). Kafka also refuses a second batch
    per partition from Produce v3 on; groupd accepts several and gives them consecutive offsets.
    """
    if not records:
        raise BatchError(ErrorCode.invalid_record,
                         f"Produce requests with version {produce_version} must have at least one "
                         "record batch per partition")
    view = memoryview(records)
    batches: list[ProducedBatch] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < HEADER_SIZE:
            raise BatchError(ErrorCode.corrupt_message,
                             f"{len(view) - pos} trailing bytes are shorter than a record batch header")
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or end > len(view):
            raise BatchError(ErrorCode.corrupt_message,
                             f"record batch length {length} does not fit the {len(view) - pos} bytes sent")
        magic = view[pos + 16]
        if magic != 2:
            raise BatchError(ErrorCode.invalid_record,
                             f"Produce requests with version {produce_version} are only allowed to "
                             f"contain record batches with magic version 2 (got {magic})")
        if end - pos > max_batch_bytes:
            raise BatchError(ErrorCode.message_too_large,
                             f"The record batch of {end - pos} bytes is larger than the maximum "
                             f"allowed size of {max_batch_bytes} (records.message.max.bytes)")
        # the one copy of the batch: the broker stamps its offsets into it in place (DataWriter.append)
        data = bytearray(view[pos:end])
        batches.append(_check(data, produce_version))
        pos = end
    return batches


def _check(data: bytearray, produce_version: int) -> ProducedBatch:
    (_, _, _, _, _, attributes, last_offset_delta, _, max_timestamp, producer_id, producer_epoch, base_sequence,
     count) = _HEADER.unpack_from(data)
    if not crc_ok(data):
        raise BatchError(ErrorCode.corrupt_message, "Record batch CRC-32C does not match its contents")
    if count <= 0 or last_offset_delta != count - 1:
        raise BatchError(ErrorCode.invalid_record,
                         f"Record batch of {count} records has last offset delta {last_offset_delta}")
    if attributes & _CONTROL:
        raise BatchError(ErrorCode.invalid_record, "Clients are not allowed to write control records")
    if attributes & _CODEC == ZSTD and produce_version < 7:
        raise BatchError(ErrorCode.unsupported_compression_type,
                         f"Produce requests with version {produce_version} are not allowed to use "
                         "ZStandard compression")
    return ProducedBatch(data, count, max_timestamp, LOG_APPEND_TIME if attributes & _LOG_APPEND_TIME else CREATE_TIME,
                         producer_id, producer_epoch, base_sequence, bool(attributes & _TRANSACTIONAL))


def first_transactional(records: bytes | None) -> tuple[int, int] | None:
    """(producer id, producer epoch) of the first transactional v2 batch in `records`, None without one
    (what a broker verifies with the transaction coordinator before appending)."""
    if not records:
        return None
    view = memoryview(records)
    pos = 0
    while pos + HEADER_SIZE <= len(view):
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        if view[pos + 16] == 2 and _ATTRIBUTES.unpack_from(view, pos + 21)[0] & _TRANSACTIONAL:
            return _OFFSET.unpack_from(view, pos + 43)[0], _ATTRIBUTES.unpack_from(view, pos + 51)[0]
        if length <= 0:
            return None
        pos += LOG_OVERHEAD + length
    return None


def has_transactional(records: bytes | None) -> bool:
    """Whether any v2 batch in a partition's `records` has the transactional attribute (Kafka's
    `RequestUtils.hasTransactionalRecords`, checked before anything else); a malformed tail is
    left to `split`, which refuses it."""
    if not records:
        return False
    view = memoryview(records)
    pos = 0
    while pos + HEADER_SIZE <= len(view):
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        if view[pos + 16] == 2 and _ATTRIBUTES.unpack_from(view, pos + 21)[0] & _TRANSACTIONAL:
            return True
        if length <= 0:
            return False
        pos += LOG_OVERHEAD + length
    return False


def first_record_at_or_after(data: bytes, timestamp: int, from_offset: int = 0) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of a stored batch at or after offset `from_offset` (the
    log start) whose timestamp is ≥ `timestamp`, or None. Reading records needs the batch's codec;
    without it, the batch's base offset (or `from_offset`) and max timestamp stand in (Kafka's answer
    when every record shares the max timestamp)."""
    batch = DefaultRecordBatch(bytes(data))
    try:
        for record in batch:
            if record.offset >= from_offset and record.timestamp >= timestamp:
                return record.offset, record.timestamp
    except (UnsupportedCodecError, CorruptRecordException):
        return max(_OFFSET.unpack_from(data, 0)[0], from_offset), batch.max_timestamp
    return None


def record_timestamp(data: bytes, offset: int) -> int:
    """The timestamp of the record at `offset` in a stored batch: the batch's max timestamp when
    the broker stamped it (LOG_APPEND_TIME), else the record's own. A batch this codec cannot read
    gives its first timestamp (header bytes 27–34), the earliest any of its records can carry."""
    batch = DefaultRecordBatch(bytes(data))
    if batch.timestamp_type == LOG_APPEND_TIME:
        return batch.max_timestamp
    try:
        for record in batch:
            if record.offset >= offset:
                return record.timestamp
    except (UnsupportedCodecError, CorruptRecordException):
        pass
    return _FIRST_TIMESTAMP.unpack_from(data, _FIRST_TIMESTAMP_AT)[0]


def record_with_max_timestamp(data: bytes) -> tuple[int, int]:
    """(offset, timestamp) of the record carrying the batch's max timestamp (its first such)."""
    batch = DefaultRecordBatch(bytes(data))
    best = batch.max_timestamp
    try:
        for record in batch:
            if record.timestamp == best:
                return record.offset, best
    except (UnsupportedCodecError, CorruptRecordException):
        pass
    return _OFFSET.unpack_from(data, 0)[0] + batch.last_offset_delta, best


def keyless_records(data) -> list[int]:
    """Indexes, within the batch, of its records without a key (a compacted topic refuses them). A
    batch this codec cannot read is not checked."""
    try:
        return [i for i, record in enumerate(DefaultRecordBatch(bytes(data))) if record.key is None]
    except (UnsupportedCodecError, CorruptRecordException):
        return []


def iter_batches(data: bytes):
    """The batches of a Fetch's records bytes (for tests and tools)."""
    records = MemoryRecords(bytes(data))
    while records.has_next():
        yield records.next_batch()
