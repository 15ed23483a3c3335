"""DeleteRecords from real clients: librdkafka's AdminClient.delete_records (confluent-kafka),
kafka-python's KafkaAdminClient.delete_records, and Kafka's own `kafka-delete-records.sh`
(org.apache.kafka.tools.DeleteRecordsCommand from the kafka-tools jar), on both records planes. A consumer
group that starts from the earliest offset afterwards reads from the new log start; a restart keeps it."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid

import pytest
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupd.protocol import ErrorCode
from tests.support.kafka import java_command
from tests.support.kafka_errors import kafka_error
from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module", params=["disk", "memory"])
def server(request, tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp(f"drc-{request.param}")), f"records.plane={request.param}",
                      "num.partitions=2", "group.initial.rebalance.delay.ms=0").start()
    s.plane = request.param
    yield s
    assert s.stop() == 0, s.log()


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list = []
    for i in range(count):
        p.produce(topic, value=f"m{i}".encode(), partition=partition,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors


def consume_from_earliest(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[tuple[int, str]]:
    """(offset, value) of the first `count` records a new group reads from partition 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0)])
    got: list[tuple[int, str]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.offset(), m.value().decode()))
    finally:
        c.close()
    return got


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def test_confluent_admin_delete_records(server):
    topic = f"drc-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    produce(server.bootstrap, topic, 10)
    produce(server.bootstrap, topic, 3, partition=1)
    done = admin.delete_records([TopicPartition(topic, 0, 4), TopicPartition(topic, 1, OFFSET_END)])
    low = {tp.partition: f.result(30).low_watermark for tp, f in done.items()}
    assert low == {0: 4, 1: 3}
    assert watermarks(server.bootstrap, topic) == (4, 10)
    assert consume_from_earliest(server.bootstrap, topic, 6) == [(o, f"m{o}") for o in range(4, 10)]
    (refused,) = admin.delete_records([TopicPartition(topic, 0, 11)]).values()
    assert kafka_error(lambda: refused.result(30)).code() == ErrorCode.offset_out_of_range


def test_kafka_python_admin_delete_records(server):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import NewTopic as KpNewTopic

    topic = f"drk-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([KpNewTopic(topic, 1, 1)])
        produce(server.bootstrap, topic, 5)
        got = admin.delete_records({KpTopicPartition(topic, 0): 2})
        assert [(tp.partition, meta["low_watermark"]) for tp, meta in got.items()] == [(0, 2)]
    finally:
        admin.close()
    assert watermarks(server.bootstrap, topic) == (2, 5)


def test_kafka_delete_records_tool_and_a_restart(server, tmp_path):
    topic = f"drt-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})  # kept while its future is pending
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    produce(server.bootstrap, topic, 8)
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 5}]}))
    out = subprocess.run(java_command("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server",
                                      server.bootstrap, "--offset-json-file", str(spec)),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"partition: {topic}-0\tlow_watermark: 5" in out.stdout, out.stdout
    server.stop(signal.SIGKILL)
    server.start()
    low, high = watermarks(server.bootstrap, topic)
    if server.plane == "disk":  # the records after 5 are kept, the start too
        assert (low, high) == (5, 8)
        assert consume_from_earliest(server.bootstrap, topic, 3) == [(5, "m5"), (6, "m6"), (7, "m7")]
    else:  # the memory plane resumes empty at (or past) its log end
        assert low == high >= 8
