"""Exactly-once end to end with real clients (issue 23): confluent-kafka's (librdkafka's) transactional
producer against groupd's transaction coordinator, records plane and group coordinator together.

- a committed transaction is seen by a read_committed consumer, an aborted one never is;
- a consume-transform-produce loop with send_offsets_to_transaction(position, group metadata): the
  output holds each input record once and the group's committed offsets end at the input's end;
- a zombie with the same transactional.id is fenced and its records are never seen;
- an open transaction survives a kill -9 of the server and commits after it;
- exactly once through crashes: consume-transform-produce workers killed -9 in turn, the server killed
  -9 once, every input in the read_committed output exactly once (tests/clients/python/eos_worker.py);
- kafka-python's and aiokafka's transactional producers commit and abort too (aiokafka: every
  transaction API at v0, offsets by group id without KIP-447 metadata);
- the Java client (kafka-clients 4.3): a consume-transform-produce loop with
  sendOffsetsToTransaction(offsets, consumer.groupMetadata()), then fenced by a second producer with
  its transactional.id (tests/clients/java/TransactionalCopy.java); with `transaction.version` finalized
  at 2 (the default: transactions v2, KIP-890, every end bumping the epoch) and at 1 (transactions
  v1), each poll's records first written in an aborted transaction, then in a committed one.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.support.harness import CLIENTS_DIR, wait_until
from tests.support.process import GroupdProcess
from tests.support.transactions import read_values, transform_in_transactions

pytestmark = pytest.mark.clients

READY = ("groupd ready", "offsets log loaded")  # the transaction log loads before the listeners open
HERE = os.path.dirname(__file__)
SETTINGS = ("topics=plain:1,in:1,out:1,zombie:1,restart:1,kp:1,java-in:1,java-out:1,aio:1,hang:1", "group.initial.rebalance.delay.ms=0",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp("groupd-txn-clients")), *SETTINGS, ready=READY).start()
    yield s
    assert s.stop() == 0, s.log()


def producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": 60000, **extra})


def read(bootstrap: str, topic: str, until: str, committed: bool = True) -> list[str]:
    """Values of `topic` (partition 0) from the start until one equals `until`, read_committed or not."""
    return read_values(bootstrap, topic, 1, lambda seen: until in seen, repr(until), committed)


def test_committed_records_are_seen_and_aborted_ones_never(server):
    p = producer(server.bootstrap, "tx-plain")
    p.init_transactions(30)
    p.begin_transaction()
    for v in ("c1", "c2"):
        p.produce("plain", v.encode(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("plain", b"a1", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("plain", b"c3", partition=0)
    p.commit_transaction(30)
    assert read(server.bootstrap, "plain", "c3") == ["c1", "c2", "c3"]
    assert read(server.bootstrap, "plain", "c3", committed=False) == ["c1", "c2", "a1", "c3"]


def test_consume_transform_produce_with_send_offsets_to_transaction(server):
    source = Producer({"bootstrap.servers": server.bootstrap})
    inputs = [f"in-{i}" for i in range(20)]
    for v in inputs:
        source.produce("in", v.encode(), partition=0)
    source.flush(30)

    group = "ctp"
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["in"])
    p = producer(server.bootstrap, "tx-ctp")
    p.init_transactions(30)
    try:
        done = transform_in_transactions(consumer, p, "out", len(inputs), batch=5)  # "in" has one partition
    finally:
        consumer.close()
    assert done == inputs
    assert read(server.bootstrap, "out", "IN-19") == [v.upper() for v in inputs]
    check = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group})
    try:
        (committed,) = check.committed([TopicPartition("in", 0)], timeout=30)
    finally:
        check.close()
    assert committed.offset == len(inputs)


def test_a_zombie_with_the_same_transactional_id_is_fenced(server):
    zombie = producer(server.bootstrap, "tx-zombie")
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("zombie", b"from-the-zombie", partition=0)
    zombie.flush(30)

    successor = producer(server.bootstrap, "tx-zombie")
    successor.init_transactions(60)  # aborts the zombie's open transaction (CONCURRENT_TRANSACTIONS meanwhile)
    successor.begin_transaction()
    successor.produce("zombie", b"from-the-successor", partition=0)
    successor.commit_transaction(30)

    with pytest.raises(KafkaException) as fenced:
        zombie.produce("zombie", b"zombie-again", partition=0)
        zombie.commit_transaction(30)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower(), fenced.value
    assert read(server.bootstrap, "zombie", "from-the-successor") == ["from-the-successor"]


def test_an_open_transaction_survives_a_kill_9_of_the_server(tmp_path):
    s = GroupdProcess(str(tmp_path), *SETTINGS, ready=READY).start()
    try:
        p = producer(s.bootstrap, "tx-restart", **{"message.timeout.ms": 60000})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("restart", b"before", partition=0)
        p.flush(30)
        s.stop(signal.SIGKILL)
        s.start()
        p.produce("restart", b"after", partition=0)
        p.commit_transaction(60)
        assert read(s.bootstrap, "restart", "after") == ["before", "after"]
    finally:
        s.stop()


def test_kafka_python_transactional_producer(server):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="tx-kafka-python")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("kp", b"kp-aborted", partition=0)
        p.flush(30)
        p.abort_transaction()
        p.begin_transaction()
        p.send("kp", b"kp-committed", partition=0)
        p.commit_transaction()
    finally:
        p.close(10)
    assert read(server.bootstrap, "kp", "kp-committed") == ["kp-committed"]


def java_copy(server, *mode: str) -> dict:
    """TransactionalCopy.java over java-in → java-out (12 records), its JSON line once it succeeded;
    the read_committed output and the group's offsets checked."""
    source = Producer({"bootstrap.servers": server.bootstrap})
    inputs = [f"java-{i}" for i in range(12)]
    for v in inputs:
        source.produce("java-in", v.encode(), partition=0)
    source.flush(30)
    run = subprocess.run(["java", "-cp", os.path.join(CLIENTS_DIR, "java", "lib", "*"),
                          os.path.join(HERE, "java", "TransactionalCopy.java"), server.bootstrap, "java-in", "java-out",
                          "java-ctp", "tx-java", str(len(inputs)), *mode], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert (result["copied"], result["fenced"]) == (len(inputs), True), run.stderr[-3000:]
    assert read(server.bootstrap, "java-out", "JAVA-11") == [v.upper() for v in inputs]
    check = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "java-ctp"})
    try:
        (committed,) = check.committed([TopicPartition("java-in", 0)], timeout=30)
    finally:
        check.close()
    assert committed.offset == len(inputs)
    return result


