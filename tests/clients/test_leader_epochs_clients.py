"""librdkafka (confluent-kafka) against groupd's leader epochs: a consumer learns the epoch of what it
reads (0, from the batches and Metadata) and commits it with its position; a consumer resumes from
that commit; one that seeks to a position with an epoch validates it with OffsetForLeaderEpoch
(KIP-320) before it fetches, and reads on from there (nothing is reported truncated)."""

from __future__ import annotations

import time
import urllib.request

import pytest

from tests.storage.test_records_plane import batch, produce
from tests.support.process import GroupdProcess, WireClient, free_port

pytestmark = pytest.mark.clients

TOPIC = "epochs"


@pytest.fixture(scope="module", params=["disk", "memory"])
def server(request, tmp_path_factory):
    port = free_port()
    s = GroupdProcess(str(tmp_path_factory.mktemp(f"epochs-{request.param}")), f"records.plane={request.param}",
                      f"topics={TOPIC}:1", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
                      f"metrics.listener=http://127.0.0.1:{port}/metrics").start()
    s.metrics_url = f"http://127.0.0.1:{port}/metrics"
    with WireClient(s.bootstrap) as c:
        for _ in range(10):
            assert produce(c, TOPIC, 0, batch(1)).error_code.value == 0
    yield s
    assert s.stop() == 0, s.log()


def validations(server) -> float:
    """OffsetForLeaderEpoch requests answered so far."""
    text = urllib.request.urlopen(server.metrics_url, timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('groupd_requests_total{api="offset_for_leader_epoch"'))


def consume(consumer, count: int) -> list:
    got, deadline = [], time.monotonic() + 60
    while len(got) < count:
        assert time.monotonic() < deadline, f"consumed {[m.offset() for m in got]}"
        m = consumer.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m)
    return got


def test_the_epoch_is_committed_with_the_position_and_consumption_resumes_there(server, request):
    from confluent_kafka import Consumer, TopicPartition

    group = "epochs-" + request.node.name[-12:]
    config = {"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    first = Consumer(config)
    try:
        first.subscribe([TOPIC])
        got = consume(first, 4)
        assert [(m.offset(), m.leader_epoch()) for m in got] == [(i, 0) for i in range(4)]
        first.commit(message=got[-1], asynchronous=False)  # offset 4 with the message's epoch
        (committed,) = first.committed([TopicPartition(TOPIC, 0)], timeout=10)
        assert (committed.offset, committed.leader_epoch) == (4, 0)
    finally:
        first.close()
    second = Consumer(config)
    try:
        second.subscribe([TOPIC])
        assert [m.offset() for m in consume(second, 6)] == list(range(4, 10))
    finally:
        second.close()


def test_a_seek_with_an_epoch_is_validated_and_reads_from_there(server):
    from confluent_kafka import Consumer, TopicPartition

    before = validations(server)
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "epochs-seek",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 7, leader_epoch=0)])
        assert [(m.offset(), m.leader_epoch()) for m in consume(consumer, 3)] == [(7, 0), (8, 0), (9, 0)]
    finally:
        consumer.close()
    assert validations(server) > before
