"""A failed write of the share state changes nothing (the house rule, Kafka's
SharePartition.rollbackOrProcessStateUpdates): the acknowledged records are put back as they were,
still ACQUIRED by the member, and the partition answers UNKNOWN_SERVER_ERROR. The handlers' helper
driven directly, with a share-state log whose fsync fails."""

from __future__ import annotations

import asyncio
import types
import uuid

from prometheus_client import REGISTRY

from groupd.coordinator.apis.share_common import apply_acknowledgements
from groupd.coordinator.core.share.delivery import ACQUIRED, Limits
from groupd.coordinator.runtime.share_partitions import ShareDeliveries
from groupd.protocol import ErrorCode
from groupd.storage.share_state import ShareStateLog

TOPIC = uuid.UUID("5b2f0c1e-8d4a-4b7e-9f10-2a3b4c5d6e7f")


class FailingLog(ShareStateLog):
    fail = False

    def write(self, snapshots, now_ms):
        if self.fail:
            raise OSError(28, "No space left on device")
        super().write(snapshots, now_ms)


def test_a_failed_state_write_puts_the_partition_back(tmp_path):
    node = types.SimpleNamespace(
        access=None, settings=types.SimpleNamespace(group_share_record_lock_duration_ms=30000),
        group_configs=types.SimpleNamespace(overrides={}),
        catalog=types.SimpleNamespace(by_id=lambda tid: types.SimpleNamespace(name="t", partitions=1)))
    store = FailingLog(str(tmp_path))
    deliveries = ShareDeliveries(Limits(), store)
    batch = types.SimpleNamespace(first_offset=0, last_offset=1, acknowledge_types=(1,))
    request = types.SimpleNamespace(body=types.SimpleNamespace(group_id="g", member_id="m", is_renew_ack=False))

    async def run():
        await deliveries.ready()
        sp = deliveries.partition(("g", TOPIC, 0), 0, 4, earliest=True)
        assert sp.acquire("m", 0, 3, 4, now=0) == [(0, 3, 1)]
        store.fail = True
        failed = await apply_acknowledgements(node, request, deliveries, {(TOPIC, 0): [batch]}, now=1)
        sp = deliveries.partitions[("g", TOPIC, 0)]
        assert failed == {(TOPIC, 0): ErrorCode.unknown_server_error}
        assert [(sp.offsets[o].state, sp.offsets[o].member) for o in range(2)] == [(ACQUIRED, "m")] * 2
        assert sp.start == 0 and ShareStateLog(str(tmp_path)).load() == {}
        store.fail = False
        before = REGISTRY.get_sample_value("groupd_share_records_acknowledged_total", {"type": "accept"}) or 0
        done = await apply_acknowledgements(node, request, deliveries, {(TOPIC, 0): [batch]}, now=2)
        assert done == {(TOPIC, 0): ErrorCode.none}
        after = REGISTRY.get_sample_value("groupd_share_records_acknowledged_total", {"type": "accept"})
        assert after - before == 2  # the failed attempt counted nothing
        sp = deliveries.partitions[("g", TOPIC, 0)]
        assert sp.start == 2 and sp.offsets[2].state == ACQUIRED
        assert ShareStateLog(str(tmp_path)).load()[("g", TOPIC, 0)][2] == 2

    asyncio.run(run())
