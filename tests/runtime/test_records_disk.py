"""The disk records plane's runtime (coordinator/runtime/records_disk.py) without a server: a partition
first used when its directory holds data is loaded off the loop, answering NOT_LEADER_OR_FOLLOWER
meanwhile, then serves what was on disk; a new partition opens at once; DeleteRecords moves the log start
only once it is saved, and a failed save moves nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from groupd.coordinator.runtime.records_disk import INLINE_LOAD_BYTES, DiskPlane, Unavailable
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from tests.storage.test_data_log import opened, write


@dataclasses.dataclass(frozen=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int = 1


def test_a_partition_with_data_loads_off_the_loop_and_a_new_one_at_once(tmp_path):
    from tests.storage import test_data_log

    topic = Topic("t", test_data_log.TOPIC_ID)
    dlog = opened(tmp_path, segment_bytes=1 << 30)
    write(dlog, (INLINE_LOAD_BYTES // 10_000) + 10, value=b"x" * 10_000)
    dlog.close()
    fresh = Topic("fresh", uuid.uuid4())
    settings = dataclasses.replace(Settings.load(None, env={}), data_dir=str(tmp_path))

    async def run() -> None:
        plane = DiskPlane(settings, lambda _t, _p: True, lambda: [topic, fresh])
        try:
            try:
                plane.partition(topic, 0)
            except Unavailable as e:
                assert e.error is ErrorCode.not_leader_or_follower
            else:
                raise AssertionError("a partition with data on disk opened on the loop")
            for _ in range(600):
                await asyncio.sleep(0.05)
                try:
                    part = plane.partition(topic, 0)
                    break
                except Unavailable:
                    continue
            assert part.high_watermark == dlog.next_offset and part.log_start == 0
            assert plane.partition(fresh, 0).high_watermark == 0  # new: opened at once
        finally:
            await plane.close()

    asyncio.run(run())


def test_delete_records_answers_once_saved_and_a_failed_save_moves_nothing(tmp_path):
    from tests.storage import test_data_log

    topic = Topic("t", test_data_log.TOPIC_ID)
    dlog = opened(tmp_path, segment_bytes=4096)
    write(dlog, 60, value=b"x" * 200)  # offsets 0-119 in several segments
    dlog.close()
    settings = dataclasses.replace(Settings.load(None, env={}), data_dir=str(tmp_path))

    async def run() -> None:
        plane = DiskPlane(settings, lambda _t, _p: True, lambda: [topic])
        try:
            for _ in range(600):
                try:
                    part = plane.partition(topic, 0)
                    break
                except Unavailable:
                    await asyncio.sleep(0.05)
            segments_before = len(part.dlog.segments)
            first, second = plane.delete_records(topic, 0, 30), plane.delete_records(topic, 0, 50)
            assert part.log_start == 0  # nothing moves before it is saved
            assert await first == (ErrorCode.none, 30)  # saved alone; the second waits for the next save
            assert await second == (ErrorCode.none, 50)
            assert part.log_start == 50 and len(part.dlog.segments) < segments_before
            assert plane.delete_records(topic, 0, 40) == (ErrorCode.none, 50)  # never back
            assert plane.delete_records(topic, 0, 121) == (ErrorCode.offset_out_of_range, -1)

            def full_disk(_offset: int) -> None:
                raise OSError(28, "No space left on device")

            part.dlog.save_log_start = full_disk
            assert await plane.delete_records(topic, 0, 80) == (ErrorCode.kafka_storage_error, -1)
            assert part.log_start == 50
        finally:
            await plane.close()

    asyncio.run(run())
    again = opened(tmp_path, segment_bytes=4096)
    assert (again.log_start, again.next_offset) == (50, 120)
