"""The records plane (`records.plane: memory`, the default): the in-memory partition log (sans-IO, no
server), Produce / Fetch / ListOffsets / InitProducerId on the wire against the real server, and
real producers and consumer groups moving messages end to end."""

from __future__ import annotations

import datetime
import struct
import threading
import time
import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from groupd.coordinator.apis import SUPPORTED_VERSIONS
from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import decode_response
from groupd.storage.records_plane.batches import BatchError, iter_batches, split
from groupd.storage.records_plane.log import TopicPartitionLog
from groupd.storage.records_plane.plane import MemoryPlane
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient

# a producer's clock at import (ten minutes back): a real server refuses timestamps over an hour ahead
# (message.timestamp.after.max.ms) and rolls segments by their age (segment.ms)
NOW = int(time.time() * 1000) - 600_000
MS = datetime.timedelta(milliseconds=1)


def batch(n: int = 1, *, ts: int | None = NOW, value: bytes = b"v", pid: int = -1, epoch: int = -1,
          seq: int = -1, transactional: bool = False) -> bytes:
    """A v2 batch of `n` records as a producer builds it (base offset 0)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(transactional),
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=None if ts is None else ts + i, key=f"k{i}".encode(), value=value, headers=[])
    return bytes(b.build())


def batches_of(data: bytes) -> list[DefaultRecordBatch]:
    return list(iter_batches(data))


# ---------------------------------------------------------------------------------------------
# The partition log, sans-IO


def append(log: TopicPartitionLog, data: bytes, now: int = NOW) -> int:
    (b,) = split(data, 8, 1 << 20)
    dup = log.check_producer(b)
    return dup if dup is not None else log.append(b, now)


def test_offsets_are_assigned_and_the_crc_stays_valid():
    log = TopicPartitionLog(1 << 30, -1)
    assert append(log, batch(3)) == 0
    assert append(log, batch(2)) == 3
    assert (log.log_start, log.high_watermark) == (0, 5)
    stored = batches_of(b"".join(b.data for b in log.read(0, 1 << 20, True)))
    assert [b.base_offset for b in stored] == [0, 3]
    assert all(b.validate_crc() for b in batches_of(b"".join(b.data for b in log.batches)))
    assert [r.offset for r in batches_of(log.batches[1].data)[0]] == [3, 4]
    assert struct.unpack_from(">i", log.batches[0].data, 12) == (0,)  # the leader epoch: 0, as a fresh Kafka topic


def test_several_batches_in_one_partition_of_a_produce():
    data = batch(2) + batch(3) + batch(1)
    got = split(data, 8, 1 << 20)
    assert [b.count for b in got] == [2, 3, 1]


@pytest.mark.parametrize(("data", "error"), [
    (b"", E.invalid_record),
    (None, E.invalid_record),
    (batch(1)[:-3], E.corrupt_message),  # truncated
    (batch(1)[:30] + bytes([batch(1)[30] ^ 0xFF]) + batch(1)[31:], E.corrupt_message),  # CRC
    (batch(1)[:16] + b"\x01" + batch(1)[17:], E.invalid_record),  # magic 1
])
def test_bad_batches_get_kafkas_errors(data, error):
    with pytest.raises(BatchError) as e:
        split(data, 8, 1 << 20)
    assert e.value.error is error


def test_a_batch_over_message_max_bytes_is_too_large():
    with pytest.raises(BatchError) as e:
        split(batch(1, value=b"x" * 2000), 8, 1000)
    assert e.value.error is E.message_too_large


def test_read_honours_max_bytes_but_always_returns_one_whole_batch():
    log = TopicPartitionLog(1 << 30, -1)
    for _ in range(4):
        append(log, batch(1, value=b"x" * 100))
    size = log.batches[0].size
    assert len(log.read(0, size * 2, False)) == 2
    assert len(log.read(0, size * 2 - 1, False)) == 1
    assert log.read(0, 10, False) == []
    assert len(log.read(0, 10, True)) == 1  # the first batch comes whole, however large
    assert log.read(2, size * 10, False)[0] is log.batches[2]
    assert log.read(4, size * 10, True) == []  # at the high watermark: nothing yet


def test_a_fetch_inside_a_batch_gets_the_whole_batch():
    log = TopicPartitionLog(1 << 30, -1)
    append(log, batch(5))
    append(log, batch(5))
    assert log.read(7, 1 << 20, True) == [log.batches[1]]
    assert log.bytes_from(10, 1 << 20) == 0
    assert log.bytes_from(9, 1 << 20) == log.batches[1].size


def test_retention_by_bytes_drops_the_oldest_and_moves_the_log_start():
    one = len(batch(2, value=b"x" * 100))
    log = TopicPartitionLog(one * 2, -1)
    for _ in range(5):
        append(log, batch(2, value=b"x" * 100))
    assert log.size == one * 2 and len(log.batches) == 2
    assert (log.log_start, log.high_watermark) == (6, 10)
    assert log.out_of_range(5) and not log.out_of_range(6) and not log.out_of_range(10)
    assert log.out_of_range(11)


def test_retention_by_bytes_keeps_the_newest_batch_however_large():
    log = TopicPartitionLog(10, -1)
    append(log, batch(1))
    append(log, batch(1))
    assert len(log.batches) == 1 and log.log_start == 1


def test_retention_by_time_uses_the_batch_max_timestamp_at_the_periodic_check():
    log = TopicPartitionLog(1 << 30, 60_000)
    append(log, batch(2, ts=NOW - 120_000), now=NOW)  # already too old, yet readable until the check
    append(log, batch(2, ts=NOW - 30_000), now=NOW)
    assert (log.log_start, log.high_watermark, len(log.batches)) == (0, 4, 2)
    assert log.enforce_retention(NOW) == 1
    assert (log.log_start, log.high_watermark, len(log.batches)) == (2, 4, 1)
    assert log.enforce_retention(NOW + 31_000) == 1
    assert (log.log_start, log.high_watermark, log.batches) == (4, 4, [])


def plane_append(plane: MemoryPlane, key, data: bytes, now: int = NOW):
    r = plane.append(key, data, 8, now)
    assert r.error is E.none
    return r


def test_memory_cap_drops_the_oldest_batches_of_any_partition():
    one = len(batch(1, value=b"x" * 100))
    plane = MemoryPlane(1 << 30, -1, 1 << 20, max_bytes=3 * one)
    a, b = ("topic-a", 0), ("topic-b", 0)
    plane_append(plane, a, batch(1, value=b"x" * 100))
    plane_append(plane, b, batch(1, value=b"x" * 100))
    plane_append(plane, a, batch(1, value=b"x" * 100))
    assert plane.size == 3 * one
    r = plane_append(plane, b, batch(1, value=b"x" * 100))  # the oldest (a's first) goes
    assert (r.base_offset, plane.size) == (1, 3 * one)
    assert (plane.peek(a).log_start, plane.peek(a).high_watermark) == (1, 2)
    assert plane.peek(b).log_start == 0
    plane_append(plane, a, batch(1, value=b"x" * 100))  # then b's first
    assert (plane.peek(b).log_start, plane.peek(a).log_start) == (1, 1)
    assert plane.size == sum(lg.size for lg in (plane.peek(a), plane.peek(b))) == 3 * one


def test_memory_cap_counts_what_partition_retention_and_time_dropped():
    one = len(batch(1, value=b"x" * 100))
    plane = MemoryPlane(2 * one, 60_000, 1 << 20, max_bytes=100 * one)
    a = ("topic-a", 0)
    for _ in range(50):  # per-partition retention keeps two; the heap of oldest batches stays small
        plane_append(plane, a, batch(1, value=b"x" * 100))
    assert plane.size == 2 * one and len(plane._oldest) <= 2 * len(plane) + 64
    assert plane.enforce_retention(NOW + 120_000) == 2
    assert plane.size == 0 and plane.peek(a).log_start == 50


def test_delete_records_moves_the_log_start_and_drops_the_batches_wholly_below_it():
    one = len(batch(2))
    plane = MemoryPlane(1 << 30, -1, 1 << 20, max_bytes=1 << 30)
    key = ("topic-a", 0)
    for _ in range(3):  # batches 0-1, 2-3, 4-5
        plane_append(plane, key, batch(2))
    assert plane.delete_records(key, 3) == (E.none, 3)
    log = plane.peek(key)
    assert (log.log_start, log.bases, plane.size, log.size) == (3, [2, 4], 2 * one, 2 * one)
    assert plane.delete_records(key, 1) == (E.none, 3)  # never back
    assert plane.delete_records(key, 7) == (E.offset_out_of_range, -1)
    assert plane.delete_records(key, -2) == (E.offset_out_of_range, -1)
    assert plane.delete_records(key, -1) == (E.none, 6)  # the high watermark
    assert (log.batches, plane.size, log.out_of_range(5), log.out_of_range(6)) == ([], 0, True, False)
    assert plane.delete_records(("topic-b", 0), 0) == (E.none, 0)  # never written: empty at 0
    assert plane.delete_records(("topic-b", 0), 1) == (E.offset_out_of_range, -1)


def test_offsets_by_timestamp_start_at_the_log_start():
    log = TopicPartitionLog(1 << 30, -1)
    append(log, batch(3, ts=1000))  # 1000, 1001, 1002
    append(log, batch(3, ts=2000))
    log.delete_records_before(1)
    assert log.offset_for_timestamp(0) == (1, 1001)
    assert log.offset_for_timestamp(2001) == (4, 2001)


def test_offsets_by_timestamp():
    log = TopicPartitionLog(1 << 30, -1)
    append(log, batch(3, ts=1000))  # 1000, 1001, 1002
    append(log, batch(3, ts=2000))  # 2000, 2001, 2002
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1001)
    assert log.offset_for_timestamp(1500) == (3, 2000)
    assert log.offset_for_timestamp(2002) == (5, 2002)
    assert log.offset_for_timestamp(2003) is None
    assert log.max_timestamp() == (5, 2002)


def test_idempotent_producer_sequences():
    log = TopicPartitionLog(1 << 30, -1)
    assert append(log, batch(2, pid=7, epoch=0, seq=0)) == 0
    assert append(log, batch(3, pid=7, epoch=0, seq=2)) == 2
    assert append(log, batch(3, pid=7, epoch=0, seq=2)) == 2  # a retry: the original offsets
    assert log.high_watermark == 5
    with pytest.raises(BatchError) as e:
        append(log, batch(1, pid=7, epoch=0, seq=9))
    assert e.value.error is E.out_of_order_sequence_number
    assert append(log, batch(1, pid=7, epoch=1, seq=0)) == 5  # a new epoch restarts at 0
    with pytest.raises(BatchError) as e:
        append(log, batch(1, pid=7, epoch=0, seq=5))
    assert e.value.error is E.invalid_producer_epoch
    assert append(log, batch(1, pid=8, epoch=0, seq=42)) == 6  # unknown producer: accepted


def test_idle_producers_are_forgotten_after_a_day():
    log = TopicPartitionLog(1 << 30, -1)
    append(log, batch(1, pid=7, epoch=0, seq=0), now=NOW)
    with pytest.raises(BatchError):
        append(log, batch(1, pid=7, epoch=0, seq=5), now=NOW + 1000)
    append(log, batch(1, pid=8, epoch=0, seq=0), now=NOW + 86_400_001)  # pid 7 idle for over a day
    assert append(log, batch(1, pid=7, epoch=0, seq=5), now=NOW + 86_400_002) == 2  # unknown again


# ---------------------------------------------------------------------------------------------
# The wire, against the real server


@pytest.fixture(scope="module", params=["memory", "disk"])
def server(request, tmp_path_factory):
    """The server of the wire tests, once per plane: both answer the same."""
    s = GroupdProcess(str(tmp_path_factory.mktemp(f"groupd-{request.param}")), f"records.plane={request.param}",
                      "topics=r1:1,r3:3", "num.partitions=2", "group.initial.rebalance.delay.ms=0",
                      "group.min.session.timeout.ms=1000").start()
    yield s
    assert s.stop() == 0, s.log()


def produce(c: WireClient, topic: str, partition: int, records: bytes | None, version: int = 8,
            acks: int = -1, transactional_id: str | None = None):
    r = c.request(ApiKey.PRODUCE, version, {"transactional_id": transactional_id, "acks": acks,
                                            "timeout": 5000 * MS, "topic_data": [
                                                {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def fetch_request(parts: list[tuple[str, int, int]], wait_ms: int = 0, min_bytes: int = 1,
                  max_bytes: int = 50 << 20, partition_max: int = 1 << 20) -> dict:
    topics: dict[str, list] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append({
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": partition_max})
    return {"replica_id": -1, "max_wait": wait_ms * MS, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "", "cluster_id": None,
            "topics": [{"topic": t, "topic_id": uuid.UUID(int=0), "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": []}


def fetch(c: WireClient, topic: str, partition: int, offset: int, version: int = 12, **kw):
    r = c.request(ApiKey.FETCH, version, fetch_request([(topic, partition, offset)], **kw))
    return r.responses[0].partitions[0]


def list_offset(c: WireClient, topic: str, partition: int, timestamp: int, version: int = 9):
    r = c.request(ApiKey.LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]})
    return r.topics[0].partitions[0]


def fresh_topic(c: WireClient, partitions: int = 1) -> str:
    name = f"rp-{uuid.uuid4().hex[:10]}"
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions,
                                                       "replication_factor": 1, "assignments": [], "configs": []}],
                                           "timeout": 5000 * MS, "validate_only": False})
    assert r.topics[0].error_code is E.none
    return name


def test_produce_and_fetch_at_every_version(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c)
        lo, hi = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
        for i, version in enumerate(range(lo, hi + 1)):
            p = produce(c, topic, 0, batch(2), version=version)
            assert (p.error_code, p.base_offset) == (E.none, 2 * i), version
            if version >= 5:
                assert p.log_start_offset == 0
        end = 2 * (hi - lo + 1)
        lo, hi = SUPPORTED_VERSIONS[ApiKey.FETCH]
        for version in range(lo, hi + 1):
            f = fetch(c, topic, 0, 3, version=version)
            assert (f.error_code, f.high_watermark, f.last_stable_offset) == (E.none, end, end), version
            got = batches_of(f.records)
            assert [b.base_offset for b in got] == list(range(2, end, 2))  # from the batch holding 3
            assert all(b.validate_crc() for b in batches_of(f.records))


def test_several_batches_in_one_produce_get_consecutive_offsets(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c)
        assert produce(c, topic, 0, batch(2) + batch(3)).base_offset == 0
        assert produce(c, topic, 0, batch(1)).base_offset == 5
        f = fetch(c, topic, 0, 0)
        assert [(b.base_offset, b.next_offset) for b in batches_of(f.records)] == [(0, 2), (2, 5), (5, 6)]


def test_produce_errors(server):
    with WireClient(server.bootstrap) as c:
        assert produce(c, "r3", 7, batch(1)).error_code is E.unknown_topic_or_partition
        assert produce(c, "rp-never-created", 0, batch(1)).error_code is E.unknown_topic_or_partition
        assert produce(c, "r3", 0, batch(1), acks=2).error_code is E.invalid_required_acks
        assert produce(c, "r3", 0, b"\x00" * 70).error_code is E.corrupt_message
        # transactional records need the request's transactional id (KafkaApis: TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        p = produce(c, "r3", 0, batch(1, transactional=True, pid=1, epoch=0, seq=0))
        assert p.error_code is E.transactional_id_authorization_failed
        assert produce(c, "r3", 0, batch(1), transactional_id="tx").error_code is E.none  # plain records: accepted


def test_acks_0_appends_without_a_reply(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c)
        _, frame = c.frame(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": 0, "timeout": 5000 * MS,
                                               "topic_data": [{"name": topic, "partition_data": [
                                                   {"index": 0, "records": batch(4)}]}]})
        c.send_raw(frame)
        # the next reply on the connection is ListOffsets'; the disk plane's high watermark is the
        # durable end, which an unanswered (acks=0) append reaches at its fsync
        wait_until(lambda: list_offset(c, topic, 0, -1).offset == 4, what="the acks=0 batch appended")


def test_fetch_limits(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c, 2)
        for p in (0, 1):
            for _ in range(3):
                produce(c, topic, p, batch(1, value=b"x" * 1000))
        size = len(batch(1, value=b"x" * 1000))
        r = c.request(ApiKey.FETCH, 12, fetch_request([(topic, 0, 0), (topic, 1, 0)], partition_max=2 * size))
        assert [len(batches_of(p.records)) for p in r.responses[0].partitions] == [2, 2]
        r = c.request(ApiKey.FETCH, 12, fetch_request([(topic, 0, 0), (topic, 1, 0)], max_bytes=4 * size))
        assert [len(batches_of(p.records)) for p in r.responses[0].partitions] == [3, 1]
        # a first batch larger than both limits still comes whole; the next partition gets none
        r = c.request(ApiKey.FETCH, 12, fetch_request([(topic, 0, 0), (topic, 1, 0)], max_bytes=10, partition_max=10))
        assert [len(batches_of(p.records)) for p in r.responses[0].partitions] == [1, 0]


def test_offset_out_of_range_only_where_true(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c)
        assert fetch(c, topic, 0, 0).error_code is E.none  # empty partition, at the end: fine
        assert fetch(c, topic, 0, 1).error_code is E.offset_out_of_range
        produce(c, topic, 0, batch(3))
        for offset in (0, 2, 3):
            assert fetch(c, topic, 0, offset).error_code is E.none, offset
        f = fetch(c, topic, 0, 4)
        assert (f.error_code, f.high_watermark, f.log_start_offset) == (E.offset_out_of_range, 3, 0)
        assert fetch(c, topic, 0, -1).error_code is E.offset_out_of_range


def test_list_offsets(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c)
        assert (list_offset(c, topic, 0, -2).offset, list_offset(c, topic, 0, -1).offset) == (0, 0)
        assert list_offset(c, topic, 0, 0).offset == -1
        t = int(time.time() * 1000) - 60_000  # recent enough for the 7-day retention
        produce(c, topic, 0, batch(3, ts=t))  # t, t+1, t+2
        produce(c, topic, 0, batch(2, ts=t + 4000))  # t+4000, t+4001
        assert list_offset(c, topic, 0, -2).offset == 0
        for version in range(SUPPORTED_VERSIONS[ApiKey.LIST_OFFSETS][0], 10):
            assert list_offset(c, topic, 0, -1, version=version).offset == 5, version
        r = list_offset(c, topic, 0, t + 1)
        assert (r.offset, r.timestamp) == (1, t + 1)
        r = list_offset(c, topic, 0, t + 1000)
        assert (r.offset, r.timestamp) == (3, t + 4000)
        assert list_offset(c, topic, 0, t + 4002).offset == -1
        r = list_offset(c, topic, 0, -3)
        assert (r.offset, r.timestamp) == (4, t + 4001)
        assert list_offset(c, topic, 0, -4).offset == 0
        assert list_offset(c, topic, 0, -5).offset == -1
        assert list_offset(c, "r3", 9, -1).error_code is E.unknown_topic_or_partition


def test_held_fetch_is_answered_as_soon_as_data_arrives(server):
    with WireClient(server.bootstrap) as c, WireClient(server.bootstrap) as p:
        topic = fresh_topic(c)
        started = time.monotonic()
        cid, frame = c.frame(ApiKey.FETCH, 12, fetch_request([(topic, 0, 0)], wait_ms=10_000))
        c.send_raw(frame)
        time.sleep(0.3)
        produce(p, topic, 0, batch(2))
        got, r = decode_response(ApiKey.FETCH, 12, c.read_frame())
        elapsed = time.monotonic() - started
        assert got == cid and 0.3 <= elapsed < 3, elapsed
        assert [b.base_offset for b in batches_of(r.responses[0].partitions[0].records)] == [0]


def test_held_fetch_waits_for_min_bytes_then_max_wait(server):
    with WireClient(server.bootstrap) as c, WireClient(server.bootstrap) as p:
        topic = fresh_topic(c)
        produce(p, topic, 0, batch(1))
        started = time.monotonic()
        f = fetch(c, topic, 0, 0, wait_ms=700, min_bytes=1 << 20)  # never enough: the max wait
        assert 0.6 < time.monotonic() - started < 3
        assert len(batches_of(f.records)) == 1
        started = time.monotonic()
        f = fetch(c, topic, 0, 1, wait_ms=600)  # at the end: waits, answers empty, no error
        assert 0.5 < time.monotonic() - started < 3
        assert (f.error_code, f.records) == (E.none, b"")


def test_init_producer_id(server):
    with WireClient(server.bootstrap) as c:
        lo, hi = SUPPORTED_VERSIONS[ApiKey.INIT_PRODUCER_ID]
        ids = set()
        for version in range(lo, hi + 1):
            r = c.request(ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": None, "transaction_timeout": 60_000 * MS,
                                                             "producer_id": -1, "producer_epoch": -1})
            assert (r.error_code, r.producer_epoch) == (E.none, 0)
            ids.add(r.producer_id)
        assert len(ids) == hi - lo + 1
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx-1", "transaction_timeout": 60_000 * MS,
                                                   "producer_id": -1, "producer_epoch": -1})
        # the transaction coordinator's id (tests/apis/test_transactions_wire.py), from the same allocator
        assert (r.error_code, r.producer_epoch) == (E.none, 0) and r.producer_id not in ids


def test_a_deleted_and_recreated_topic_starts_empty(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c)
        produce(c, topic, 0, batch(3))
        r = c.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                                "timeout": 5000 * MS})
        assert r.responses[0].error_code is E.none
        c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                                        "assignments": [], "configs": []}],
                                            "timeout": 5000 * MS, "validate_only": False})
        assert list_offset(c, topic, 0, -1).offset == 0


def test_retention_on_the_wire(start_groupd):
    one = len(batch(1, value=b"x" * 200))
    s = start_groupd("records.plane=memory", "topics=ret:1,old:1", f"records.retention.bytes={2 * one}",
                     "records.retention.ms=60000", "log.retention.check.interval.ms=300")
    with WireClient(s.bootstrap) as c:
        for _ in range(5):
            produce(c, "ret", 0, batch(1, value=b"x" * 200, ts=int(time.time() * 1000)))
        assert (list_offset(c, "ret", 0, -2).offset, list_offset(c, "ret", 0, -1).offset) == (3, 5)
        f = fetch(c, "ret", 0, 2)
        assert (f.error_code, f.log_start_offset) == (E.offset_out_of_range, 3)
        assert [b.base_offset for b in batches_of(fetch(c, "ret", 0, 3).records)] == [3, 4]
        # by time: a batch older than retention.ms goes once every batch before it has gone
        # (Kafka deletes expired segments oldest first and stops at the first one it keeps)
        old = int(time.time() * 1000) - 3_600_000
        p = produce(c, "old", 0, batch(2, ts=old))
        assert (p.base_offset, p.log_start_offset) == (0, 0)  # kept until the next retention check
        wait_until(lambda: list_offset(c, "old", 0, -2).offset == 2, 30, "the retention check")
        assert list_offset(c, "old", 0, -1).offset == 2
        assert fetch(c, "old", 0, 0).error_code is E.offset_out_of_range
        assert fetch(c, "old", 0, 2).error_code is E.none
        p = produce(c, "ret", 0, batch(1, ts=old))
        assert p.log_start_offset == 3  # behind newer batches: kept


def test_memory_cap_over_all_partitions_on_the_wire(start_groupd):
    one = len(batch(1, value=b"x" * 500))
    s = start_groupd("records.plane=memory", "topics=older:1,newer:1", f"records.memory.max.bytes={3 * one}")
    with WireClient(s.bootstrap) as c:
        for topic in ("older", "older", "newer"):
            assert produce(c, topic, 0, batch(1, value=b"x" * 500)).error_code is E.none
        p = produce(c, "newer", 0, batch(1, value=b"x" * 500))  # over the cap: older's first batch goes
        assert (p.base_offset, p.log_start_offset) == (1, 0)
        assert (list_offset(c, "older", 0, -2).offset, list_offset(c, "older", 0, -1).offset) == (1, 2)
        assert fetch(c, "older", 0, 0).error_code is E.offset_out_of_range
        assert [b.base_offset for b in batches_of(fetch(c, "older", 0, 1).records)] == [1]


def test_plane_none_keeps_the_empty_data_plane(start_groupd):
    s = start_groupd("records.plane=none", "topics=t:1")
    with WireClient(s.bootstrap) as c:
        p = produce(c, "t", 0, batch(1))
        assert p.error_code is E.invalid_request and "records.plane=disk" in p.error_message
        f = fetch(c, "t", 0, 5)
        assert (f.error_code, f.high_watermark, f.records) == (E.none, 5, b"")
        assert list_offset(c, "t", 0, -1).offset == 0


# ---------------------------------------------------------------------------------------------
# Real clients


def consume_all(bootstrap: str, topic: str, group: str, expected: int, members: int = 2,
                timeout: float = 60.0) -> tuple[dict, list[set]]:
    """`members` confluent-kafka consumers in one group until together they saw `expected`
    distinct keys; (key -> value, each member's partitions)."""
    from confluent_kafka import Consumer

    seen: dict[bytes, bytes] = {}
    parts: list[set] = [set() for _ in range(members)]
    lock = threading.Lock()
    stop = threading.Event()

    def run(i: int) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "enable.auto.commit": True})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                m = c.poll(0.2)
                if m is None or m.error():
                    continue
                with lock:
                    seen[m.key()] = m.value()
                    parts[i].add(m.partition())
                    if len(seen) >= expected:
                        stop.set()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    stop.wait(timeout)
    stop.set()
    for t in threads:
        t.join(30)
    return seen, parts


