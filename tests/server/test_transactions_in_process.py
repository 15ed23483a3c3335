"""Transactions on the records plane alone, with a server running in this process: the transaction
coordinator is stood in for (its partition check accepts; the markers are written through
`txn_data.write_marker`, as the coordinator and WriteTxnMarkers write them), so that the plane's part
is shown apart from the coordinator's (tests/clients/test_transactions_clients.py has both, with real
producers): transactional batches produced over TCP, one transaction committed and one
aborted, then real read_committed consumers (librdkafka through confluent-kafka, kafka-python) read the
committed records and not the aborted ones, a held read_committed Fetch wakes when a marker moves the
last stable offset, and a transaction coordinator's refusal (`node.transactions.verify_partition`,
seam 3) is the partition's Produce error. Both records planes."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from groupd.coordinator.observability import readiness
from groupd.coordinator.runtime.txn_data import write_marker
from groupd.coordinator.server.server import Server
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from groupd.storage.records_plane import plane_for
from tests.storage.test_records_plane import batch, batches_of, fetch_request, produce
from tests.support.harness import wait_until
from tests.support.process import WireClient, free_port, wait_for


@pytest.fixture(params=["memory", "disk"])
async def server(request, tmp_path):
    port = free_port()
    settings = Settings.load(env={}, overrides=[
        f"listeners=PLAINTEXT://127.0.0.1:{port}", f"data.dir={tmp_path}", "metrics.listener=", "topics=t:1",
        "offsets.topic.num.partitions=2", "group.initial.rebalance.delay.ms=0", f"records.plane={request.param}"])
    s = Server(settings)
    await s.startup()
    await wait_for(lambda: readiness.is_ready(s.node.coordinator), 60)
    s.bootstrap = f"127.0.0.1:{port}"
    coordinator = s.node.transactions
    s.node.transactions = Accepting(coordinator)
    yield s
    s.node.transactions = coordinator  # the real one closes with the server
    await s.shutdown()


class Accepting:
    """The real transaction coordinator, but its partition check accepts every transactional batch."""

    def __init__(self, real) -> None:
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def verify_partition(self, transactional_id, producer_id, producer_epoch, topic, partition):
        return E.none


def produced(bootstrap: str, records: bytes, txn_id: str | None = None) -> int:
    with WireClient(bootstrap) as c:
        r = produce(c, "t", 0, records, transactional_id=txn_id)
    assert r.error_code is E.none, r
    return r.base_offset


def fetched(bootstrap: str, offset: int, isolation: int, wait_ms: int = 0):
    body = fetch_request([("t", 0, offset)], wait_ms=wait_ms)
    body["isolation_level"] = isolation
    with WireClient(bootstrap, timeout=60) as c:
        return c.request(ApiKey.FETCH, 12, body).responses[0].partitions[0]


def read_committed_librdkafka(bootstrap: str, want: int) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("t", 0, OFFSET_BEGINNING)])
        values: list[bytes] = []

        def more() -> bool:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
            return len(values) >= want

        wait_until(more, 60, "the committed records (librdkafka)")
        return values
    finally:
        c.close()


def read_committed_kafka_python(bootstrap: str, want: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition("t", 0)])
        values: list[bytes] = []

        def more() -> bool:
            for records in c.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            return len(values) >= want

        wait_until(more, 60, "the committed records (kafka-python)")
        return values
    finally:
        c.close()


async def test_read_committed_consumers_see_committed_records_and_not_aborted_ones(server):
    b = server.bootstrap
    assert await asyncio.to_thread(produced, b, batch(1, value=b"plain-0")) == 0
    assert await asyncio.to_thread(produced, b, batch(2, value=b"committed", pid=1000, epoch=0, seq=0,
                                                      transactional=True), "tx-a") == 1
    assert await asyncio.to_thread(produced, b, batch(1, value=b"aborted", pid=1001, epoch=0, seq=0,
                                                      transactional=True), "tx-b") == 3
    assert await asyncio.to_thread(produced, b, batch(1, value=b"plain-4")) == 4
    held = asyncio.create_task(asyncio.to_thread(fetched, b, 1, 1, 30_000))  # at the LSO, 1: held
    await wait_for(lambda: plane_for(server.node)._watchers, 20)  # the fetch waits on the partition
    assert await write_marker(server.node, "t", 0, 1000, 0, True, 0) is E.none  # offset 5
    woken = await held  # the commit moved the LSO to 3 (tx-b's first offset): the held fetch is answered
    assert woken.last_stable_offset == 3 and [x.base_offset for x in batches_of(woken.records)] == [1]
    assert await write_marker(server.node, "t", 0, 1001, 0, False, 0) is E.none  # offset 6

    f = await asyncio.to_thread(fetched, b, 0, 1)
    assert (f.high_watermark, f.last_stable_offset) == (7, 7)
    assert [(a.producer_id, a.first_offset) for a in f.aborted_transactions] == [(1001, 3)]
    assert [(x.base_offset, x.is_control_batch) for x in batches_of(f.records)] == \
        [(0, False), (1, False), (3, False), (4, False), (5, True), (6, True)]
    from_4 = await asyncio.to_thread(fetched, b, 4, 1)  # its marker (6) lies ahead: still listed, as Kafka
    assert [(a.producer_id, a.first_offset) for a in from_4.aborted_transactions] == [(1001, 3)]

    # a transaction left open after them holds both consumers at its first offset
    assert await asyncio.to_thread(produced, b, batch(1, value=b"open", pid=1002, epoch=0, seq=0,
                                                      transactional=True), "tx-c") == 7
    assert await asyncio.to_thread(produced, b, batch(1, value=b"plain-8")) == 8
    expected = sorted([b"plain-0", b"committed", b"committed", b"plain-4"])
    assert sorted(await asyncio.to_thread(read_committed_librdkafka, b, 4)) == expected
    assert sorted(await asyncio.to_thread(read_committed_kafka_python, b, 4)) == expected


async def test_the_transaction_coordinators_refusal_is_the_partitions_produce_error(server):
    asked = []

    class Coordinator(Accepting):
        def verify_partition(self, transactional_id, producer_id, producer_epoch, topic, partition):
            asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
            return E.invalid_producer_id_mapping if transactional_id == "tx-unknown" else E.none

    server.node.transactions = Coordinator(server.node.transactions)

    def produce_all() -> None:  # off the loop: the server answers on it
        with WireClient(server.bootstrap) as c:
            r = produce(c, "t", 0, batch(1, pid=2000, epoch=0, seq=0, transactional=True),
                        transactional_id="tx-unknown")
            assert r.error_code is E.invalid_producer_id_mapping
            r = produce(c, "t", 0, batch(1, pid=2001, epoch=3, seq=0, transactional=True), transactional_id="tx-ok")
            assert (r.error_code, r.base_offset) == (E.none, 0)
            r = produce(c, "t", 0, batch(1, pid=2001, epoch=3, seq=1, transactional=True), transactional_id="tx-ok")
            assert (r.error_code, r.base_offset) == (E.none, 1)  # open on the partition now: not asked again

    await asyncio.to_thread(produce_all)
    assert asked == [("tx-unknown", 2000, 0, "t", 0), ("tx-ok", 2001, 3, "t", 0)]