def java_producer_epoch(server) -> int:
    """tx-java's producer epoch now (kafka-transactions.sh describe)."""
    run = kafka_transactions(server, "describe", "--transactional-id", "tx-java")
    assert run.returncode == 0, run.stderr
    return int(table(run.stdout)[0]["ProducerEpoch"])


def test_java_consume_transform_produce_and_fencing(server):
    """transaction.version 2 (the default): the Java client runs transactions v2, so every commit and
    abort bumped the producer epoch (v1 keeps it: only InitProducerId and fencing bump it)."""
    result = java_copy(server, "abort")
    assert result["ended"] >= 2
    assert java_producer_epoch(server) >= result["ended"]


def test_java_consume_transform_produce_with_transactions_v1(tmp_path):
    s = GroupdProcess(str(tmp_path), *SETTINGS, "transaction.version=1", ready=READY).start()
    try:
        result = java_copy(s, "abort")
        assert result["ended"] >= 2
        assert java_producer_epoch(s) <= 2  # the successor's InitProducerId and its fence of the first
    finally:
        assert s.stop() == 0, s.log()


def test_aiokafka_transactional_producer(server):
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioPartition

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="tx-aiokafka")
        await p.start()
        try:
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send_and_wait("aio", b"aio-aborted", partition=0)
                    raise RuntimeError("abort it")
            async with p.transaction():
                await p.send_and_wait("aio", b"aio-committed", partition=0)
                await p.send_offsets_to_transaction({AioPartition("aio", 0): 1}, "aio-group")
        finally:
            await p.stop()

    asyncio.run(run())
    assert read(server.bootstrap, "aio", "aio-committed") == ["aio-committed"]
    check = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "aio-group"})
    try:
        (committed,) = check.committed([TopicPartition("aio", 0)], timeout=30)
    finally:
        check.close()
    assert committed.offset == 1


