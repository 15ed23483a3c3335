"""Transactions under `groupd serve --workers 2` with confluent-kafka (issue 23 beyond one process):
the transactional id's coordinator is the worker owning its `__transaction_state` partition (the one
owning the offsets partition of the same number); its markers reach the partitions the other worker
leads (data and `__consumer_offsets`) over the wire (WriteTxnMarkers), checked by read_committed
consumers; the other worker verifies the transactional writes it takes with the coordinator
(AddPartitionsToTxn v4); a kill -9 of the coordinator's worker after PrepareCommit, with the other
worker's marker held back, is completed by the restarted worker, which writes the markers again. The
workers talk to each other on an SSL-only or SASL-only listener (ACLs on) too, and Metadata lists
`__transaction_state` once used."""

from __future__ import annotations

import datetime
import os
import re
import signal

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.tools.chaos_client import ChaosClient
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.storage.test_records_plane import batch, produce
from tests.support import certs as test_certs
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, free_ports
from tests.support.transactions import read_values, transform_in_transactions

pytestmark = pytest.mark.clients

PARTITIONS = 50


def on_worker(worker: int, prefix: str) -> str:
    """An id (transactional or group) whose partition worker `worker` of 2 owns."""
    return next(k for k in (f"{prefix}{i}" for i in range(10_000)) if partition_for(k, PARTITIONS) % 2 == worker)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    admin = free_ports(2)
    s = GroupdProcess(str(tmp_path_factory.mktemp("workers-txn")), "workers=2", "topics=wt:2,ctp-in:2,ctp-out:2",
                      "group.initial.rebalance.delay.ms=0", f"admin.listener=http://127.0.0.1:{admin}",
                      port=free_ports(2), ready="workers ready").start(timeout=60)
    s.admin = [f"http://127.0.0.1:{admin + i}" for i in range(2)]
    yield s
    assert s.stop() == 0, s.log()


def producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": 60000, **config})


def read(bootstrap: str, topic: str, expected: set[str], **config) -> list[str]:
    """read_committed values of both partitions of `topic` until every one of `expected` is seen, and
    whatever else is visible then (`config`: the client's security settings)."""
    return read_values(bootstrap, topic, 2, lambda seen: expected <= set(seen), str(sorted(expected)), rest=True,
                       **config)


def find_transaction_coordinator(bootstrap: str, transactional_id: str):
    with WireClient(bootstrap) as w:
        return w.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [transactional_id]}
                         ).coordinators[0]


def describe(bootstrap: str, transactional_id: str):
    with WireClient(bootstrap) as w:
        return w.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]}
                         ).transaction_states[0]


@pytest.mark.parametrize("worker", [0, 1])
def test_find_coordinator_names_the_worker_owning_the_transactional_ids_partition(server, worker):
    for owner in (0, 1):
        found = find_transaction_coordinator(f"127.0.0.1:{server.port + worker}", on_worker(owner, "txf"))
        assert (found.error_code, found.node_id, found.port) == (0, 1 + owner, server.port + owner)
    # DescribeTransactions at the other worker: NOT_COORDINATOR, as Kafka's admin client expects
    elsewhere = describe(f"127.0.0.1:{server.port + worker}", on_worker(1 - worker, "txf"))
    assert elsewhere.error_code == ErrorCode.not_coordinator


def test_commit_and_abort_reach_both_workers_partitions(server):
    p = producer(server.bootstrap, on_worker(0, "tx-both"))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("wt", b"c0", partition=0)  # led by the coordinator's worker
    p.produce("wt", b"c1", partition=1)  # led by the other one: its marker goes over the wire
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("wt", b"a0", partition=0)
    p.produce("wt", b"a1", partition=1)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("wt", b"d1", partition=1)
    p.commit_transaction(30)
    seen = read(server.bootstrap, "wt", {"c0", "c1", "d1"})
    assert sorted(seen) == ["c0", "c1", "d1"]


def test_send_offsets_to_a_group_on_the_other_worker(server):
    source = Producer({"bootstrap.servers": server.bootstrap})
    inputs = [f"in-{i}" for i in range(10)]
    for i, v in enumerate(inputs):
        source.produce("ctp-in", v.encode(), partition=i % 2)
    source.flush(30)
    group = on_worker(1, "ctp")  # TxnOffsetCommit at worker 1, verified with worker 0; its marker from worker 0
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["ctp-in"])
    p = producer(server.bootstrap, on_worker(0, "tx-ctp"))
    p.init_transactions(30)
    try:
        done = transform_in_transactions(consumer, p, "ctp-out", len(inputs), batch=10)
    finally:
        consumer.close()
    assert sorted(done) == sorted(inputs)
    assert sorted(read(server.bootstrap, "ctp-out", {v.upper() for v in inputs})) == sorted(v.upper() for v in inputs)
    check = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        committed = check.committed([TopicPartition("ctp-in", 0), TopicPartition("ctp-in", 1)], timeout=30)
    finally:
        check.close()
    assert [c.offset for c in committed] == [5, 5]


