"""Kafka Connect 4.3 in distributed mode against groupd, end to end (issue 22): two workers
(tests/support/connect.py) run a FileStreamSource (a file's lines into a topic) and a FileStreamSink
(the topic back into a file). Every line reaches the topic and the sink file exactly once while:
a worker is killed with -9 and its connectors and tasks fail over to the other (KIP-415); groupd
restarts after SIGTERM and after kill -9 under the running worker, which stops its tasks and restarts
them from the stored offsets; a third worker started after those restarts reads the connectors from
the config topic (issue 22's "Current config state offset -1 does not match group assignment"), joins
and takes its share of the work. Connect's internal topics are created compacted, as it demands.

Exactly once, not merely at least once: before each kill and restart the test waits until the source's
offset (KIP-875's offsets API) has reached the end of the input file and the sink's group has committed
the topic's end, so a resumed task has nothing to replay: a duplicate means a lost offset or a
source that started over.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.support.connect import FILE_SINK, FILE_SOURCE, ConnectWorker, RestError, wait_until
from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients

GROUP = "connect"
TOPIC = "lines"
BATCH = 100  # lines appended per step


class Pipeline:
    """The input file, the topic and the sink file, and what has been written so far."""

    def __init__(self, tmp: str, server: GroupdProcess) -> None:
        self.server = server
        self.source_file = os.path.join(tmp, "in.txt")
        self.sink_file = os.path.join(tmp, "out.txt")
        self.written = 0
        open(self.source_file, "w").close()

    def append(self, n: int = BATCH) -> None:
        with open(self.source_file, "a") as f:
            f.writelines(f"line-{i:05d}\n" for i in range(self.written, self.written + n))
        self.written += n

    def expected(self) -> list[str]:
        return [f"line-{i:05d}" for i in range(self.written)]

    def topic_lines(self) -> list[str]:
        return read_topic(self.server, TOPIC)

    def sink_lines(self) -> list[str]:
        if not os.path.exists(self.sink_file):
            return []
        with open(self.sink_file) as f:
            return f.read().splitlines()

    def sink_committed(self) -> int:
        c = Consumer({"bootstrap.servers": self.server.bootstrap, "group.id": f"connect-{SINK}"})
        try:
            return c.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset
        finally:
            c.close()


def read_topic(server: GroupdProcess, topic: str, partitions: int = 1) -> list[str]:
    """Every value in `topic`, partition by partition, up to the high watermarks of now."""
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "connect-test-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        values: list[str] = []
        for p in range(partitions):
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            c.assign([TopicPartition(topic, p, 0)])
            position = 0
            deadline = time.monotonic() + 60
            while position < high:
                assert time.monotonic() < deadline, f"{topic}-{p} read to {position} of {high}"
                for m in c.consume(500, timeout=2):
                    if m.error() is None:
                        values.append(m.value().decode())
                        position = m.offset() + 1
        return values
    finally:
        c.close()


SOURCE = "file-source"
SINK = "file-sink"


def settled(pipe: Pipeline, worker: ConnectWorker, timeout: float = 120.0) -> None:
    """Every line written is in the topic and the sink file, the source's stored offset is the input's
    end and the sink's group committed the topic's end: nothing is left to replay."""
    size = os.path.getsize(pipe.source_file)

    last: dict = {}

    def done() -> bool:
        try:
            last["source offsets"] = worker.offsets(SOURCE)
            last["sink file lines"] = len(pipe.sink_lines())
            last["sink committed"] = pipe.sink_committed()
        except (OSError, RestError, KafkaException):  # a worker mid-rebalance answers 409 or 500: ask again
            return False
        return ([o["offset"]["position"] for o in last["source offsets"]] == [size]
                and last["sink file lines"] >= pipe.written and last["sink committed"] >= pipe.written)
    wait_until(done, timeout, lambda: f"pipeline settled at {pipe.written} lines: {last}", worker)
    assert pipe.topic_lines() == pipe.expected()
    assert pipe.sink_lines() == pipe.expected()


def restart(server: GroupdProcess, sig: int) -> None:
    server.stop(sig)
    server.start(timeout=60)


@pytest.fixture
def cluster(tmp_path):
    server = GroupdProcess(str(tmp_path), "group.initial.rebalance.delay.ms=0").start()
    workers: list[ConnectWorker] = []

    def worker(name: str) -> ConnectWorker:
        w = ConnectWorker(str(tmp_path), server.bootstrap, group=GROUP, name=name).launch()
        workers.append(w)
        return w
    yield server, worker
    for w in workers:
        w.stop()
    assert server.stop() == 0


def test_connect_distributed_survives_worker_and_groupd_restarts(cluster, tmp_path):
    server, worker = cluster
    a, b = worker("a"), worker("b")  # both JVMs start at once
    a.wait_ready()
    b.wait_ready()

    # Connect created its internal topics compacted (it refuses to use them otherwise)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, f"{GROUP}-{kind}") for kind in ("configs", "offsets", "status")]
    for resource, future in admin.describe_configs(resources).items():
        assert future.result(10)["cleanup.policy"].value == "compact", resource

    pipe = Pipeline(str(tmp_path), server)
    pipe.append()
    a.create_connector(SOURCE, {"connector.class": FILE_SOURCE, "file": pipe.source_file, "topic": TOPIC,
                                "tasks.max": "1"})
    a.create_connector(SINK, {"connector.class": FILE_SINK, "file": pipe.sink_file, "topics": TOPIC,
                              "tasks.max": "1"})
    a.wait_running(SOURCE)
    a.wait_running(SINK)
    settled(pipe, a)

    # kill -9 the worker running the source's task: after the session timeout and the scheduled
    # rebalance delay, the survivor runs the connectors and the task, resuming from the stored offset
    task_worker = a.status(SOURCE)["tasks"][0]["worker_id"]
    dead, alive = (a, b) if task_worker == a.worker_id else (b, a)
    dead.kill()
    pipe.append()
    wait_until(lambda: alive.runs(SOURCE, SINK) == {alive.worker_id}, 120, "the survivor runs everything", alive)
    for name in (SOURCE, SINK):
        alive.wait_running(name)
    settled(pipe, alive)

    # groupd restarts under the running worker, gracefully then with kill -9: when the coordinator stays
    # unreachable for a heartbeat interval, Connect stops its work and restarts it once it has rejoined;
    # the source resumes from its stored offset, the sink from its committed one; configs and status survive
    for sig in (signal.SIGTERM, signal.SIGKILL):
        restart(server, sig)
        pipe.append()
        settled(pipe, alive)
        assert set(alive.get("/connectors")) == {SOURCE, SINK}
        for name in (SOURCE, SINK):
            alive.wait_running(name)

    # a worker started now reads the connectors from the config topic and takes its share of the work
    c = worker("c").wait_ready()
    assert set(c.get("/connectors")) == {SOURCE, SINK}
    wait_until(lambda: c.runs(SOURCE, SINK) == {alive.worker_id, c.worker_id}, 120,
               "both workers run a share of the connectors and tasks", c)
    for name in (SOURCE, SINK):
        c.wait_running(name)
    pipe.append()
    settled(pipe, c)


def test_offsets_api_topic_creation_and_a_deleted_connector_across_a_kill(cluster, tmp_path):
    """One worker, JSON values without schemas: a source creates its topic with the configs it asks for
    (KIP-158); a stopped sink's offsets are altered and reset through the REST API (KIP-875: Connect
    commits and deletes its consumer group's offsets with the admin client); a deleted connector (a
    tombstone in the compacted config topic) stays deleted after groupd is killed with -9, while the
    other keeps its config and offset for a worker started afterwards."""
    server, worker = cluster
    json_values = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
                   "value.converter.schemas.enable": "false"}
    a = worker("a").wait_ready()
    pipe = Pipeline(str(tmp_path), server)
    pipe.append(10)
    a.create_connector(SOURCE, {"connector.class": FILE_SOURCE, "file": pipe.source_file, "topic": "made",
                                "tasks.max": "1", **json_values,
                                "topic.creation.default.replication.factor": "-1",
                                "topic.creation.default.partitions": "2",
                                "topic.creation.default.retention.ms": "3600000"})
    a.create_connector(SINK, {"connector.class": FILE_SINK, "file": pipe.sink_file, "topics": "made",
                              "tasks.max": "1", **json_values})
    a.wait_running(SOURCE)
    a.wait_running(SINK)
    wait_until(lambda: len(pipe.sink_lines()) == 10, 120, "the sink wrote every line", a)
    assert sorted(pipe.sink_lines()) == pipe.expected()
    assert sorted(read_topic(server, "made", 2)) == [f'"{line}"' for line in pipe.expected()]  # JSON strings

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    assert len(admin.list_topics("made", timeout=10).topics["made"].partitions) == 2
    resource = ConfigResource(ResourceType.TOPIC, "made")
    assert admin.describe_configs([resource])[resource].result(10)["retention.ms"].value == "3600000"

    size = os.path.getsize(pipe.source_file)
    wait_until(lambda: [o["offset"] for o in a.offsets(SOURCE)] == [{"position": size}], 60,
               "the source's offset stored", a)
    a.request("PUT", f"/connectors/{SINK}/stop")
    wait_until(lambda: (a.status(SINK) or {}).get("connector", {}).get("state") == "STOPPED", 60,
               "the sink stopped", a)
    a.request("PATCH", f"/connectors/{SINK}/offsets", {"offsets": [
        {"partition": {"kafka_topic": "made", "kafka_partition": 1}, "offset": {"kafka_offset": 3}}]})
    committed = {(o["partition"]["kafka_partition"], o["offset"]["kafka_offset"]) for o in a.offsets(SINK)}
    assert (1, 3) in committed
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"connect-{SINK}"})
    try:
        assert c.committed([TopicPartition("made", 1)], timeout=10)[0].offset == 3
        a.request("DELETE", f"/connectors/{SINK}/offsets")
        assert a.offsets(SINK) == []
        assert all(tp.offset < 0 for tp in c.committed([TopicPartition("made", p) for p in (0, 1)], timeout=10))
    finally:
        c.close()

    a.request("DELETE", f"/connectors/{SINK}")
    wait_until(lambda: a.get("/connectors") == [SOURCE], 60, "the sink deleted", a)
    a.kill()
    restart(server, signal.SIGKILL)
    b = worker("b").wait_ready()
    assert b.get("/connectors") == [SOURCE]
    b.wait_running(SOURCE)
    assert [o["offset"] for o in b.offsets(SOURCE)] == [{"position": size}]
