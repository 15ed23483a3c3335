"""cleanup.policy=compact on the disk records plane, against the real server: a compacted topic
keeps the latest record per key at its offset once its segments close, the log's start, end and high
watermark stay, a record without a key is refused as Kafka refuses it, what compaction left
survives a kill -9, and a real consumer reading from the beginning sees only the latest values."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from groupd.storage.log import CLEANED_SUFFIX, list_segments
from groupd.storage.records_plane.batches import iter_batches
from groupd.storage.records_plane.cleaner import compact_segments
from groupd.storage.records_plane.segments import data_partition_dir
from tests.storage.test_records_plane import MS, NOW, fetch, list_offset, produce
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient

KEYS, ROUNDS, FILLERS = 20, 8, 150
VALUE = 10 << 10  # 10 KiB a record: the rounds fill several 1 MiB segments


def keyed(key: bytes | None, value: bytes | None, ts: int = NOW) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    b.append(0, timestamp=ts, key=key, value=value, headers=[])
    return bytes(b.build())


def create(c: WireClient, name: str, **configs: str) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}],
        "timeout": 5000 * MS, "validate_only": False})
    assert r.topics[0].error_code is E.none, r.topics[0]


def read_all(c: WireClient, topic: str, offset: int = 0) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record from `offset` up to the high watermark, fetched as a
    consumer does (an empty batch, which compaction leaves, moves it on to the batch's end)."""
    out = []
    while True:
        p = fetch(c, topic, 0, offset)
        assert p.error_code is E.none
        if offset >= p.high_watermark or not p.records:
            return out
        for b in iter_batches(p.records):
            out += [(r.offset, bytes(r.key), None if r.value is None else bytes(r.value))
                    for r in b if r.offset >= offset]
            offset = b.base_offset + b.last_offset_delta + 1


def fill(c: WireClient, topic: str) -> dict[bytes, tuple[int, bytes]]:
    """ROUNDS values of each key, then FILLERS records of keys of their own (so the last round lands
    in closed segments); each key's latest (offset, value)."""
    latest = {}
    plan = [(b"k%d" % k, b"%d-" % r + b"x" * VALUE) for r in range(ROUNDS) for k in range(KEYS)]
    plan += [(b"f%d" % i, b"y" * VALUE) for i in range(FILLERS)]
    for offset, (key, value) in enumerate(plan):
        r = produce(c, topic, 0, keyed(key, value))
        assert (r.error_code, r.base_offset) == (E.none, offset)
        latest[key] = (offset, value)
    return latest


def compacted(c: WireClient, topic: str, latest: dict) -> list | None:
    got = read_all(c, topic)
    keys = [k for _, k, _ in got]
    return got if len(keys) == len(set(keys)) == len(latest) else None


def test_a_compacted_topic_keeps_the_latest_record_per_key_across_a_kill(tmp_path):
    s = GroupdProcess(str(tmp_path), "log.cleaner.backoff.ms=100").start()
    topic = f"cmp-{uuid.uuid4().hex[:8]}"
    try:
        with WireClient(s.bootstrap) as c:
            create(c, topic, cleanup_policy="compact", segment_bytes=str(1 << 20))
            latest = fill(c, topic)
            end = KEYS * ROUNDS + FILLERS
            got = wait_until(lambda: compacted(c, topic, latest), what="the compacted log")
            assert got == sorted((o, k, v) for k, (o, v) in latest.items())  # each at its own offset
            assert list_offset(c, topic, 0, -2).offset == 0 and list_offset(c, topic, 0, -1).offset == end
            first = fetch(c, topic, 0, 0)
            assert first.high_watermark == end and first.log_start_offset == 0
            # a fetch from an offset compacted away gets the batches from the next record on
            assert got[0][0] > 0 and read_all(c, topic, got[0][0] - 1) == got
        assert f"compacted partition={topic}-0 " in s.log()
        s.stop(signal.SIGKILL)
        s.start()
        with WireClient(s.bootstrap) as c:
            assert read_all(c, topic) == got
            assert list_offset(c, topic, 0, -1).offset == end
    finally:
        s.stop()


