"""segment.ms and retention on the disk plane's runtime (coordinator/runtime/records_disk.py) without a
server: an append rolls a segment older than segment.ms; retention that finds every segment expired
rolls an empty one through the writer and then deletes the rest, so the log start reaches the log end,
which stays across a reload; new appends continue there."""

from __future__ import annotations

import asyncio
import dataclasses
import os

from groupd.coordinator.core.topic_configs import broker_defaults
from groupd.coordinator.runtime.records_disk import DiskPlane
from groupd.coordinator.settings import Settings
from groupd.storage.topic_config import TopicConfig, effective
from tests.runtime.test_records_disk import Topic
from tests.storage import test_data_log
from tests.storage.test_data_log import opened

T = 1_700_000_000_000


def plane_with(tmp_path, overrides: dict[str, str]) -> tuple[DiskPlane, Topic]:
    settings = dataclasses.replace(Settings.load(None, env={}), data_dir=str(tmp_path))
    config = TopicConfig.of(effective(overrides, broker_defaults(settings)))
    topic = Topic("t", test_data_log.TOPIC_ID)
    return DiskPlane(settings, lambda _t, _p: True, lambda: [topic], config=lambda _name: config), topic


async def produced(plane: DiskPlane, topic: Topic, ts: int, n: int = 2) -> int:
    answer, done = plane.append(topic, 0, test_data_log.batch(0, n, ts=ts), 8, ts, -1)
    assert await done is None
    return answer.base_offset


async def until(check, what: str) -> None:
    for _ in range(600):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


def test_an_append_rolls_the_active_segment_once_older_than_segment_ms(tmp_path):
    async def run() -> None:
        plane, topic = plane_with(tmp_path, {"segment.ms": "1000"})
        try:
            await produced(plane, topic, T)
            await produced(plane, topic, T + 1000)  # max timestamps T + 1 then T + 1001: 1000 ms, not beyond
            part = plane.partition(topic, 0)
            assert [base for base, _ in part.dlog.segments] == [0]
            assert await produced(plane, topic, T + 1001) == 4
            assert [base for base, _ in part.dlog.segments] == [0, 4]
        finally:
            await plane.close()

    asyncio.run(run())


def test_a_compacted_topics_segment_rolls_at_max_compaction_lag(tmp_path):
    async def run() -> None:
        plane, topic = plane_with(tmp_path, {"cleanup.policy": "compact", "max.compaction.lag.ms": "100"})
        try:
            part = plane.partition(topic, 0)
            _, done = plane.append(topic, 0, keyed(T), 8, T, -1)
            await done
            assert plane._filthiest(T + 200) is None  # its one segment is the active one: never cleaned
            _, done = plane.append(topic, 0, keyed(T + 200), 8, T, -1)
            await done
            assert [base for base, _ in part.dlog.segments] == [0, 1]
            _, _, paths, end, older_kept = plane._filthiest(T + 200)  # the first one is closed now: the cleaner takes it
            assert (paths, end, older_kept) == ([part.dlog.segments[0][1]], 1, False)
        finally:
            await plane.close()

    asyncio.run(run())


def keyed(ts: int) -> bytes:
    import struct

    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=ts, key=b"k", value=b"v", headers=[])
    data = b.build()
    struct.pack_into(">q", data, 0, 0)
    return bytes(data)


def test_retention_takes_every_segment_and_the_log_start_reaches_the_log_end(tmp_path):
    async def run() -> None:
        plane, topic = plane_with(tmp_path, {"retention.ms": "1000"})
        try:
            await produced(plane, topic, T)
            part = plane.partition(topic, 0)
            part.dlog.roll(part.dlog.next_offset)  # a closed segment and the active one, both old
            await produced(plane, topic, T + 10)
            assert plane.enforce_retention(T + 500) == 0
            plane.enforce_retention(T + 2000)
            await until(lambda: len(part.dlog.segments) == 1, "the roll, then the deletion")
            assert (part.log_start, part.high_watermark, part.dlog.segments[0][0]) == (4, 4, 4)
            await until(lambda: sorted(n for n in os.listdir(part.dlog.directory) if n.endswith(".log"))
                        == ["00000000000000000004.log"], "the files removed")
        finally:
            await plane.close()
        again, _ = plane_with(tmp_path, {"retention.ms": "1000"})
        try:
            part = again.partition(topic, 0)
            assert (part.log_start, part.high_watermark) == (4, 4)
            assert await produced(again, topic, T + 3000) == 4
        finally:
            await again.close()

    asyncio.run(run())
    reloaded = opened(tmp_path)
    assert (reloaded.log_start, reloaded.next_offset) == (4, 6)


def test_retention_leaves_the_active_segment_while_a_delete_records_save_runs(tmp_path):
    async def run() -> None:
        plane, topic = plane_with(tmp_path, {"retention.ms": "1000"})
        try:
            await produced(plane, topic, T)
            part = plane.partition(topic, 0)
            part.starts._saving = True  # a DeleteRecords save in flight
            plane.enforce_retention(T + 2000)
            assert not part.writer.rolling and [b for b, _ in part.dlog.segments] == [0]
            part.starts._saving = False
            plane.enforce_retention(T + 2000)
            await until(lambda: part.log_start == 2, "the roll, then the deletion")
        finally:
            await plane.close()

    asyncio.run(run())
