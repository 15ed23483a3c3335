"""Cluster mode's producer ids (issue 23): blocks of 1000 granted from one counter in etcd by a
compare-and-swap (coordinator/cluster/etcd/producer_ids.py, Kafka's AllocateProducerIds). Grants
racing from two clients never overlap; two real nodes hand out disjoint ids to idempotent and
transactional producers over TCP, across a clean restart of one, a kill -9 of the other, and more
than a block's worth at one node; a data dir of the node-id-residue scheme starts the counter above
every id its producer-id files say were handed out."""

from __future__ import annotations

import asyncio
import datetime
import json

import aetcd
import pytest

from groupd.coordinator.cluster.etcd.producer_ids import grant_block
from groupd.coordinator.tools.client import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.cluster.test_cluster_etcd import etcd, spread, two_nodes  # noqa: F401 (the fixture)
from tests.cluster.test_cluster_transactions import transactional_id_on
from tests.support.harness import wait_until

pytestmark = pytest.mark.clients

MINUTE = datetime.timedelta(minutes=1)


def test_racing_grants_never_overlap(etcd):  # noqa: F811
    async def grants() -> list:
        clients = [aetcd.Client("127.0.0.1", etcd.port), aetcd.Client("127.0.0.1", etcd.port)]
        try:
            for c in clients:
                await c.connect()
            return await asyncio.gather(*(grant_block(clients[i % 2], b"/groupd-test/producer.ids", i % 2, 7000)
                                          for i in range(30)))
        finally:
            for c in clients:
                await c.close()
    blocks = asyncio.run(grants())
    firsts = sorted(b.first for b in blocks)
    assert firsts == [7000 + 1000 * i for i in range(30)]  # from the floor, each block once, no gap


def init_producer_id(bootstrap: str, transactional_id: str | None = None, count: int = 1) -> list[int]:
    """`count` InitProducerId answers' ids, each retried while the node answers a retriable error
    (COORDINATOR_LOAD_IN_PROGRESS while its next block is on its way), as clients retry."""
    ids = []
    with AdminConnection(bootstrap, "producer-ids-test") as c:
        for _ in range(count):
            def granted():
                r = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": transactional_id,
                                                           "transaction_timeout": MINUTE,
                                                           "producer_id": -1, "producer_epoch": -1})
                if r.error_code in (ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions):
                    return None
                assert r.error_code == ErrorCode.none, r
                return r.producer_id
            ids.append(wait_until(granted, 60, f"InitProducerId at {bootstrap}"))
    return ids


def test_two_nodes_hand_out_disjoint_ids_across_a_restart_and_a_kill(tmp_path, etcd):  # noqa: F811
    data = tmp_path / "data"
    data.mkdir()
    # node 3 of the residue scheme reserved 2 blocks: ids up to 3 + 65536·1999 may be in use
    (data / "producer-ids-3.json").write_text(json.dumps({"version": 1, "next_block": 2}))
    handed: list[int] = []
    nodes_gen = two_nodes(tmp_path, etcd, "records.plane=disk")
    nodes = next(nodes_gen)
    try:
        spread(nodes)
        handed += init_producer_id(nodes[0].bootstrap, count=1100)  # past its first block
        handed += init_producer_id(nodes[1].bootstrap, count=50)
        for node_id, node in ((1, nodes[0]), (2, nodes[1])):  # transactional ids at their coordinators
            txn_id = transactional_id_on(nodes, node_id, f"pid-{node_id}")
            handed += init_producer_id(node.bootstrap, txn_id)
        assert nodes[0].stop() == 0, nodes[0].log()
        nodes[0].start()
        nodes[1].kill()
        nodes[1].start()
        spread(nodes)
        handed += init_producer_id(nodes[0].bootstrap, count=20)
        handed += init_producer_id(nodes[1].bootstrap, count=20)
        txn_id = transactional_id_on(nodes, 2, "pid-after")
        handed += init_producer_id(nodes[1].bootstrap, txn_id)
    finally:
        next(nodes_gen, None)
    assert len(handed) == len(set(handed)), "a producer id was handed out twice"
    assert min(handed) >= 2 * 1000 * 65536
    logs = nodes[0].log() + nodes[1].log()
    assert logs.count("producer id block granted") >= 5  # 2 at the first start, 1 past 90%, 2 restarts
