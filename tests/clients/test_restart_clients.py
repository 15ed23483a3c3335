"""Issue 22 with the other real clients (confluent-kafka and kcat: tests/storage/test_records_restart.py):
produce 3, a group consumes them committing after each, groupd restarts on the same data dir and port
(SIGTERM or kill -9), 3 more are produced and the same group reads exactly the 3 new ones at offsets
3..5 — the disk records plane (the default) kept the records and the committed offsets. Commits are
synchronous, so not even at-least-once's re-read of an uncommitted record is expected."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from tests.support.harness import CLIENTS_DIR
from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients
HERE = os.path.dirname(__file__)
TOPIC, GROUP = "t", "g"
FIRST, SECOND = ["m1", "m2", "m3"], ["m4", "m5", "m6"]
SIGNALS = pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])


def kafka_python(bootstrap: str, values: list[str]) -> list[tuple[int, str]]:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        p.send(TOPIC, value=v.encode(), partition=0).get(30)
    p.close(10)
    c = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000)
    got: list[tuple[int, str]] = []
    deadline = time.monotonic() + 90
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            for tp, records in c.poll(timeout_ms=500).items():
                for r in records:
                    got.append((r.offset, r.value.decode()))
                    c.commit({TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(r.offset + 1, None, -1)})
    finally:
        c.close()
    return got


def aiokafka(bootstrap: str, values: list[str]) -> list[tuple[int, str]]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def run() -> list[tuple[int, str]]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await p.start()
        try:
            for v in values:
                await p.send_and_wait(TOPIC, v.encode(), partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000)
        await c.start()
        got: list[tuple[int, str]] = []
        deadline = time.monotonic() + 90
        try:
            while len(got) < len(values) and time.monotonic() < deadline:
                for tp, records in (await c.getmany(timeout_ms=500)).items():
                    for r in records:
                        got.append((r.offset, r.value.decode()))
                        await c.commit({TopicPartition(tp.topic, tp.partition): r.offset + 1})
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def program(args: list[str], what: str) -> list[tuple[int, str]]:
    """One of the single-file programs: produces the values, consumes as many in the group, one JSON line."""
    if shutil.which(args[0]) is None or not os.path.isdir(os.path.join(CLIENTS_DIR, what)):
        pytest.fail(f"{what} is not installed under {CLIENTS_DIR} (.ci/install-clients)")  # never a skip
    out = subprocess.run(args, capture_output=True, text=True, timeout=180,
                         env={**os.environ, "KAFKA_TEST_CLIENTS": CLIENTS_DIR})
    assert out.returncode == 0, (out.stdout, out.stderr[-3000:])
    return [tuple(r) for r in json.loads(out.stdout.strip().splitlines()[-1])["records"]]


def java(bootstrap: str, values: list[str]) -> list[tuple[int, str]]:
    return program(["java", "-cp", os.path.join(CLIENTS_DIR, "java", "lib", "*"),
                    os.path.join(HERE, "java", "ProduceConsume.java"), bootstrap, TOPIC, GROUP, ",".join(values)],
                   "java/lib")


def kafkajs(bootstrap: str, values: list[str]) -> list[tuple[int, str]]:
    return program(["node", os.path.join(HERE, "node", "produce_consume.mjs"), bootstrap, TOPIC, GROUP,
                    ",".join(values)], "node/node_modules")


def produce_consume_restart_produce_consume(data_dir: str, client, sig: int) -> None:
    s = GroupdProcess(data_dir, "records.plane=disk", f"topics={TOPIC}:1", "group.initial.rebalance.delay.ms=0").start()
    try:
        assert client(s.bootstrap, FIRST) == [(0, "m1"), (1, "m2"), (2, "m3")]
        s.stop(sig)
        s.start()
        assert client(s.bootstrap, SECOND) == [(3, "m4"), (4, "m5"), (5, "m6")]
    finally:
        s.stop()


@SIGNALS
@pytest.mark.parametrize("client", [kafka_python, aiokafka], ids=["kafka-python", "aiokafka"])
def test_a_python_client_group_reads_exactly_the_new_records_after_a_restart(tmp_path, client, sig):
    produce_consume_restart_produce_consume(str(tmp_path), client, sig)


@SIGNALS
@pytest.mark.parametrize("client", [java, kafkajs], ids=["java", "kafkajs"])
def test_the_java_client_and_kafkajs_read_exactly_the_new_records_after_a_restart(tmp_path, client, sig):
    produce_consume_restart_produce_consume(str(tmp_path), client, sig)
