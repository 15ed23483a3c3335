"""A failed write of the share state changes nothing (the house rule, Kafka's
SharePartition.rollbackOrProcessStateUpdates): the acknowledged records are put back as they were,
still ACQUIRED by the member, and the partition answers UNKNOWN_SERVER_ERROR. The handlers' helper
driven directly, with a share-state log whose fsync fails. And a write that completes after this node
lost the data partition's leadership answers NOT_LEADER_OR_FOLLOWER: the next leader may have read
the state before it."""

from __future__ import annotations

import asyncio
import types
import uuid

from prometheus_client import REGISTRY

from groupd.coordinator.apis.share_common import apply_acknowledgements
from groupd.coordinator.core.share.delivery import ACQUIRED, Limits
from groupd.coordinator.runtime.share_partitions import ShareDeliveries
from groupd.protocol import ErrorCode
from groupd.storage.share_state import ShareStateLog, partition_directory

TOPIC = uuid.UUID("5b2f0c1e-8d4a-4b7e-9f10-2a3b4c5d6e7f")


class FailingLog(ShareStateLog):
    fail = False

    def write(self, snapshots, now_ms):
        if self.fail:
            raise OSError(28, "No space left on device")
        super().write(snapshots, now_ms)


class Cluster:
    node_id, leading, stamp = 1, True, 7

    def leads(self, _topic, _partition):
        return self.leading

    def data_stamp(self, _topic, _partition):
        return self.stamp


def fixture(tmp_path):
    node = types.SimpleNamespace(
        access=None, settings=types.SimpleNamespace(group_share_record_lock_duration_ms=30000), cluster=Cluster(),
        group_configs=types.SimpleNamespace(overrides={}),
        catalog=types.SimpleNamespace(by_id=lambda tid: types.SimpleNamespace(name="t", partitions=1, topic_id=tid)))
    deliveries = ShareDeliveries(Limits(), str(tmp_path))
    request = types.SimpleNamespace(body=types.SimpleNamespace(group_id="g", member_id="m", is_renew_ack=False))
    return node, deliveries, request


def test_a_failed_state_write_puts_the_partition_back(tmp_path):
    node, deliveries, request = fixture(tmp_path)
    store = FailingLog(partition_directory(str(tmp_path), TOPIC, 0), 7)
    deliveries.open_log = lambda *_: store
    batch = types.SimpleNamespace(first_offset=0, last_offset=1, acknowledge_types=(1,))

    async def run():
        assert await deliveries.hold(TOPIC, 0, 7) is None
        sp = deliveries.partition(("g", TOPIC, 0), 0, 4, earliest=True)
        assert sp.acquire("m", 0, 3, 4, now=0) == [(0, 3, 1)]
        store.fail = True
        failed = await apply_acknowledgements(node, request, deliveries, {(TOPIC, 0): [batch]}, now=1)
        sp = deliveries.partitions[("g", TOPIC, 0)]
        assert failed == {(TOPIC, 0): ErrorCode.unknown_server_error}
        assert [(sp.offsets[o].state, sp.offsets[o].member) for o in range(2)] == [(ACQUIRED, "m")] * 2
        assert sp.start == 0 and ShareStateLog(store.directory, 7).load() == {}
        store.fail = False
        before = REGISTRY.get_sample_value("groupd_share_records_acknowledged_total", {"type": "accept"}) or 0
        done = await apply_acknowledgements(node, request, deliveries, {(TOPIC, 0): [batch]}, now=2)
        assert done == {(TOPIC, 0): ErrorCode.none}
        after = REGISTRY.get_sample_value("groupd_share_records_acknowledged_total", {"type": "accept"})
        assert after - before == 2  # the failed attempt counted nothing
        sp = deliveries.partitions[("g", TOPIC, 0)]
        assert sp.start == 2 and sp.offsets[2].state == ACQUIRED
        assert ShareStateLog(store.directory, 7).load()[("g", TOPIC, 0)][2] == 2

    asyncio.run(run())


def test_a_write_that_ends_after_the_leadership_moved_answers_not_leader(tmp_path):
    node, deliveries, request = fixture(tmp_path)
    batch = types.SimpleNamespace(first_offset=0, last_offset=0, acknowledge_types=(1,))

    class MovingLog(ShareStateLog):
        def write(self, snapshots, now_ms):
            super().write(snapshots, now_ms)
            node.cluster.stamp = 9  # lost and taken again during the write: another leader held it in between

    deliveries.open_log = lambda *_: MovingLog(partition_directory(str(tmp_path), TOPIC, 0), 7)

    async def run():
        assert await deliveries.hold(TOPIC, 0, 7) is None
        sp = deliveries.partition(("g", TOPIC, 0), 0, 2, earliest=True)
        assert sp.acquire("m", 0, 1, 2, now=0) == [(0, 1, 1)]
        done = await apply_acknowledgements(node, request, deliveries, {(TOPIC, 0): [batch]}, now=1)
        assert done == {(TOPIC, 0): ErrorCode.not_leader_or_follower}
        assert deliveries.stamp((TOPIC, 0)) is None and ("g", TOPIC, 0) not in deliveries.partitions
        node.cluster.leading = False
        again = await apply_acknowledgements(node, request, deliveries, {(TOPIC, 0): [batch]}, now=2)
        assert again == {(TOPIC, 0): ErrorCode.not_leader_or_follower}

    asyncio.run(run())


def test_a_group_whose_state_tombstone_fails_keeps_its_state(tmp_path):
    """DeleteGroups deletes a share group's state first (Kafka's order): a failed tombstone write
    names the group (it is then not deleted) and leaves its share-partitions here as they were."""
    _node, deliveries, _request = fixture(tmp_path)
    store = FailingLog(partition_directory(str(tmp_path), TOPIC, 0), 7)
    deliveries.open_log = lambda *_: store

    async def run():
        assert await deliveries.hold(TOPIC, 0, 7) is None
        kept = deliveries.partition(("g", TOPIC, 0), 0, 4, earliest=True)
        deliveries.partition(("other", TOPIC, 0), 0, 4, earliest=True)
        await deliveries.persist([("g", TOPIC, 0)])
        store.fail = True
        assert await deliveries.forget_groups(["g"]) == {"g"}
        assert deliveries.partitions[("g", TOPIC, 0)] is kept
        assert ("g", TOPIC, 0) in ShareStateLog(store.directory, 7).load()
        store.fail = False
        assert await deliveries.forget_groups(["g"]) == set()
        assert ("g", TOPIC, 0) not in deliveries.partitions and ("other", TOPIC, 0) in deliveries.partitions
        assert ShareStateLog(store.directory, 7).load() == {}

    asyncio.run(run())