@pytest.mark.clients
def test_confluent_producer_to_a_consumer_group(server):
    from confluent_kafka import Producer

    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "acks": "all"})
    errors: list = []
    for i in range(2000):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
        if i == 0:
            p.flush(10)  # the topic is auto-created by the first Metadata
    assert p.flush(30) == 0 and not errors, errors
    seen, parts = consume_all(server.bootstrap, topic, f"g-{topic}", 2000)
    assert len(seen) == 2000 and all(seen[f"k{i}".encode()] == f"v{i}".encode() for i in range(2000))
    assert set().union(*parts) == {0, 1}, parts  # the group read every partition


@pytest.mark.clients
def test_idempotent_producers_get_producer_ids(server):
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    topic = f"idem-{uuid.uuid4().hex[:8]}"
    kp = KafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True, acks="all", linger_ms=5)
    futures = [kp.send(topic, key=f"k{i}".encode(), value=b"kafka-python") for i in range(500)]
    kp.flush(30)
    offsets = [f.get(10) for f in futures]
    pid = kp._transaction_manager.producer_id_and_epoch
    kp.close(10)
    assert pid.producer_id >= 0 and pid.epoch == 0
    assert len({(m.partition, m.offset) for m in offsets}) == 500

    cp = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list = []
    for i in range(500, 1000):
        cp.produce(topic, key=f"k{i}".encode(), value=b"librdkafka",
                   on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert cp.flush(30) == 0 and not errors, errors

    with WireClient(server.bootstrap) as c:
        ends = [list_offset(c, topic, p, -1).offset for p in range(2)]
        assert sum(ends) == 1000
        for p in range(2):
            f = fetch(c, topic, p, 0, max_bytes=50 << 20, partition_max=50 << 20)
            stored = batches_of(f.records)
            assert stored and all(b.producer_id >= 0 and b.base_sequence >= 0 for b in stored)
    seen, _ = consume_all(server.bootstrap, topic, f"g-{topic}", 1000)
    assert len(seen) == 1000


@pytest.mark.clients
def test_retention_moves_the_log_start_for_a_real_consumer(start_groupd):
    from confluent_kafka import Consumer, Producer, TopicPartition

    s = start_groupd("records.plane=memory", "topics=ret:1", "records.retention.bytes=20000",
                     "group.initial.rebalance.delay.ms=0")
    p = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(100):
        p.produce("ret", key=f"k{i}".encode(), value=b"x" * 1000, partition=0)
        p.poll(0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "ret-g", "auto.offset.reset": "earliest"})
    low, high = c.get_watermark_offsets(TopicPartition("ret", 0), timeout=10)
    assert high == 100 and 0 < low < 100, (low, high)
    c.assign([TopicPartition("ret", 0, 0)])  # below the log start: the consumer resets to earliest
    first = None
    deadline = time.monotonic() + 30
    while first is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            first = m.offset()
    c.close()
    assert first == low