def test_tombstones_go_once_delete_retention_has_passed_since_their_first_clean(tmp_path):
    s = GroupdProcess(str(tmp_path), "log.cleaner.backoff.ms=100").start()
    try:
        with WireClient(s.bootstrap) as c:
            create(c, "t", cleanup_policy="compact", segment_bytes=str(1 << 20), delete_retention_ms="0")
            plan = [(b"k%d" % k, b"x" * VALUE) for _ in range(ROUNDS) for k in range(KEYS)]
            plan += [(b"k%d" % k, None) for k in range(5)]  # k0..k4 deleted
            plan += [(b"f%d" % i, b"y" * VALUE) for i in range(FILLERS)]
            for key, value in plan:
                assert produce(c, "t", 0, keyed(key, value)).error_code is E.none

            def gone() -> list | None:
                got = read_all(c, "t")
                keys = [k for _, k, _ in got]
                return got if len(keys) == len(set(keys)) == KEYS - 5 + FILLERS else None

            got = wait_until(gone, what="the tombstones' removal")
            assert not {b"k%d" % k for k in range(5)} & {k for _, k, _ in got}
            assert list_offset(c, "t", 0, -1).offset == len(plan)
    finally:
        s.stop()


@pytest.mark.parametrize("crash_after", [0, 1])
def test_a_crash_mid_clean_leaves_a_log_that_loads_with_every_acknowledged_latest_record(tmp_path, crash_after):
    """The server killed (-9) while its cleaner was between writing a segment's `.cleaned` file and
    renaming it (the cleaner's own crash point, run on the killed server's directory): the restarted
    server loads every key's latest record at its offset, then compacts the log itself."""
    s = GroupdProcess(str(tmp_path), "log.cleaner.backoff.ms=3600000").start()
    topic = f"cmp-{uuid.uuid4().hex[:8]}"
    try:
        with WireClient(s.bootstrap) as c:
            create(c, topic, cleanup_policy="compact", segment_bytes=str(1 << 20))
            latest = fill(c, topic)
        s.stop(signal.SIGKILL)
        directory = data_partition_dir(str(tmp_path), topic, 0)
        closed = [path for _, path in list_segments(directory)[:-1]]
        with pytest.raises(RuntimeError, match="injected crash"):
            compact_segments(directory, closed, int(time.time() * 1000), 86_400_000, crash_after=crash_after)
        assert [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)]
        s.settings = ["log.cleaner.backoff.ms=100"]
        s.start()
        with WireClient(s.bootstrap) as c:
            got = read_all(c, topic)  # some segments cleaned, some not: each key's last read is its latest
            assert {k: (o, v) for o, k, v in got} == latest
            assert list_offset(c, topic, 0, -1).offset == KEYS * ROUNDS + FILLERS
            assert wait_until(lambda: compacted(c, topic, latest), what="the compacted log") == \
                sorted((o, k, v) for k, (o, v) in latest.items())
        assert not [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)]
    finally:
        s.stop()


@pytest.mark.parametrize("plane", ["disk", "memory"])
def test_a_record_without_a_key_is_refused_by_a_compacted_topic(tmp_path, plane):
    s = GroupdProcess(str(tmp_path), f"records.plane={plane}").start()
    try:
        with WireClient(s.bootstrap) as c:
            create(c, "compacted", cleanup_policy="compact,delete")
            create(c, "deleted", cleanup_policy="delete")
            r = produce(c, "compacted", 0, keyed(None, b"v"))
            assert (r.error_code, r.base_offset, r.log_start_offset) == (E.invalid_record, -1, 0)
            message = "Compacted topic cannot accept message without key in topic partition compacted-0"
            assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [(0, message)]
            assert r.error_message == ("One or more records have been rejected due to 1 record errors in total, "
                                       f"and only showing the first three errors at most: "
                                       f"[RecordError(batchIndex=0, message='{message}')]")
            assert list_offset(c, "compacted", 0, -1).offset == 0  # nothing written
            assert produce(c, "compacted", 0, keyed(b"k", None)).error_code is E.none  # a tombstone has a key
            assert produce(c, "deleted", 0, keyed(None, b"v")).error_code is E.none
    finally:
        s.stop()


