"""What a leader checks of a partition's batches against its topic's configs before it appends
them, and the broker's stamp, as Kafka's UnifiedLog and LogValidator do:

- a batch larger than the topic's `max.message.bytes`: MESSAGE_TOO_LARGE;
- per record, Kafka's record errors: on a compacted topic a record without a key; under
  `message.timestamp.type=CreateTime` a timestamp more than `message.timestamp.before.max.ms` in the
  past or `message.timestamp.after.max.ms` in the future (INVALID_TIMESTAMP when any record's
  timestamp is refused, INVALID_RECORD with Kafka's summary of the first three otherwise);
- under `LogAppendTime` each batch gets the broker's time as its max timestamp and the
  LOG_APPEND_TIME attribute, its CRC recomputed (the records' own timestamps are then ignored by
  every reader, as in Kafka), and the answer carries that time.
Nothing is appended when a check fails.
"""

from __future__ import annotations

import dataclasses
import struct

from groupd.protocol import ErrorCode

from ..aiokafka_record_code import CorruptRecordException, DefaultRecordBatch, UnsupportedCodecError
from ..batch_crc import set_crc
from ..topic_config import TopicConfig
from .batches import CREATE_TIME, ProducedBatch

_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT, _MAX_TIMESTAMP_AT = 21, 35
_MAX_TIMESTAMP = struct.Struct(">q")
_LOG_APPEND_TIME_BIT = 0x08
NO_TIMESTAMP = -1


@dataclasses.dataclass(frozen=True, slots=True)
class Refused:
    error: ErrorCode
    message: str | None
    record_errors: tuple[tuple[int, str], ...] = ()


def check(batches: list[ProducedBatch], partition: str, config: TopicConfig, now_ms: int) -> Refused | None:
    """Refused, or None when the batches may be appended (stamped first under LogAppendTime)."""
    for batch in batches:
        if batch.size > config.max_message_bytes:  # Kafka's answer carries no message for it
            return Refused(ErrorCode.message_too_large, None)
    create_time = config.message_timestamp_type == "CreateTime"
    if config.compact or (create_time and not _all_in_bounds(batches, config, now_ms)):
        refused = _record_errors(batches, partition, config, now_ms, create_time)
        if refused is not None:
            return refused
    if not create_time:
        for batch in batches:
            stamp_log_append_time(batch, now_ms)
    return None


def _all_in_bounds(batches, config: TopicConfig, now_ms: int) -> bool:
    """Whether the headers alone show every record's timestamp within bounds, so that no record need be
    read: nothing can be too old when the bound lies before the epoch (the default, Long.MAX_VALUE),
    and nothing too new when the batch's max timestamp is not."""
    if now_ms - config.message_timestamp_before_max_ms > 0:
        return False
    high = now_ms + config.message_timestamp_after_max_ms
    return all(batch.max_timestamp <= high for batch in batches)


def _record_errors(batches, partition: str, config: TopicConfig, now_ms: int, create_time: bool) -> Refused | None:
    low, high = now_ms - config.message_timestamp_before_max_ms, now_ms + config.message_timestamp_after_max_ms
    errors: list[tuple[int, str]] = []
    timestamps_refused = False
    seen = 0
    for batch in batches:
        try:
            records = list(DefaultRecordBatch(bytes(batch.data)))
        except (UnsupportedCodecError, CorruptRecordException):  # a codec groupd cannot read: not checked
            seen += batch.count
            continue
        check_times = create_time and batch.timestamp_type == CREATE_TIME
        for i, record in enumerate(records):
            if config.compact and record.key is None:
                errors.append((seen + i, "Compacted topic cannot accept message without key in topic partition "
                               + partition))
            elif check_times and record.timestamp != NO_TIMESTAMP and not low <= record.timestamp <= high:
                timestamps_refused = True
                errors.append((seen + i, f"Timestamp {record.timestamp} of message with offset {record.offset} is "
                               f"out of range. The timestamp should be within [{low}, {high}]"))
        seen += batch.count
    if not errors:
        return None
    if timestamps_refused:
        return Refused(ErrorCode.invalid_timestamp, "One or more records have been rejected due to invalid timestamp",
                       tuple(errors))
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return Refused(ErrorCode.invalid_record, f"One or more records have been rejected due to {len(errors)} record "
                   f"errors in total, and only showing the first three errors at most: [{shown}]", tuple(errors))


def stamp_log_append_time(batch: ProducedBatch, now_ms: int) -> None:
    """Kafka's DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, now): attributes, max timestamp, CRC."""
    data = bytearray(batch.data)
    (attributes,) = _ATTRIBUTES.unpack_from(data, _ATTRIBUTES_AT)
    _ATTRIBUTES.pack_into(data, _ATTRIBUTES_AT, attributes | _LOG_APPEND_TIME_BIT)
    _MAX_TIMESTAMP.pack_into(data, _MAX_TIMESTAMP_AT, now_ms)
    set_crc(data)
    batch.data = data
    batch.max_timestamp = now_ms
    batch.timestamp_type = 1
