"""Transactional batches over the wire against the real server, both records planes. Each transaction
is opened at the transaction coordinator first (InitProducerId, AddPartitionsToTxn): Produce verifies
its partitions there (`node.transactions.verify_partition`). Markers are proven at plane level in
test_records_transactions.py and tests/runtime/test_records_disk_transactions.py, end to end in
tests/clients/test_transactions_clients.py.

An open transaction holds the last stable offset at its first offset: a read_committed Fetch gets nothing
from there (aborted_transactions an empty list), read_uncommitted gets everything (aborted_transactions
null, as Kafka), ListOffsets read_committed answers the LSO; the producer may not write outside its
transaction (INVALID_TXN_STATE); the disk plane rebuilds the open transaction after kill -9."""

from __future__ import annotations

import datetime

import pytest

from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from tests.storage.test_records_plane import MS, NOW, batch, batches_of, fetch_request, fresh_topic, produce
from tests.support.process import GroupdProcess, WireClient

LATEST = -1


@pytest.fixture(scope="module", params=["memory", "disk"])
def server(request, tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp(f"groupd-txn-{request.param}")), f"records.plane={request.param}",
                      "group.initial.rebalance.delay.ms=0").start()
    yield s
    s.stop()


def begin(c: WireClient, transactional_id: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """A transaction at the coordinator holding `topic`-`partition`: (producer id, epoch)."""
    r = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": transactional_id,
                                               "transaction_timeout": datetime.timedelta(minutes=1),
                                               "producer_id": -1, "producer_epoch": -1})
    assert r.error_code is E.none, r
    added = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": r.producer_id,
        "v3_and_below_producer_epoch": r.producer_epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]})
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code is E.none
    return r.producer_id, r.producer_epoch


def fetch(c: WireClient, topic: str, offset: int, isolation: int, version: int = 12):
    body = fetch_request([(topic, 0, offset)])
    body["isolation_level"] = isolation
    return c.request(ApiKey.FETCH, version, body).responses[0].partitions[0]


def latest(c: WireClient, topic: str, isolation: int) -> int:
    r = c.request(ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": LATEST}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code is E.none
    return p.offset


def test_an_open_transaction_holds_the_last_stable_offset(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c)
        assert produce(c, topic, 0, batch(2)).base_offset == 0  # committed: not transactional
        pid, epoch = begin(c, f"tx-a-{topic}", topic)
        r = produce(c, topic, 0, batch(3, pid=pid, epoch=epoch, seq=0, transactional=True),
                    transactional_id=f"tx-a-{topic}")
        assert (r.error_code, r.base_offset) == (E.none, 2)
        assert produce(c, topic, 0, batch(1)).base_offset == 5  # after the open transaction: not yet stable

        uncommitted = fetch(c, topic, 0, isolation=0)
        assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (6, 2)
        assert uncommitted.aborted_transactions is None  # Kafka sends null under read_uncommitted
        assert [b.base_offset for b in batches_of(uncommitted.records)] == [0, 2, 5]

        committed = fetch(c, topic, 0, isolation=1)
        assert (committed.high_watermark, committed.last_stable_offset) == (6, 2)
        assert committed.aborted_transactions == ()
        assert [b.base_offset for b in batches_of(committed.records)] == [0]  # only below the LSO
        past = fetch(c, topic, 2, isolation=1)
        assert (past.error_code, past.records or b"") == (E.none, b"")  # at the LSO: nothing, not out of range
        beyond = fetch(c, topic, 7, isolation=1)
        assert (beyond.error_code, beyond.aborted_transactions) == (E.offset_out_of_range, None)  # an error: null

        assert (latest(c, topic, 0), latest(c, topic, 1)) == (6, 2)

        # the producer may not write outside its open transaction; inside it, it may
        r = produce(c, topic, 0, batch(1, pid=pid, epoch=epoch, seq=3), transactional_id=f"tx-a-{topic}")
        assert r.error_code is E.invalid_txn_state
        r = produce(c, topic, 0, batch(1, pid=pid, epoch=epoch, seq=3, transactional=True),
                    transactional_id=f"tx-a-{topic}")
        assert (r.error_code, r.base_offset) == (E.none, 6)
        assert latest(c, topic, 1) == 2


def test_transactional_records_need_a_transactional_id(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c, partitions=2)
        # as KafkaApis: the whole request is refused, its plain partition too
        r = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout": 5000 * MS, "topic_data": [
            {"name": topic, "partition_data": [
                {"index": 0, "records": batch(1)},
                {"index": 1, "records": batch(1) + batch(1, pid=901, epoch=0, seq=0, transactional=True)}]}]})
        errors = [(p.index, p.error_code) for p in r.responses[0].partition_responses]
        assert errors == [(0, E.transactional_id_authorization_failed), (1, E.transactional_id_authorization_failed)]
        assert (latest(c, topic, 0), latest(c, topic, 1)) == (0, 0)