def test_retention_shortens_compact_delete_topics_and_compaction_leaves_delete_topics_alone(tmp_path):
    s = GroupdProcess(str(tmp_path), "log.cleaner.backoff.ms=100", "log.retention.check.interval.ms=100").start()
    old = int(time.time() * 1000) - 60_000
    try:
        with WireClient(s.bootstrap) as c:
            create(c, "c", cleanup_policy="compact", retention_ms="1000", segment_bytes=str(1 << 20))
            create(c, "cd", cleanup_policy="compact,delete", retention_ms="1000", segment_bytes=str(1 << 20))
            create(c, "d", cleanup_policy="delete", segment_bytes=str(1 << 20))
            for topic in ("c", "cd", "d"):
                for i in range(KEYS * ROUNDS):
                    assert produce(c, topic, 0, keyed(b"k%d" % (i % KEYS), b"x" * VALUE, old)).error_code is E.none
            wait_until(lambda: list_offset(c, "cd", 0, -2).offset > 0, what="retention of the compact,delete topic")
            wait_until(lambda: "compacted partition=c-0 " in s.log(), what="the compact topic's clean")
            assert list_offset(c, "c", 0, -2).offset == 0  # compact only: no retention
            assert len(read_all(c, "d")) == KEYS * ROUNDS  # delete only: every record, none compacted
            assert "compacted partition=d-0 " not in s.log()
    finally:
        s.stop()


def test_compaction_lags_and_the_dirty_ratio_decide_when_a_log_is_cleaned(tmp_path):
    """min.cleanable.dirty.ratio=1 is never exceeded, but a dirty segment older than
    max.compaction.lag.ms must be cleaned; a segment younger than min.compaction.lag.ms may not be."""
    s = GroupdProcess(str(tmp_path), "log.cleaner.backoff.ms=100").start()
    old = int(time.time() * 1000) - 60_000
    configs = {"never": {"min_cleanable_dirty_ratio": "1"},
               "young": {"min_compaction_lag_ms": "3600000"},
               "overdue": {"min_cleanable_dirty_ratio": "1", "max_compaction_lag_ms": "1000"},
               "later": {}}

    def filled(topic: str) -> None:
        create(c, topic, cleanup_policy="compact", segment_bytes=str(1 << 20), **configs[topic])
        for i in range(KEYS * ROUNDS):
            assert produce(c, topic, 0, keyed(b"k%d" % (i % KEYS), b"x" * VALUE, old)).error_code is E.none

    try:
        with WireClient(s.bootstrap) as c:
            for topic in ("never", "young", "overdue"):
                filled(topic)
            wait_until(lambda: "compacted partition=overdue-0 " in s.log(), what="the overdue topic's clean")
            assert len(read_all(c, "overdue")) < KEYS * ROUNDS
            # a partition due by its dirty ratio, after them: were the others due, they would go first
            filled("later")
            wait_until(lambda: "compacted partition=later-0 " in s.log(), what="the later topic's clean")
            for topic in ("never", "young"):
                assert f"compacted partition={topic}-0 " not in s.log()
                assert len(read_all(c, topic)) == KEYS * ROUNDS
    finally:
        s.stop()


@pytest.mark.clients
def test_a_real_consumer_reads_only_the_latest_values_after_compaction(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    s = GroupdProcess(str(tmp_path), "log.cleaner.backoff.ms=100").start()
    topic = f"cmp-{uuid.uuid4().hex[:8]}"
    try:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact",
                                                           "segment.bytes": str(1 << 20)})])[topic].result(30)
        # gzip: the cleaner reads compressed batches (and writes what it rebuilds uncompressed)
        p = Producer({"bootstrap.servers": s.bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "gzip"})
        latest = {}
        for r in range(ROUNDS):
            for k in range(KEYS):
                # k0's last is a tombstone: its batch gets the delete horizon (attribute bit 6) when cleaned
                latest[f"k{k}"] = None if (k, r) == (0, ROUNDS - 1) else f"{r}-" + os.urandom(VALUE // 2).hex()
                p.produce(topic, key=f"k{k}", value=latest[f"k{k}"], partition=0)
            p.flush(30)
        for i in range(FILLERS):
            latest[f"f{i}"] = os.urandom(VALUE // 2).hex()  # incompressible: the segments fill
            p.produce(topic, key=f"f{i}", value=latest[f"f{i}"], partition=0)
        assert p.flush(30) == 0

        def consumed() -> dict | None:
            c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                          "enable.auto.commit": False})
            try:
                _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
                c.assign([TopicPartition(topic, 0, 0)])
                got, at = [], 0
                while at < high:
                    m = c.poll(5)
                    if m is None:
                        return None
                    assert not m.error(), m.error()
                    got.append((m.key().decode(), None if m.value() is None else m.value().decode()))
                    at = m.offset() + 1
                return dict(got) if len(got) == len(latest) else None
            finally:
                c.close()

        assert wait_until(consumed, what="only the latest value of each key") == latest
    finally:
        s.stop()