def test_a_prepared_commit_is_completed_by_the_restarted_coordinator_worker(server):
    txn_id = on_worker(0, "tx-crash")
    held = ChaosClient(server.admin[1])
    # worker 1 holds back the first WriteTxnMarkers it gets: worker 0 dies before it is answered
    held.delay("WriteTxnMarkers", 120_000, count=1)
    p = producer(server.bootstrap, txn_id)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("wt", b"crash0", partition=0)
    p.produce("wt", b"crash1", partition=1)
    p.commit_transaction(30)  # answered once PrepareCommit is durable; the markers follow
    assert describe(server.bootstrap, txn_id).transaction_state == "PrepareCommit"
    old = server.log().count("worker ready worker=0")
    os.kill(worker_pid(server, 0), signal.SIGKILL)
    wait_until(lambda: server.log().count("worker ready worker=0") > old, 60, "worker 0 back")
    assert {"crash0", "crash1"} <= set(read(server.bootstrap, "wt", {"crash0", "crash1"}))
    wait_until(lambda: describe(server.bootstrap, txn_id).transaction_state == "CompleteCommit", 60,
               "the transaction completed")
    held.clear()


def worker_pid(server: GroupdProcess, worker: int) -> int:
    return int(re.findall(rf"worker started worker={worker} node\.id=\d+ pid=(\d+)", server.log())[-1])


def commit_on_both_workers(bootstrap: str, txn_id: str, values: tuple[str, str], **config) -> None:
    """One transaction writing values[i] to wt-i (worker 0 coordinates `txn_id`, worker 1 leads wt-1:
    verified and marked over the inter-broker connection), then both read_committed."""
    p = producer(bootstrap, txn_id, **config)
    p.init_transactions(30)
    p.begin_transaction()
    for i, value in enumerate(values):
        p.produce("wt", value.encode(), partition=i)
    p.commit_transaction(30)
    read(bootstrap, "wt", set(values), **config)


def test_markers_and_verification_authenticate_on_a_sasl_listener_under_acls(tmp_path):
    """Only a SASL listener, ACLs on: the workers authenticate to each other with SASL/PLAIN as the
    super user and may CLUSTER_ACTION (WriteTxnMarkers, AddPartitionsToTxn v4)."""
    port = free_ports(2)
    s = GroupdProcess(str(tmp_path), "workers=2", "topics=wt:2", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                      "sasl.enabled.mechanisms=PLAIN", "sasl.users=admin:admin-secret",
                      "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "super.users=User:admin", port=port, ready="workers ready").start(timeout=60)
    try:
        commit_on_both_workers(s.bootstrap, on_worker(0, "tx-sasl"), ("s0", "s1"), **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "admin",
            "sasl.password": "admin-secret"})
    finally:
        assert s.stop() == 0, s.log()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_markers_and_verification_authenticate_with_scram(tmp_path, mechanism):
    """A SASL listener offering SCRAM only, ACLs on: the workers log in to each other with
    sasl.mechanism.inter.broker.protocol (the super user's SCRAM credential, derived from sasl.users)."""
    port = free_ports(2)
    s = GroupdProcess(str(tmp_path), "workers=2", "topics=wt:2", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                      "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512", "sasl.users=admin:admin-secret",
                      f"sasl.mechanism.inter.broker.protocol={mechanism}",
                      "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "super.users=User:admin", port=port, ready="workers ready").start(timeout=60)
    try:
        commit_on_both_workers(s.bootstrap, on_worker(0, "tx-scram"), ("m0", "m1"), **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
            "sasl.password": "admin-secret"})  # PLAIN is not offered: the markers went over SCRAM
    finally:
        assert s.stop() == 0, s.log()


