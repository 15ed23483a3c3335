"""The hand-over of a data partition's share state between leaders (coordinator/runtime/
share_partitions.py over storage/share_state.py), driven directly: two ShareDeliveries on one data
dir play two nodes. The new leader (a later stamp) takes over what the old one acknowledged, not what
it had only acquired; what the deposed leader writes late is never read; the deposed leader, asked
again under its old stamp, is NOT_LEADER_OR_FOLLOWER; and a node that regains the partition under a
newer stamp drops what it still held and loads the latest state."""

from __future__ import annotations

import asyncio
import uuid

from groupd.coordinator.core.share.delivery import ACCEPT, ACKNOWLEDGED, AVAILABLE, Limits
from groupd.coordinator.runtime.share_partitions import ShareDeliveries
from groupd.protocol import ErrorCode

TOPIC = uuid.UUID("5b2f0c1e-8d4a-4b7e-9f10-2a3b4c5d6e7f")
KEY = ("g", TOPIC, 0)


def test_the_next_leader_takes_over_what_was_acknowledged(tmp_path):
    old, new = ShareDeliveries(Limits(), str(tmp_path)), ShareDeliveries(Limits(), str(tmp_path))

    async def run():
        assert await old.hold(TOPIC, 0, 5) is None
        sp = old.partition(KEY, 0, 10, earliest=True)
        assert sp.acquire("m", 0, 9, 10, now=0) == [(0, 9, 1)]
        assert sp.acknowledge("m", [(0, 3, (ACCEPT,))], now=1, lock_ms=30000) is ErrorCode.none
        await old.persist([KEY])
        assert await new.hold(TOPIC, 0, 7) is None  # the next leader: a later stamp
        taken = new.partition(KEY, 0, 10)
        assert taken.start == 4 and taken.next_fetch_offset() == 4  # 4-9 were only acquired: available again
        assert taken.offsets.get(4) is None or taken.offsets[4].state == AVAILABLE
        sp.acknowledge("m", [(4, 9, (ACCEPT,))], now=2, lock_ms=30000)
        await old.persist([KEY])  # the deposed leader, late: its own segment, never read
        again = ShareDeliveries(Limits(), str(tmp_path))
        assert await again.hold(TOPIC, 0, 8) is None
        assert again.partition(KEY, 0, 10).start == 4
        old.let_go((TOPIC, 0))
        assert await old.hold(TOPIC, 0, 5) is ErrorCode.not_leader_or_follower  # a later leader wrote it

    asyncio.run(run())


def test_a_regained_partition_drops_what_was_held_and_loads_the_latest(tmp_path):
    a, b = ShareDeliveries(Limits(), str(tmp_path)), ShareDeliveries(Limits(), str(tmp_path))

    async def run():
        assert await a.hold(TOPIC, 0, 1) is None
        a.partition(KEY, 0, 4, earliest=True).acquire("m", 0, 3, 4, now=0)
        assert await b.hold(TOPIC, 0, 2) is None
        sp = b.partition(KEY, 0, 4, earliest=True)
        sp.acquire("n", 0, 1, 2, now=0)
        sp.acknowledge("n", [(0, 1, (ACCEPT,))], now=1, lock_ms=30000)
        await b.persist([KEY])
        assert await a.hold(TOPIC, 0, 3) is None  # regained: a's acquisitions from stamp 1 are gone
        back = a.partition(KEY, 0, 4)
        assert back.start == 2 and all(r.state != ACKNOWLEDGED or o < 2 for o, r in back.offsets.items())
        assert back.next_fetch_offset() == 2

    asyncio.run(run())
