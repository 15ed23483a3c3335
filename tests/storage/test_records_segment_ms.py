"""segment.ms and retention.ms on the disk records plane, on the wire against the real server: a quiet
topic's one segment rolls by age and retention deletes it like any other (Kafka rolls an empty active
segment first), so earliest reaches latest and a fetch below it is OFFSET_OUT_OF_RANGE; a restart
keeps the log end and produces continue there."""

from __future__ import annotations

import os
import time
import uuid

from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from tests.storage.test_records_plane import MS, batch, batches_of, fetch, list_offset, produce
from tests.support.harness import wait_until
from tests.support.process import WireClient

EARLIEST, LATEST = -2, -1


def create(c: WireClient, configs: dict[str, str]) -> str:
    name = f"sm-{uuid.uuid4().hex[:10]}"
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout": 5000 * MS, "validate_only": False})
    assert r.topics[0].error_code is E.none, r.topics[0]
    return name


def segment_files(data_dir: str, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(data_dir, f"{topic}-0")) if n.endswith(".log"))


def test_a_quiet_topics_only_segment_rolls_and_expires_and_the_log_end_survives_a_restart(start_groupd, tmp_path):
    data = tmp_path / "data"
    settings = ("records.plane=disk", "log.retention.check.interval.ms=200")
    s = start_groupd(*settings, data_dir=data)
    with WireClient(s.bootstrap) as c:
        topic = create(c, {"segment.ms": "100", "retention.ms": "1500"})
        now = int(time.time() * 1000)
        assert produce(c, topic, 0, batch(2, ts=now)).base_offset == 0
        assert produce(c, topic, 0, batch(1, ts=now + 50)).base_offset == 2  # 49 ms after the first batch
        assert segment_files(s.data_dir, topic) == ["00000000000000000000.log"]
        assert produce(c, topic, 0, batch(1, ts=now + 150)).base_offset == 3  # beyond segment.ms: rolled first
        assert segment_files(s.data_dir, topic) == ["00000000000000000000.log", "00000000000000000003.log"]
        assert list_offset(c, topic, 0, EARLIEST).offset == 0

        # every segment, the active one included, expires: the log start moves to the log end
        wait_until(lambda: list_offset(c, topic, 0, EARLIEST).offset == 4, 60, "retention of every segment")
        assert list_offset(c, topic, 0, LATEST).offset == 4
        gone = fetch(c, topic, 0, 0)
        assert (gone.error_code, gone.high_watermark, gone.log_start_offset) == (E.offset_out_of_range, 4, 4)
        wait_until(lambda: segment_files(s.data_dir, topic) == ["00000000000000000004.log"], 30,
                   "the expired segments' files removed")
    assert s.stop() == 0, s.log()

    s = start_groupd(*settings, data_dir=data)
    with WireClient(s.bootstrap) as c:
        assert (list_offset(c, topic, 0, EARLIEST).offset, list_offset(c, topic, 0, LATEST).offset) == (4, 4)
        later = int(time.time() * 1000) + 600_000  # ahead of retention for the rest of the test
        assert produce(c, topic, 0, batch(2, ts=later)).base_offset == 4
        got = fetch(c, topic, 0, 4)
        assert got.error_code is E.none and [b.base_offset for b in batches_of(got.records)] == [4]
        assert list_offset(c, topic, 0, LATEST).offset == 6


def test_a_quiet_compacted_partition_rolls_at_max_compaction_lag_and_is_cleaned(start_groupd):
    """Kafka's maxSegmentMs: max.compaction.lag.ms caps segment.ms on a compacted topic, so the next
    append closes the small segment and the cleaner, which only cleans closed segments, takes it once
    its first record is older than the lag (the dirty ratio alone would never be exceeded here)."""
    from tests.storage.test_records_compaction import keyed, read_all

    s = start_groupd("records.plane=disk", "log.cleaner.backoff.ms=100")
    with WireClient(s.bootstrap) as c:
        topic = create(c, {"cleanup.policy": "compact", "max.compaction.lag.ms": "1000",
                           "min.cleanable.dirty.ratio": "1"})
        now = int(time.time() * 1000)
        for value in (b"1", b"2"):
            assert produce(c, topic, 0, keyed(b"a", value, now)).error_code is E.none
        assert segment_files(s.data_dir, topic) == ["00000000000000000000.log"]
        assert produce(c, topic, 0, keyed(b"b", b"3", now + 1500)).base_offset == 2  # rolls first
        assert segment_files(s.data_dir, topic) == ["00000000000000000000.log", "00000000000000000002.log"]
        wait_until(lambda: f"compacted partition={topic}-0 " in s.log(), 60, "the overdue segment's clean")
        assert read_all(c, topic) == [(1, b"a", b"2"), (2, b"b", b"3")]