def test_the_other_worker_verifies_a_transactional_write_with_the_coordinator(server):
    """Produce at worker 1 of a transactional batch whose id worker 0 coordinates: refused while the
    partition is not in the transaction (AddPartitionsToTxn v4 verify-only answers TRANSACTION_ABORTABLE,
    INVALID_TXN_STATE to a Produce before v11), and with another epoch than the producer's
    (PRODUCER_FENCED, handed to the producer as INVALID_PRODUCER_EPOCH as Kafka does), accepted once added."""
    txn_id = on_worker(0, "tx-verify")
    with WireClient(server.bootstrap) as coordinator, WireClient(f"127.0.0.1:{server.port + 1}") as leader:
        r = coordinator.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": txn_id,
                                                             "transaction_timeout": datetime.timedelta(minutes=1),
                                                             "producer_id": -1, "producer_epoch": -1})
        pid, epoch = r.producer_id, r.producer_epoch
        written = produce(leader, "wt", 1, batch(1, pid=pid, epoch=epoch, seq=0, transactional=True),
                          transactional_id=txn_id)
        assert written.error_code is ErrorCode.invalid_txn_state
        added = coordinator.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": "wt", "partitions": [1]}]})
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code is ErrorCode.none
        other = produce(leader, "wt", 1, batch(1, pid=pid, epoch=epoch + 5, seq=0, transactional=True),
                        transactional_id=txn_id)
        assert other.error_code is ErrorCode.invalid_producer_epoch
        written = produce(leader, "wt", 1, batch(1, pid=pid, epoch=epoch, seq=0, transactional=True),
                          transactional_id=txn_id)
        assert written.error_code is ErrorCode.none
        ended = coordinator.request(ApiKey.END_TXN, 3, {"transactional_id": txn_id, "producer_id": pid,
                                                        "producer_epoch": epoch, "committed": False})
        assert ended.error_code is ErrorCode.none


def test_transactions_v2_add_through_the_coordinator_worker(server):
    """Transactions v2 across workers: Produce v12 at worker 1 of a batch whose transactional id worker 0
    coordinates adds its partition there (AddPartitionsToTxn v5 over the wire), TxnOffsetCommit v5 at
    worker 1 for a group it coordinates adds the group's offsets partition the same way, and EndTxn v5
    bumps the epoch, its markers reaching worker 1's partitions."""
    txn_id, group = on_worker(0, "tx-v2-"), on_worker(1, "g-v2-")
    with WireClient(server.bootstrap) as coordinator, WireClient(f"127.0.0.1:{server.port + 1}") as other:
        r = coordinator.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": txn_id,
                                                             "transaction_timeout": datetime.timedelta(minutes=1),
                                                             "producer_id": -1, "producer_epoch": -1})
        pid, epoch = r.producer_id, r.producer_epoch
        written = produce(other, "wt", 1, batch(1, pid=pid, epoch=epoch, seq=0, transactional=True), version=12,
                          transactional_id=txn_id)
        assert written.error_code is ErrorCode.none
        committed = other.request(ApiKey.TXN_OFFSET_COMMIT, 5, {
            "transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": "wt", "partitions": [
                {"partition_index": 1, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        assert committed.topics[0].partitions[0].error_code is ErrorCode.none
        state = describe(server.bootstrap, txn_id)
        assert state.transaction_state == "Ongoing"
        assert {(t.topic, p) for t in state.topics for p in t.partitions} == {
            ("wt", 1), ("__consumer_offsets", partition_for(group, PARTITIONS))}
        ended = coordinator.request(ApiKey.END_TXN, 5, {"transactional_id": txn_id, "producer_id": pid,
                                                        "producer_epoch": epoch, "committed": True})
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (ErrorCode.none, pid, epoch + 1)
        wait_until(lambda: describe(server.bootstrap, txn_id).transaction_state == "CompleteCommit", 30,
                   "the commit's markers on worker 1")


def test_markers_go_over_tls_on_an_ssl_listener(tmp_path):
    """Only an SSL listener: the workers connect to each other over TLS, verifying the peer with the
    truststore against its advertised address."""
    certs = test_certs.make(str(tmp_path / "certs"))
    port = free_ports(2)
    s = GroupdProcess(str(tmp_path / "data"), "workers=2", "topics=wt:2", f"listeners=SSL://127.0.0.1:{port}",
                      f"ssl.keystore.location={certs.server_keystore}", f"ssl.truststore.location={certs.ca}",
                      port=port, ready="workers ready").start(timeout=60)
    try:
        commit_on_both_workers(s.bootstrap, on_worker(0, "tx-tls"), ("t0", "t1"),
                               **{"security.protocol": "SSL", "ssl.ca.location": certs.ca})
    finally:
        assert s.stop() == 0, s.log()


def test_metadata_lists_the_transaction_log_led_by_each_partitions_coordinator(server):
    """Once a transactional id was used (as Kafka creates it then), `__transaction_state` is an internal
    topic in Metadata on either worker, partition t led by worker t mod 2."""
    p = producer(server.bootstrap, on_worker(1, "tx-meta"))
    p.init_transactions(30)
    for worker in (0, 1):
        with WireClient(f"127.0.0.1:{server.port + worker}") as w:
            def listed():
                r = w.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
                return next((t for t in r.topics if t.name == "__transaction_state"), None)
            topic = wait_until(listed, 30, "__transaction_state listed")
            assert topic.is_internal
            assert [p.leader_id for p in topic.partitions] == [1 + t % 2 for t in range(PARTITIONS)]