def test_exactly_once_through_worker_and_server_kill_9(tmp_path):
    """Two consume-transform-produce workers in turn with one transactional id, each killed -9 in
    mid-stream, and the server killed -9 once: a read_committed reader of the output sees every
    input exactly once, and the group's committed offsets end at the input's end."""
    s = GroupdProcess(str(tmp_path), "topics=eos-in:2,eos-out:1", *SETTINGS[1:], ready=READY).start()
    inputs = [f"e{i}" for i in range(90)]
    source = Producer({"bootstrap.servers": s.bootstrap})
    for i, v in enumerate(inputs):
        source.produce("eos-in", v.encode(), partition=i % 2)
    source.flush(30)
    worker_log = open(tmp_path / "workers.log", "ab")

    def start_worker() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, os.path.join(HERE, "python", "eos_worker.py"), s.bootstrap,
                                 "eos-in", "eos-out", "eos", "tx-eos"], stdout=worker_log, stderr=subprocess.STDOUT)

    def output_count() -> int:
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": f"count-{uuid.uuid4()}",
                      "isolation.level": "read_committed", "enable.auto.commit": False})
        try:
            _, high = c.get_watermark_offsets(TopicPartition("eos-out", 0), timeout=10, cached=False)
        finally:
            c.close()
        return high  # read_committed: the last stable offset (markers included)

    worker = start_worker()
    try:
        def progressed(at_least: int):
            def check():
                nonlocal worker
                if worker.poll() is not None:  # it gave up (an abortable error): a new one takes over
                    worker = start_worker()
                return output_count() >= at_least
            return check

        wait_until(progressed(20), 90, "the first worker's progress")
        worker.kill()
        worker.wait()
        worker = start_worker()
        wait_until(progressed(50), 90, "the second worker's progress")
        s.stop(signal.SIGKILL)
        s.start()
        worker.kill()
        worker.wait()
        worker = start_worker()
        values = []

        def complete():
            nonlocal worker
            if worker.poll() is not None:
                worker = start_worker()
            values[:] = read_all(s.bootstrap, "eos-out")
            return len(values) >= len(inputs)
        wait_until(complete, 120, "every input copied")
        assert sorted(values) == sorted(v + "!" for v in inputs)  # each exactly once
        check = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "eos"})
        try:
            committed = check.committed([TopicPartition("eos-in", 0), TopicPartition("eos-in", 1)], timeout=30)
        finally:
            check.close()
        assert sum(tp.offset for tp in committed) == len(inputs)
    finally:
        worker.kill()
        worker.wait()
        worker_log.close()
        s.stop()


def read_all(bootstrap: str, topic: str) -> list[str]:
    """Every committed value of `topic` partition 0, read_committed, up to its last stable offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    seen: list[str] = []
    try:
        def done():
            m = c.poll(0.5)
            if m is None:
                return False
            if m.error() is not None:
                return m.error().code() == KafkaError._PARTITION_EOF
            seen.append(m.value().decode())
            return False
        wait_until(done, 60, f"the end of {topic}")
    finally:
        c.close()
    return seen


def kafka_transactions(server, *args: str) -> subprocess.CompletedProcess:
    """Kafka's kafka-transactions.sh (its TransactionsCommand, from the CLI tools' jars)."""
    lib = os.path.join(CLIENTS_DIR, "java", "tools", "lib")
    assert os.path.isdir(lib), f"Kafka's CLI tools are not installed in {lib} (.ci/install-clients)"
    return subprocess.run(["java", "-cp", f"{lib}/*", "org.apache.kafka.tools.TransactionsCommand",
                           "--bootstrap-server", server.bootstrap, *args], capture_output=True, text=True, timeout=120)


def table(out: str) -> list[dict[str, str]]:
    """The tool's whitespace-aligned table as rows keyed by its header."""
    lines = [line.split() for line in out.strip().splitlines()]
    return [dict(zip(lines[0], row)) for row in lines[1:]]


def test_kafka_transactions_sh_lists_and_describes(server):
    p = producer(server.bootstrap, "tx-cli")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("plain", b"open", partition=0)
    p.flush(30)
    listed = kafka_transactions(server, "list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    rows = {r["TransactionalId"]: r for r in table(listed.stdout)}
    assert rows["tx-cli"]["TransactionState"] == "Ongoing" and rows["tx-cli"]["Coordinator"] == "1"
    described = kafka_transactions(server, "describe", "--transactional-id", "tx-cli")
    assert described.returncode == 0, described.stderr[-2000:]
    (row,) = table(described.stdout)
    assert (row["TransactionState"], row["TransactionTimeoutMs"], row["TopicPartitions"]) == \
        ("Ongoing", "60000", "plain-0")
    p.abort_transaction(30)
    missing = kafka_transactions(server, "describe", "--transactional-id", "tx-nobody")
    assert missing.returncode != 0 and "because the ID could not be found" in missing.stderr


def test_kafka_transactions_sh_aborts_a_hanging_transaction(server):
    """`kafka-transactions.sh abort` finds the open transaction with DescribeProducers and writes its
    ABORT marker with WriteTxnMarkers: the partition's last stable offset moves past it."""
    p = producer(server.bootstrap, "tx-hanging")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("hang", b"hanging", partition=0)
    p.flush(30)
    plain = Producer({"bootstrap.servers": server.bootstrap})
    plain.produce("hang", b"after", partition=0)
    plain.flush(30)
    aborted = kafka_transactions(server, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr[-2000:]
    assert read(server.bootstrap, "hang", "after") == ["after"]
