"""segment.ms and retention of the active segment on a data partition's segments, sans-IO and
blocking: Kafka's `LogSegment.shouldRoll` by time (storage/records_plane/rolling.py) and
`UnifiedLog.deletableSegments` taking the active segment when it is not empty, everything durable."""

from __future__ import annotations

import os

from groupd.storage.records_plane.rolling import random_jitter, time_to_roll
from groupd.storage.topic_config import TopicConfig, effective
from tests.storage.test_data_log import batch, opened

T = 1_700_000_000_000


def put(dlog, ts: int, n: int = 2) -> None:
    data = batch(dlog.next_offset, n, ts=ts)
    dlog.write_batches(data, n, [(dlog.next_offset, len(data), ts + n - 1)])


def test_a_segment_rolls_once_its_first_batch_is_older_than_segment_ms_minus_jitter():
    assert not time_to_roll(T, 0, T + 1000, 0, 1000, 0)  # exactly segment.ms: not yet (Kafka's `>`)
    assert time_to_roll(T, 0, T + 1001, 0, 1000, 0)
    assert time_to_roll(T, 0, T + 801, 0, 1000, 200)  # this segment's jitter brings it forward
    assert not time_to_roll(T, 0, T + 800, 0, 1000, 200)


def test_the_age_is_measured_to_the_incoming_timestamp_not_the_clock():
    assert not time_to_roll(T, 0, T + 10, T + 10_000_000, 1000, 0)  # old producer timestamps: no roll


def test_without_a_first_timestamp_the_age_is_the_segments_time_since_creation():
    assert time_to_roll(-1, T, -1, T + 1001, 1000, 0)
    assert not time_to_roll(-1, T, -1, T + 1000, 1000, 0)


def test_jitter_is_drawn_below_the_smaller_of_jitter_and_segment_ms():
    assert random_jitter(1000, 0) == 0
    assert random_jitter(1000, 5000, draw=lambda bound: bound - 1) == 999
    assert random_jitter(10_000, 300, draw=lambda bound: bound - 1) == 299


def test_max_compaction_lag_caps_segment_ms_on_compacted_topics_only():
    compacted = TopicConfig.of(effective({"cleanup.policy": "compact", "max.compaction.lag.ms": "500"}))
    deleted = TopicConfig.of(effective({"max.compaction.lag.ms": "500"}))
    assert compacted.max_segment_ms == 500
    assert deleted.max_segment_ms == deleted.segment_ms == 7 * 24 * 3_600_000


def test_the_active_segment_never_rolls_empty(tmp_path):
    dlog = opened(tmp_path)
    assert not dlog.time_to_roll(T + 10**9, T + 10**9, 1000, 0)
    put(dlog, T)  # its first batch's max timestamp: T + 1
    assert dlog.time_to_roll(T + 1002, 0, 1000, 0)
    assert not dlog.time_to_roll(T + 1001, 0, 1000, 0)


def test_retention_by_time_takes_the_active_segment_when_every_segment_is_expired(tmp_path):
    dlog = opened(tmp_path)
    put(dlog, T)
    dlog.roll(dlog.next_offset)
    put(dlog, T + 500)
    assert dlog.expired_segments(-1, 1000, T + 1200) == dlog.segments[:1]  # the active one is still young
    assert dlog.expired_segments(-1, 1000, T + 1502) == dlog.segments  # the caller rolls an empty one first
    assert dlog.expired_segments(-1, 1000, T + 1502, high_watermark=3) == dlog.segments[:1]  # not durable yet
    dlog.roll(dlog.next_offset)
    assert dlog.expired_segments(-1, 1000, T + 10**9) == dlog.segments[:2]  # an empty active segment stays
    dlog.drop_segments(2)
    assert (dlog.log_start, dlog.next_offset) == (4, 4)


def test_retention_by_bytes_may_take_the_active_segment(tmp_path):
    dlog = opened(tmp_path)
    put(dlog, T)
    assert dlog.expired_segments(0, -1, T) == dlog.segments
    assert dlog.expired_segments(1, -1, T) == []


def test_a_segment_without_timestamps_ages_by_its_files_modification_time(tmp_path):
    dlog = opened(tmp_path)
    put(dlog, -1, n=1)
    path = dlog.segments[0][1]
    os.utime(path, (T / 1000, T / 1000))
    assert dlog.expired_segments(-1, 1000, T + 1001) == dlog.segments
    assert dlog.expired_segments(-1, 1000, T + 1000) == []


def test_a_log_whose_only_segment_is_empty_reloads_at_its_end(tmp_path):
    dlog = opened(tmp_path)
    put(dlog, T)
    put(dlog, T)
    dlog.roll(dlog.next_offset)
    for path in dlog.drop_segments(1):
        os.remove(path)
    dlog.close()
    again = opened(tmp_path)
    assert (again.log_start, again.next_offset, [b for b, _ in again.segments]) == (4, 4, [4])
