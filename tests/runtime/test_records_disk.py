"""The disk records plane's runtime (coordinator/runtime/records_disk.py) without a server: a partition
first used when its directory holds data is loaded off the loop, answering NOT_LEADER_OR_FOLLOWER
meanwhile, then serves what was on disk; a new partition opens at once."""

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
