"""Transactions in cluster mode (issue 23 beyond one process): a real etcd and two groupd nodes on one
shared data dir. A transactional id's coordinator is the node holding the etcd claim of the offsets
partition its `__transaction_state` partition rides on. A transaction over data partitions led by
both nodes, with offsets of a group the other node coordinates, commits and aborts as read_committed
consumers see (the markers to the other node's partitions go over WriteTxnMarkers). A kill -9 of the
coordinator's node with a transaction open hands it to the survivor, which loads it and aborts it at
its timeout, its markers ending it everywhere; a kill -9 after the commit was prepared, before every
marker was written: the survivor writes them and completes it."""

from __future__ import annotations

import re
import signal
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from groupd.coordinator.tools.chaos_client import ChaosClient
from groupd.coordinator.tools.client import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.cluster.test_cluster_etcd import SETTINGS, etcd, spread, two_nodes  # noqa: F401,F811 (the fixture)
from tests.cluster.test_cluster_records import agreed_leaders
from tests.support.etcd_server import LEASE_MS, cluster_node
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, free_port, free_ports

pytestmark = pytest.mark.clients


@pytest.fixture
def nodes(tmp_path, etcd):  # noqa: F811
    yield from two_nodes(tmp_path, etcd, "records.plane=disk",
                         "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")


def coordinator_of(bootstrap: str, transactional_id: str) -> int | None:
    try:
        with AdminConnection(bootstrap, "cluster-txn-test") as c:
            r = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [transactional_id]})
    except OSError:
        return None
    found = r.coordinators[0]
    return found.node_id if found.error_code == ErrorCode.none else None


def transactional_id_on(nodes, node_id: int, prefix: str) -> str:
    """An id whose coordinator every live node says is `node_id`."""
    for i in range(200):
        txn_id = f"{prefix}-{i}"
        if all(coordinator_of(n.bootstrap, txn_id) == node_id for n in nodes if n.alive()):
            return txn_id
    raise AssertionError(f"no transactional id coordinated by node {node_id}")


def read_committed(bootstrap: str, expected: set[str], partitions=(0, 1, 2, 3)) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition("t", p, 0) for p in partitions])
    seen: list[str] = []
    try:
        def done():
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    seen.append(m.value().decode())
            return expected <= set(seen)
        wait_until(done, 90, f"{sorted(expected)} read_committed (seen {seen})")
        for m in c.consume(100, 1.0):
            if m.error() is None:
                seen.append(m.value().decode())
    finally:
        c.close()
    return seen


def producer(bootstrap: str, transactional_id: str, timeout_ms: int = 60000) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": timeout_ms})


def test_a_transaction_over_both_nodes_partitions_commits_and_aborts(nodes):
    groups = spread(nodes)
    leaders = agreed_leaders(nodes, {1, 2}, exactly=True)
    txn_id = transactional_id_on(nodes, 1, "tx-both")
    group = next(g for g, node in groups.items() if node == 2)  # its offsets' marker goes to node 2
    p = producer(nodes[1].bootstrap, txn_id)
    p.init_transactions(60)
    p.begin_transaction()
    for part in leaders:
        p.produce("t", f"c{part}".encode(), partition=part)
    member = Consumer({"bootstrap.servers": nodes[0].bootstrap, "group.id": group})
    try:
        p.send_offsets_to_transaction([TopicPartition("t", 0, 7)], member.consumer_group_metadata(), 60)
    finally:
        member.close()
    p.commit_transaction(60)
    check = Consumer({"bootstrap.servers": nodes[0].bootstrap, "group.id": group,
                      "isolation.level": "read_committed"})
    try:
        assert [c.offset for c in check.committed([TopicPartition("t", 0)], timeout=60)] == [7]
    finally:
        check.close()
    p.begin_transaction()
    for part in leaders:
        p.produce("t", f"a{part}".encode(), partition=part)
    p.flush(60)
    p.abort_transaction(60)
    p.begin_transaction()
    for part in leaders:
        p.produce("t", f"d{part}".encode(), partition=part)
    p.commit_transaction(60)
    expected = {f"{k}{part}" for k in "cd" for part in leaders}
    assert sorted(read_committed(nodes[0].bootstrap, expected)) == sorted(expected)
    # the coordinator epoch of every claimed transaction partition is its home claim's stamp, never 0
    epochs = re.findall(r"transaction log partition gained partition=\d+ coordinator_epoch=(\d+)",
                        nodes[0].log() + nodes[1].log())
    assert epochs and all(int(e) > 0 for e in epochs)


