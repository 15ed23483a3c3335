"""Real client libraries against the real server: metadata, topic admin, and consumers with
manual assignment idling on empty fetches without errors or reconnect loops."""

import asyncio
import json
import logging
import shutil
import subprocess
import time

import pytest

from tests.support.process import established_peers

pytestmark = pytest.mark.clients
IDLE_S = 6


def test_kcat_lists_groupd_as_the_broker_and_the_catalog_topics(groupd):
    out = subprocess.run(["kcat", "-b", groupd.bootstrap, "-L", "-J"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    meta = json.loads(out.stdout)
    assert [(b["id"], b["name"]) for b in meta["brokers"]] == [(1, groupd.bootstrap)]
    topics = {t["topic"]: len(t["partitions"]) for t in meta["topics"]}
    assert topics["t3"] == 3 and topics["t6"] == 6
    assert topics["__consumer_offsets"] == 50  # listed as Kafka lists its internal topic


def test_kcat_produces_and_consumes_with_the_default_settings(groupd):
    """The README's quick start: messages flow without any records setting."""
    lines = [f"message-{i}" for i in range(5)]
    produced = subprocess.run(["kcat", "-b", groupd.bootstrap, "-P", "-t", "quick-start"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0 and "error" not in produced.stderr.lower(), produced.stderr
    consumed = subprocess.run(["kcat", "-b", groupd.bootstrap, "-C", "-t", "quick-start", "-o", "beginning", "-e"],
                              capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines


def test_java_admin_lists_consumer_offsets_only_when_asked_for_internal_topics(groupd):
    import os

    from tests.support.harness import CLIENTS_DIR, stack_available
    from tests.support.process import ROOT

    why = stack_available("java")
    if why:
        pytest.fail(why)
    out = subprocess.run(["java", "-cp", os.path.join(CLIENTS_DIR, "java", "lib", "*"),
                          os.path.join(ROOT, "tests", "clients", "java", "ListTopics.java"), groupd.bootstrap],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["internal"]["__consumer_offsets"] is True and seen["internal"]["t3"] is False
    assert "__consumer_offsets" not in seen["names"] and "t3" in seen["names"]
    assert seen["described"] == {"partitions": 50, "internal": True}


def test_kcat_reads_the_offsets_log_from_consumer_offsets(groupd):
    from confluent_kafka import Consumer, TopicPartition

    from groupd.coordinator.core.partitioning import partition_for

    c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": "kcat-reads-this", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("t3", 0, 42)], asynchronous=False)
    c.close()
    p = partition_for("kcat-reads-this", 50)
    out = subprocess.run(["kcat", "-b", groupd.bootstrap, "-C", "-t", "__consumer_offsets", "-p", str(p), "-o",
                          "beginning", "-e", "-f", "%k\n"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert b"kcat-reads-this" in out.stdout  # the OffsetCommitKey's group id, as Kafka's log holds it


def test_confluent_admin_creates_lists_and_grows_topics(groupd):
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    for f in admin.create_topics([NewTopic("ck-admin", 2, 1)]).values():
        f.result(10)
    assert len(admin.list_topics(timeout=10).topics["ck-admin"].partitions) == 2
    for f in admin.create_partitions([NewPartitions("ck-admin", 5)]).values():
        f.result(10)
    assert len(admin.list_topics(timeout=10).topics["ck-admin"].partitions) == 5
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        for f in admin.create_topics([NewTopic("ck-admin", 2, 1)]).values():
            f.result(10)
    for f in admin.delete_topics(["ck-admin"]).values():
        f.result(10)
    assert "ck-admin" not in admin.list_topics(timeout=10).topics


def assert_no_reconnects(port: int, idle, seconds: float = IDLE_S):
    """Run `idle(deadline)` and check the client's connections stayed the same ones."""
    time.sleep(0.01)
    first = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idle(min(deadline, time.monotonic() + 1.5))
        now = established_peers(port)
        if first is None:
            first = now
    assert first and now == first, f"connections changed: {sorted(first)} -> {sorted(now)}"


def test_confluent_consumer_with_manual_assignment_idles_quietly(groupd):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    errors = []
    c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": "ck-manual",
                  "enable.auto.commit": False, "error_cb": lambda e: errors.append(str(e))})
    c.assign([TopicPartition("t3", p, OFFSET_BEGINNING) for p in range(3)])
    polled = []

    def idle(until):
        while time.monotonic() < until:
            m = c.poll(0.2)
            if m is not None:
                polled.append(m.error() or m.value())

    try:
        assert_no_reconnects(groupd.port, idle)
    finally:
        c.close()
    assert errors == [] and polled == []


def test_kafka_python_consumer_with_manual_assignment_idles_quietly(groupd, caplog):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=groupd.bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    c.assign([TopicPartition("t3", p) for p in range(3)])
    records = []
    caplog.set_level(logging.WARNING, logger="kafka")

    def idle(until):
        while time.monotonic() < until:
            records.extend(r for batch in c.poll(timeout_ms=200).values() for r in batch)

    try:
        assert_no_reconnects(groupd.port, idle)
        assert [c.position(TopicPartition("t3", p)) for p in range(3)] == [0, 0, 0]
    finally:
        c.close()
    assert records == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_aiokafka_consumer_with_manual_assignment_idles_quietly(groupd, caplog):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    caplog.set_level(logging.WARNING, logger="aiokafka")

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=groupd.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition("t6", p) for p in range(6)])
            records = []
            loop = asyncio.get_running_loop()
            first = None
            end = time.monotonic() + IDLE_S
            while time.monotonic() < end:
                batches = await c.getmany(timeout_ms=500)
                records.extend(r for batch in batches.values() for r in batch)
                if first is None and time.monotonic() > end - IDLE_S + 1:
                    first = established_peers(groupd.port)
            assert established_peers(groupd.port) == first
            assert [await c.position(TopicPartition("t6", p)) for p in range(6)] == [0] * 6
            return records
        finally:
            await c.stop()

    assert asyncio.run(run()) == []
    assert [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and r.name.startswith("aiokafka")] == []


@pytest.mark.parametrize("stack", ["java", "kafkajs", "platformatic"])
def test_other_stacks_with_manual_assignment_idle_quietly(groupd, stack):
    """Java: assign() + empty fetches. KafkaJS has no assign(): it polls metadata and offsets
    through its admin client. platformatic: a group-less Consumer.fetch() loop."""
    from tests.support.harness import ClientProcess, stack_available

    why = stack_available(stack)
    if why:
        pytest.fail(why)
    client = ClientProcess(stack, "assign", groupd.bootstrap, {"topic": "t3", "seconds": IDLE_S + 2})
    try:
        client.wait_for(lambda e: e["event"] == "assigned", 60)
        time.sleep(1.5)  # past start-up: the connections it idles on are open
        first = established_peers(groupd.port)
        time.sleep(IDLE_S - 2)
        assert established_peers(groupd.port) == first, "connections changed: a reconnect loop"
        assert client.wait(60) == 0, (client.events, client.stderr_tail())
    finally:
        client.close()
    summary = client.wait_for(lambda e: e["event"] == "summary", 5)
    assert summary["errors"] == 0 and not client.errors()
    assert first, "the client held connections while idling"
    assert sorted(client.wait_for(lambda e: e["event"] == "assigned")["partitions"]) == ["t3-0", "t3-1", "t3-2"]
