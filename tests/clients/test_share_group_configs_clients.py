"""A share group's configs with real clients (share-groups spec §1.11, §3.3, §3.7): confluent-kafka
2.16's ShareConsumer against the real server, each group's configs set by IncrementalAlterConfigs
or Kafka 4.3's own kafka-configs (ConfigCommand).

- share.isolation.level=read_committed: a transactional producer (confluent-kafka) commits and
  aborts; the share group gets the committed records only, nothing of an open transaction until it
  commits, and a read_uncommitted group gets the aborted ones too; no group ever gets a marker.
- share.auto.offset.reset=by_duration:PT1H: records older than an hour are skipped.
- Kafka 4.3's share.delivery.count.limit (DescribeConfigs lists it with its default; kafka-configs
  sets it) archives a record after two deliveries, and share.partition.max.record.locks caps what
  one ShareFetch hands out."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.support.harness import wait_until
from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients

READY = ("groupd ready", "offsets log loaded")  # the transaction log loads before the listeners open
CLI_LIB = os.path.join(os.environ.get("KAFKA_TEST_CLIENTS", os.path.expanduser("~/.cache/groupd-clients")),
                       "java", "tools", "lib")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp("groupd-share-configs")), "topics=txq:1,dur:1,old:1,lim:1,locks:1",
                      "group.initial.rebalance.delay.ms=0", ready=READY).start()
    yield s
    assert s.stop() == 0, s.log()


def set_configs(bootstrap: str, group: str, **configs: str) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource (dots in names written as underscores)."""
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    client = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client fails its futures
    client.incremental_alter_configs([resource])[resource].result(10)


def share_consumer(bootstrap: str, group: str, topic: str, **extra) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       **extra})
    c.subscribe([topic])
    return c


def take(consumer: ShareConsumer, seen: list, ack: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
    """One poll: (value, offset, delivery count) of each record appended to `seen`, each acknowledged
    `ack`, the acknowledgements committed (every partition's must succeed)."""
    for m in consumer.poll(0.2):
        assert m.error() is None, m.error()
        seen.append((m.value().decode(), m.offset(), m.delivery_count()))
        consumer.acknowledge(m, ack)
    results = consumer.commit_sync(30)
    assert all(v is None for v in results.values()), results


def values(seen: list) -> list[str]:
    return [v for v, _, _ in seen]


def test_read_committed_share_group_never_gets_aborted_or_open_transactions(server):
    txn = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "share-rc",
                    "transaction.timeout.ms": 60000})
    txn.init_transactions(30)
    for batch, commit in ((["c1", "c2"], True), (["a1", "a2"], False), (["c3"], True)):
        txn.begin_transaction()
        for v in batch:
            txn.produce("txq", v.encode(), partition=0)
        txn.flush(10)  # in the log before the abort (an abort drops what the client still queues)
        txn.commit_transaction(30) if commit else txn.abort_transaction(30)
    plain = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    plain.produce("txq", b"p1", partition=0)
    assert plain.flush(10) == 0
    set_configs(server.bootstrap, "rc", share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    set_configs(server.bootstrap, "ru", share_auto_offset_reset="earliest")
    committed, uncommitted = share_consumer(server.bootstrap, "rc", "txq"), share_consumer(server.bootstrap, "ru", "txq")
    rc: list = []
    ru: list = []
    try:
        wait_until(lambda: take(committed, rc) or "p1" in values(rc), 60, "p1 read_committed",
                   explain=lambda: f"seen {rc}")
        wait_until(lambda: take(uncommitted, ru) or "p1" in values(ru), 60, "p1 read_uncommitted",
                   explain=lambda: f"seen {ru}")
        assert values(rc) == ["c1", "c2", "c3", "p1"]
        assert values(ru) == ["c1", "c2", "a1", "a2", "c3", "p1"]
        # the markers at offsets 2, 5 and 7 are archived, never handed out
        assert [o for _, o, _ in ru] == [0, 1, 3, 4, 6, 8]

        txn.begin_transaction()
        txn.produce("txq", b"o1", partition=0)
        txn.flush(10)
        plain.produce("txq", b"p2", partition=0)
        assert plain.flush(10) == 0
        wait_until(lambda: take(uncommitted, ru) or "p2" in values(ru), 60, "p2 read_uncommitted")
        for _ in range(5):  # the records are there (read_uncommitted saw them); above the LSO they stay put
            take(committed, rc)
        assert values(rc) == ["c1", "c2", "c3", "p1"]
        txn.commit_transaction(30)
        wait_until(lambda: take(committed, rc) or "p2" in values(rc), 60, "p2 read_committed after the commit")
        assert values(rc) == ["c1", "c2", "c3", "p1", "o1", "p2"]
    finally:
        committed.close()
        uncommitted.close()


def test_by_duration_skips_records_older_than_the_duration(server):
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    now = int(time.time() * 1000)
    for i, at in enumerate((now - 2 * 3600_000, now - 2 * 3600_000 + 1, now, now, now)):
        p.produce("dur", b"%d" % i, partition=0, timestamp=at)
    assert p.flush(10) == 0
    resource = ConfigResource(ResourceType.GROUP, "bd", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "by_duration:1h", incremental_operation=AlterConfigOpType.SET)])
    client = AdminClient({"bootstrap.servers": server.bootstrap})
    with pytest.raises(KafkaException) as refused:
        client.incremental_alter_configs([resource])[resource].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "by_duration:<PnDTnHnMn.nS>" in refused.value.args[0].str()
    set_configs(server.bootstrap, "bd", share_auto_offset_reset="by_duration:PT1H")
    consumer = share_consumer(server.bootstrap, "bd", "dur")
    seen: list = []
    try:
        wait_until(lambda: take(consumer, seen) or len(seen) >= 3, 60, "the three recent records")
    finally:
        consumer.close()
    assert [o for _, o, _ in seen] == [2, 3, 4]