def test_the_survivor_aborts_a_transaction_its_killed_coordinator_left_open(nodes):
    spread(nodes)
    leaders = agreed_leaders(nodes, {1, 2}, exactly=True)
    txn_id = transactional_id_on(nodes, 2, "tx-orphan")
    zombie = producer(nodes[0].bootstrap, txn_id, timeout_ms=3000)
    zombie.init_transactions(60)
    zombie.begin_transaction()
    for part in leaders:
        zombie.produce("t", f"orphan{part}".encode(), partition=part)
    zombie.flush(60)
    nodes[1].stop(signal.SIGKILL)  # the coordinator dies with the transaction open
    wait_until(lambda: coordinator_of(nodes[0].bootstrap, txn_id) == 1, 60, "node 1 coordinates the id")
    wait_until(lambda: "transaction timed out transactional_id=" + txn_id in nodes[0].log(), 60,
               "the survivor aborts the orphan at its timeout")
    after = producer(nodes[0].bootstrap, f"{txn_id}-next")
    after.init_transactions(60)
    after.begin_transaction()
    for part in leaders:
        after.produce("t", f"next{part}".encode(), partition=part)
    after.commit_transaction(60)
    expected = {f"next{part}" for part in leaders}
    seen = read_committed(nodes[0].bootstrap, expected)
    assert sorted(seen) == sorted(expected)  # the orphan's records never, the LSO past them
    assert f"transaction aborted transactional_id={txn_id} " in nodes[0].log()


def test_the_survivor_completes_a_commit_its_killed_coordinator_had_prepared(tmp_path, etcd):  # noqa: F811
    """Node 1 holds back the first WriteTxnMarkers it gets, so node 2 (the coordinator) dies with the
    commit prepared and its markers not all written: node 1 loads PrepareCommit and writes them."""
    admin = free_port()
    data = str(tmp_path / "data")
    nodes = [cluster_node(data, etcd, 1, *SETTINGS, "records.plane=disk", f"admin.listener=http://127.0.0.1:{admin}"
                          ).start(),
             cluster_node(data, etcd, 2, *SETTINGS, "records.plane=disk").start()]
    try:
        spread(nodes)
        leaders = agreed_leaders(nodes, {1, 2}, exactly=True)
        txn_id = transactional_id_on(nodes, 2, "tx-prepared")
        ChaosClient(f"http://127.0.0.1:{admin}").delay("WriteTxnMarkers", 120_000, count=1)
        p = producer(nodes[0].bootstrap, txn_id)
        p.init_transactions(60)
        p.begin_transaction()
        for part in leaders:
            p.produce("t", f"prepared{part}".encode(), partition=part)
        p.commit_transaction(60)  # answered once PrepareCommit is durable
        with AdminConnection(nodes[1].bootstrap, "cluster-txn-test") as c:
            (state,) = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]}).transaction_states
        assert state.transaction_state == "PrepareCommit"
        nodes[1].stop(signal.SIGKILL)
        expected = {f"prepared{part}" for part in leaders}
        assert sorted(read_committed(nodes[0].bootstrap, expected)) == sorted(expected)
        assert f"transaction committed transactional_id={txn_id} " in nodes[0].log()
    finally:
        if nodes[0].alive():
            assert nodes[0].stop() == 0, nodes[0].log()


def test_markers_go_to_the_other_node_over_a_sasl_listener_with_scram(tmp_path, etcd):  # noqa: F811
    """The nodes talk to each other on INTERNAL, a SASL_PLAINTEXT listener offering SCRAM-SHA-256
    only (clients use EXTERNAL, PLAINTEXT): a transaction over both nodes' partitions commits, its
    markers to the other node sent after a SCRAM login as the super user (sasl.users' credential)."""
    data = str(tmp_path / "data")
    nodes = []
    for node_id in (1, 2):
        port = free_ports(2)
        nodes.append(GroupdProcess(
            data, f"node.id={node_id}", f"cluster.etcd.endpoints={etcd.endpoint}", f"cluster.lease.ms={LEASE_MS}",
            "log.level=info", *SETTINGS, "records.plane=disk",
            f"listeners=EXTERNAL://127.0.0.1:{port},INTERNAL://127.0.0.1:{port + 1}",
            "listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name=INTERNAL", "sasl.enabled.mechanisms=SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256", "sasl.users=broker:broker-secret",
            "super.users=User:broker", port=port).start())
    try:
        spread(nodes)
        leaders = agreed_leaders(nodes, {1, 2}, exactly=True)
        txn_id = transactional_id_on(nodes, 1, "tx-scram")
        p = producer(nodes[0].bootstrap, txn_id)
        p.init_transactions(60)
        p.begin_transaction()
        for part in leaders:
            p.produce("t", f"scram{part}".encode(), partition=part)
        p.commit_transaction(60)
        expected = {f"scram{part}" for part in leaders}
        assert sorted(read_committed(nodes[1].bootstrap, expected)) == sorted(expected)
    finally:
        for node in nodes:
            if node.alive():
                assert node.stop() == 0, node.log()
