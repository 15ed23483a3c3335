"""Produce checked against the topic's configs as a Kafka leader checks it (storage/records_plane/
validator.py), on both planes of the real server: max.message.bytes, CreateTime timestamps within
message.timestamp.before/after.max.ms (INVALID_TIMESTAMP, Kafka's record errors and message, nothing
written; checked against Apache Kafka 4.3.1 by hand), and LogAppendTime (the broker's time on the batch, answered in log_append_time, read back
by consumers and ListOffsets)."""

from __future__ import annotations

import time

import pytest

from groupd.protocol import ErrorCode as E
from tests.storage.test_records_compaction import create
from tests.storage.test_records_plane import batch, batches_of, fetch, list_offset, produce
from tests.support.process import GroupdProcess, WireClient


@pytest.fixture(scope="module", params=["disk", "memory"])
def server(request, tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp(request.param)), f"records.plane={request.param}").start()
    yield s
    assert s.stop() == 0, s.log()


def now_ms() -> int:
    return int(time.time() * 1000)


def test_timestamps_out_of_the_topics_bounds_are_refused_with_kafkas_record_errors(server):
    with WireClient(server.bootstrap) as c:
        create(c, "ts", message_timestamp_before_max_ms="3600000")
        future, past = now_ms() + 7_200_000, now_ms() - 7_200_000
        for ts in (future, past):
            r = produce(c, "ts", 0, batch(2, ts=ts))
            assert (r.error_code, r.base_offset, r.log_start_offset) == (E.invalid_timestamp, -1, 0)
            assert [e.batch_index for e in r.record_errors] == [0, 1]
            first = r.record_errors[0].batch_index_error_message
            assert first.startswith(f"Timestamp {ts} of message with offset 0 is out of range. "
                                    "The timestamp should be within [")
            assert r.error_message == "One or more records have been rejected due to invalid timestamp"
        assert list_offset(c, "ts", 0, -1).offset == 0  # nothing written
        assert produce(c, "ts", 0, batch(2, ts=now_ms())).error_code is E.none
        assert produce(c, "ts", 0, batch(1, ts=None)).error_code is E.none  # no timestamp: not checked
        # the default topic: any past timestamp, at most an hour ahead
        create(c, "ts-default")
        assert produce(c, "ts-default", 0, batch(1, ts=1)).error_code is E.none
        assert produce(c, "ts-default", 0, batch(1, ts=future)).error_code is E.invalid_timestamp


def test_a_log_append_time_topic_stamps_the_brokers_time(server):
    with WireClient(server.bootstrap) as c:
        create(c, "lat", message_timestamp_type="LogAppendTime")
        before = now_ms()
        r = produce(c, "lat", 0, batch(3, ts=1))  # the producer's timestamps are ignored, not checked
        after = now_ms()
        assert r.error_code is E.none
        stamped = round(r.log_append_time.timestamp() * 1000)
        assert before <= stamped <= after
        (b,) = batches_of(fetch(c, "lat", 0, 0).records)
        assert (b.timestamp_type, b.max_timestamp) == (1, stamped)
        assert b.validate_crc()
        assert list_offset(c, "lat", 0, stamped).offset == 0
        create(c, "ct")
        assert produce(c, "ct", 0, batch(1, ts=now_ms())).log_append_time is None


def test_a_topic_may_allow_batches_larger_than_the_brokers_default(server):
    """max.message.bytes above message.max.bytes (1 MiB): Kafka takes a 1.5 MiB batch into such a
    topic (franz-go's TestIssueFetchLargerThanBrokerMaxReadBytes). The memory plane keeps its own
    bound over every batch, records.message.max.bytes."""
    big = batch(1, value=b"x" * (3 << 19))
    with WireClient(server.bootstrap) as c:
        create(c, "roomy", max_message_bytes=str(4 << 20))
        r = produce(c, "roomy", 0, big)
        if "records.plane=memory" in server.settings:
            assert r.error_code is E.message_too_large and "records.message.max.bytes" in r.error_message
        else:
            assert (r.error_code, r.base_offset) == (E.none, 0)
        create(c, "default-sized")
        r = produce(c, "default-sized", 0, big)
        assert r.error_code is E.message_too_large


def test_a_batch_over_the_topics_max_message_bytes_is_refused(server):
    with WireClient(server.bootstrap) as c:
        create(c, "small", max_message_bytes="200")
        r = produce(c, "small", 0, batch(1, value=b"x" * 300))
        assert r.error_code is E.message_too_large
        assert (r.error_message, r.base_offset) == (None, -1)  # as Kafka answers it
        assert produce(c, "small", 0, batch(1, value=b"x" * 10)).error_code is E.none