def test_the_disk_plane_rebuilds_an_open_transaction_after_kill_9(tmp_path):
    s = GroupdProcess(str(tmp_path), "records.plane=disk", "topics=t:1", "group.initial.rebalance.delay.ms=0").start()
    try:
        with WireClient(s.bootstrap) as c:
            assert produce(c, "t", 0, batch(2)).base_offset == 0
            pid, epoch = begin(c, "tx-b", "t")
            assert produce(c, "t", 0, batch(2, pid=pid, epoch=epoch, seq=0, transactional=True),
                           transactional_id="tx-b").base_offset == 2
            assert produce(c, "t", 0, batch(1)).base_offset == 4
        s.kill()
        s.start()
        with WireClient(s.bootstrap) as c:
            assert (latest(c, "t", 0), latest(c, "t", 1)) == (5, 2)
            f = fetch(c, "t", 0, isolation=1)
            assert (f.last_stable_offset, [b.base_offset for b in batches_of(f.records)]) == (2, [0])
            r = produce(c, "t", 0, batch(1, pid=pid, epoch=epoch, seq=2), transactional_id="tx-b")
            assert r.error_code is E.invalid_txn_state  # its transaction is still open after the restart
    finally:
        s.stop()


def test_describe_producers(server):
    with WireClient(server.bootstrap) as c:
        topic = fresh_topic(c, partitions=2)
        produce(c, topic, 0, batch(2))  # no producer id: not a producer Kafka tracks
        produce(c, topic, 0, batch(2, pid=903, epoch=1, seq=0))
        pid, epoch = begin(c, f"tx-d-{topic}", topic)
        produce(c, topic, 0, batch(3, pid=pid, epoch=epoch, seq=0, transactional=True), transactional_id=f"tx-d-{topic}")
        r = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0, 1, 5]},
                                                               {"name": "no-such-topic", "partition_indexes": [0]}]})
        p0, p1, p5 = r.topics[0].partitions
        assert (p0.error_code, p1.error_code, p5.error_code) == (E.none, E.none, E.unknown_topic_or_partition)
        got = sorted((p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch,
                      p.current_txn_start_offset) for p in p0.active_producers)
        assert got == sorted([(903, 1, 1, -1, -1), (pid, epoch, 2, -1, 4)])
        # the last timestamp: the max timestamp of the producer's last batch, as Kafka's producer state
        by_id = {p.producer_id: p.last_timestamp for p in p0.active_producers}
        assert (by_id[903], by_id[pid]) == (NOW + 1, NOW + 2)
        assert p1.active_producers == ()
        assert r.topics[1].partitions[0].error_code is E.unknown_topic_or_partition

    # a real client: kafka-python's admin (kafka-transactions.sh describe-producers does the same)
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30000)
    try:
        state = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
        assert sorted((p.producer_id, p.current_transaction_start_offset) for p in state.active_producers) == \
            sorted([(903, -1), (pid, 4)])
    finally:
        admin.close()