def test_by_duration_with_no_record_that_recent_starts_at_the_log_end(server):
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    old = int(time.time() * 1000) - 3600_000
    for i in range(3):
        p.produce("old", b"old%d" % i, partition=0, timestamp=old)
    assert p.flush(10) == 0
    set_configs(server.bootstrap, "bd-end", share_auto_offset_reset="by_duration:PT1M")
    consumer = share_consumer(server.bootstrap, "bd-end", "old")
    seen: list = []
    try:
        wait_until(lambda: consumer.poll(0.1) is not None and "share partition initialized group=bd-end " in
                   server.log(), 60, "the share-partition initialized by a ShareFetch")
        p.produce("old", b"new", partition=0)
        assert p.flush(10) == 0
        wait_until(lambda: take(consumer, seen) or seen, 60, "the record produced after the start")
    finally:
        consumer.close()
    assert values(seen) == ["new"]


def kafka_configs(server, *args: str) -> subprocess.CompletedProcess:
    """Kafka 4.3's kafka-configs.sh (kafka.admin.ConfigCommand) against the server."""
    if not os.path.isdir(CLI_LIB):
        pytest.fail("Kafka's CLI tools are not installed (.ci/install-clients)")  # never a skip
    return subprocess.run(["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", f"{CLI_LIB}/*",
                           "kafka.admin.ConfigCommand", "--bootstrap-server", server.bootstrap, "--entity-type",
                           "groups", *args], capture_output=True, text=True, timeout=120, check=False)


def test_delivery_count_limit_listed_set_by_kafka_configs_and_applied(server):
    client = AdminClient({"bootstrap.servers": server.bootstrap})
    [described] = [f.result(10) for f in client.describe_configs([ConfigResource(ResourceType.GROUP, "lim")]).values()]
    assert {n: (described[n].value, described[n].is_default) for n in (
        "share.delivery.count.limit", "share.partition.max.record.locks", "share.isolation.level")} == {
        "share.delivery.count.limit": ("5", True), "share.partition.max.record.locks": ("2000", True),
        "share.isolation.level": ("read_uncommitted", True)}
    refused = kafka_configs(server, "--entity-name", "lim", "--alter", "--add-config", "share.delivery.count.limit=11")
    assert refused.returncode != 0
    assert "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit" in \
        refused.stdout + refused.stderr
    altered = kafka_configs(server, "--entity-name", "lim", "--alter", "--add-config",
                            "share.delivery.count.limit=2,share.auto.offset.reset=earliest")
    assert altered.returncode == 0, altered.stderr[-2000:]
    shown = kafka_configs(server, "--entity-name", "lim", "--describe")
    assert "share.delivery.count.limit=2" in shown.stdout, shown.stdout + shown.stderr[-2000:]

    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    p.produce("lim", b"x", partition=0)
    assert p.flush(10) == 0
    consumer = share_consumer(server.bootstrap, "lim", "lim")
    seen: list = []
    try:
        wait_until(lambda: take(consumer, seen, AcknowledgeType.RELEASE) or len(seen) >= 2, 60, "x delivered twice")
        p.produce("lim", b"y", partition=0)
        assert p.flush(10) == 0
        wait_until(lambda: take(consumer, seen) or "y" in values(seen), 60, "y", explain=lambda: f"seen {seen}")
    finally:
        consumer.close()
    assert seen == [("x", 0, 1), ("x", 0, 2), ("y", 1, 1)]  # archived at the group's limit of 2, not 5


def test_partition_max_record_locks_caps_each_delivery(server):
    set_configs(server.bootstrap, "locks", share_auto_offset_reset="earliest", share_partition_max_record_locks="100")
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    for i in range(250):
        p.produce("locks", b"%d" % i, partition=0)
    assert p.flush(10) == 0
    consumer = share_consumer(server.bootstrap, "locks", "locks", **{"max.poll.records": 500})
    seen: list = []
    batches: list[int] = []

    def step():
        before = len(seen)
        take(consumer, seen)
        if len(seen) > before:
            batches.append(len(seen) - before)
        return len(seen) >= 250

    try:
        wait_until(step, 60, "all 250 records")
    finally:
        consumer.close()
    assert sorted(o for _, o, _ in seen) == list(range(250))
    assert max(batches) <= 100, batches