@pytest.mark.parametrize("version", [4, 12])
def test_fetch_of_an_unknown_partition_carries_empty_records_not_null(server, version):
    """Kafka answers an error partition with MemoryRecords.EMPTY: librdkafka reads a null record set
    (size -1) as a parse failure of the whole response ("invalid MessageSetSize -1"), which a
    consumer fetching a just-deleted topic hit."""
    with WireClient(server.bootstrap) as c:
        p = fetch(c, "rp-never-created", 0, 0, version=version)
    assert (p.error_code, p.records) == (E.unknown_topic_or_partition, b"")


def test_disk_retention_deletes_whole_closed_segments(start_groupd, tmp_path):
    """The disk plane's retention (Kafka's, by whole segments): past `log.retention.bytes` the oldest
    closed segments go at the periodic check, the log start moves to the first one kept, and their
    files are gone; the active segment always stays."""
    import os

    segment, retention = 1 << 20, 2_500_000  # Kafka 4's smallest segment.bytes (KIP-1030)
    s = start_groupd("records.plane=disk", "topics=kept:1", f"log.segment.bytes={segment}",
                     f"log.retention.bytes={retention}", "log.retention.check.interval.ms=300")
    directory = os.path.join(s.data_dir, "kept-0")

    def on_disk() -> tuple[int, int]:  # (first segment's base offset, bytes of every segment)
        logs = [n for n in os.listdir(directory) if n.endswith(".log")]
        return min(int(n[:20]) for n in logs), sum(os.path.getsize(os.path.join(directory, n)) for n in logs)

    with WireClient(s.bootstrap) as c:
        for _ in range(60):
            assert produce(c, "kept", 0, batch(1, value=b"x" * 100_000, ts=int(time.time() * 1000))).error_code is E.none

        def settled() -> int | None:
            # Checks may run while the batches arrive and delete in several passes: wait for the last,
            # the log under retention + one segment and its start where the files begin.
            start = list_offset(c, "kept", 0, -2).offset
            first, kept = on_disk()
            return start if start > 0 and first == start and kept < retention + segment + 200_000 else None

        start = wait_until(settled, 30, "the retention check and the files of the deleted segments removed")
        assert list_offset(c, "kept", 0, -1).offset == 60
        assert fetch(c, "kept", 0, start - 1).error_code is E.offset_out_of_range
        assert [b.base_offset for b in batches_of(fetch(c, "kept", 0, start).records)][0] == start
    assert on_disk()[1] >= retention  # whole segments only: never below the retention
