"""Kafka Streams 4.3 apps over the classic group protocol against groupd (issue 25 part 1), with the apps of
tests/clients/java/StreamsApps.java (tests/support/streams.py) on the disk records plane:

- word count, at_least_once, two instances: the interactive-queries metadata (application.server) of each
  names both instances and the partitions each holds, and a key is found where its count lives; one is killed
  with -9 once its work is committed, the survivor takes its tasks, restores the counts from the compacted
  changelog and the last count per word in the output is exactly right. The internal topics are created
  with the configs Streams asks (DescribeConfigs) and Streams purges its repartition topics (DeleteRecords).
- word count, exactly_once_v2, two instances, one killed with -9 while input still flows: read_committed,
  each word's counts in the output are exactly 1, 2, ..., n (no duplicate, no gap).
- the stream-table join, checked record by record (inner join: an unknown key and a deleted one give nothing,
  an updated table row is seen by later stream records).

Kills wait for events (stdout lines, output contents), never for fixed times; a killed member leaves the
classic group after its session timeout (3 s here, groupd's minimum lowered for it).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import threading

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from groupd.protocol.apis import ApiKey
from tests.support.process import GroupdProcess, WireClient
from tests.support.streams import StreamsApp, create_topics, last_values, produce, read_topic, wait_until

pytestmark = pytest.mark.clients

SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")
# the apps' own settings: a killed instance is noticed after 3 s; Streams purges repartition records each
# 500 ms; an open transaction of a killed EOS instance is aborted by groupd after 5 s (Streams: 10 s)
APP_CONFIG = ("--session-ms", "3000", "--config",
              "repartition.purge.interval.ms=500,producer.transaction.timeout.ms=5000")
WORDS = ["apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    g = GroupdProcess(str(tmp_path_factory.mktemp("streams")), *SETTINGS).start()
    yield g
    g.stop()


def lines(start: int, n: int) -> list[tuple[str, str]]:
    """n input lines, line i holding words i % 8 and (i * 3) % 8 (the same word twice when they agree), keyed
    by their number so that they spread over the input partitions."""
    return [(f"line-{i}", f"{WORDS[i % 8]} {WORDS[(i * 3) % 8].upper()}") for i in range(start, start + n)]


def expected_counts(n: int) -> dict[str, str]:
    counts = collections.Counter()
    for _k, line in lines(0, n):
        counts.update(line.lower().split())
    return {w: str(c) for w, c in counts.items()}


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: e.value for name, e in entries.items()}


def log_start(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-start"})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        return low
    finally:
        c.close()


def committed_to_end(bootstrap: str, group: str, topic: str, partitions: int) -> bool:
    """The group has committed the end offset of every partition of `topic` (an empty one needs none)."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = c.committed(tps, timeout=30)
        ends = [c.get_watermark_offsets(tp, timeout=30)[1] for tp in tps]
        return all(tp.offset == end or (tp.offset < 0 and end == 0) for tp, end in zip(committed, ends, strict=True))
    finally:
        c.close()


def restored(app: StreamsApp, changelog: str) -> list[int]:
    """How many records each restoration of `changelog` (a topic-partition) read, from the app's log."""
    return [int(n) for n in re.findall(rf"Finished restoring changelog {changelog} to store \w+ with a total "
                                        r"number of (\d+) records", app.log())]


def start_pair(tmp_path, server, app_id: str, guarantee: str, topics: dict[str, str],
               commit_ms: int = 200) -> list[StreamsApp]:
    apps = [StreamsApp(str(tmp_path), server.bootstrap, app_id, guarantee=guarantee, name=name, topics=topics,
                       extra=(*APP_CONFIG, "--commit-ms", str(commit_ms))).start() for name in ("a", "b")]
    # both running with the four tasks (two input, two repartition partitions) split between them
    wait_until(lambda: all(a.tasks()[0] for a in apps) and set.union(*(a.tasks()[0] for a in apps))
               == {"0_0", "0_1", "1_0", "1_1"} and sum(len(a.tasks()[0]) for a in apps) == 4,
               120, "both instances running with two tasks each", apps)
    return apps


def test_word_count_at_least_once_survives_kill_and_restores_state(tmp_path, server):
    topics = {"input": "alos-in", "output": "alos-out"}
    create_topics(server.bootstrap, {"alos-in": 2, "alos-out": 2})
    apps = start_pair(tmp_path, server, "alos", "at_least_once", topics)
    try:
        a, b = apps
        # interactive queries' metadata: each instance names both, with the partitions each holds
        def metadata_complete() -> bool:
            views = [x.metadata() for x in apps]
            return all(set(v) == {a.endpoint, b.endpoint} and all(v[x.endpoint]["active"] for x in apps)
                       for v in views) and views[0] == views[1]
        wait_until(metadata_complete, 60, lambda: f"metadata {[x.metadata() for x in apps]}", apps)
        view = a.metadata()
        assert view[a.endpoint]["active"].isdisjoint(view[b.endpoint]["active"])
        assert view[a.endpoint]["active"] | view[b.endpoint]["active"] == {
            "alos-in-0", "alos-in-1", "alos-words-repartition-0", "alos-words-repartition-1"}
        assert view[a.endpoint]["stores"] | view[b.endpoint]["stores"] == {"counts"}

        produce(server.bootstrap, "alos-in", lines(0, 200))
        want = expected_counts(200)
        wait_until(lambda: last_values(read_topic(server.bootstrap, "alos-out")) == want, 90,
                   "first counts in the output", apps)
        # where a key lives (queryMetadataForKey) is where its count is
        a.send("KEY counts apple")
        owner = a.wait_for("KEY counts apple ").split()[3]
        holder = a if owner == a.endpoint else b
        mark = holder.mark()
        holder.send("GET counts apple")
        assert holder.wait_for("VALUE counts apple", after=mark) == f"VALUE counts apple {want['apple']}"

        # the internal topics have the configs Streams asked for
        changelog = topic_config(server.bootstrap, "alos-counts-changelog")
        assert changelog["cleanup.policy"] == "compact"
        repartition = topic_config(server.bootstrap, "alos-words-repartition")
        assert (repartition["cleanup.policy"], repartition["retention.ms"], repartition["segment.bytes"]) == (
            "delete", "-1", "52428800")
        # Streams deletes the repartition records it has committed (DeleteRecords each
        # repartition.purge.interval.ms); more input meanwhile, so both partitions have records to purge
        produced = 200

        def purged() -> bool:
            nonlocal produced
            if all(log_start(server.bootstrap, "alos-words-repartition", p) > 0 for p in (0, 1)):
                return True
            produce(server.bootstrap, "alos-in", lines(produced, 10))
            produced += 10
            return False
        wait_until(purged, 60, "repartition topic purged", apps)

        # kill -9 one instance once all its work is committed: the survivor must restore the counts
        wait_until(lambda: committed_to_end(server.bootstrap, "alos", "alos-in", 2)
                   and committed_to_end(server.bootstrap, "alos", "alos-words-repartition", 2), 60,
                   "input and repartition offsets committed", apps)
        # the counting tasks are balanced (Streams' assignor spreads the stateful ones first): b's moves to a
        (moved,) = {t for t in b.tasks()[0] if t.startswith("1_")}
        mark = a.mark()
        b.kill()
        a.wait_for(lambda s: s == "ASSIGNED 0_0,0_1,1_0,1_1 STANDBY -", 90, after=mark)
        wait_until(lambda: any(restored(a, f"alos-counts-changelog-{moved[2:]}")), 60,
                   f"task {moved}'s counts restored from the changelog", [a])
        produce(server.bootstrap, "alos-in", lines(produced, 120))
        want = expected_counts(produced + 120)
        wait_until(lambda: last_values(read_topic(server.bootstrap, "alos-out")) == want, 90,
                   "counts after the failover", apps)
        wait_until(lambda: set(a.metadata()) == {a.endpoint}, 60, "the survivor alone in the metadata", apps)
    finally:
        for x in apps:
            x.stop()


def transaction(bootstrap: str, txn: str) -> str | None:
    """The state of transactional id `txn` (ListTransactions)."""
    with WireClient(bootstrap) as c:
        listed = c.request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
    return next((t.transaction_state for t in listed.transaction_states if t.transactional_id == txn), None)


def test_word_count_exactly_once_v2_survives_kill(tmp_path, server):
    topics = {"input": "eos-in", "output": "eos-out"}
    create_topics(server.bootstrap, {"eos-in": 2, "eos-out": 2})
    # transactions of 3 s, so that one is surely open when its instance is killed
    apps = start_pair(tmp_path, server, "eos", "exactly_once_v2", topics, commit_ms=3000)
    total = 600
    stop = threading.Event()

    def feed() -> None:
        for s in range(0, total, 20):
            produce(server.bootstrap, "eos-in", lines(s, 20))
            stop.wait(0.05)  # a steady trickle, not a wait on anything
    feeder = threading.Thread(target=feed)
    try:
        a, b = apps
        txn = f"eos-{b.process_id('eos')}-1"
        (moved,) = {t for t in b.tasks()[0] if t.startswith("1_")}  # b's counting task, which moves to a
        feeder.start()
        # b has committed counts of its own to restore (a transaction of its task's changelog committed)
        wait_until(lambda: any(p == int(moved[2:]) for p, *_ in
                               read_topic(server.bootstrap, "eos-counts-changelog", committed=True)), 90,
                   f"committed counts in task {moved}'s changelog", apps)
        # input keeps flowing while b dies in the middle of a transaction: b is stopped (SIGSTOP: it
        # can neither commit nor begin one while it is looked at) and killed if its transaction is open,
        # else let go on and looked at again. groupd aborts it after its timeout; it comes to nothing
        def stopped_in_an_open_transaction() -> bool:
            os.kill(b.proc.pid, signal.SIGSTOP)
            if transaction(server.bootstrap, txn) == "Ongoing":
                return True
            os.kill(b.proc.pid, signal.SIGCONT)
            return False
        wait_until(stopped_in_an_open_transaction, 90, f"{txn} in an open transaction", apps)
        mark = a.mark()
        b.kill()
        feeder.join(120)
        a.wait_for(lambda s: s == "ASSIGNED 0_0,0_1,1_0,1_1 STANDBY -", 90, after=mark)
        wait_until(lambda: any(restored(a, f"eos-counts-changelog-{moved[2:]}")), 60,
                   f"task {moved}'s counts restored from the changelog", [a])
        want = expected_counts(total)
        wait_until(lambda: last_values(read_topic(server.bootstrap, "eos-out", committed=True)) == want, 120,
                   "exact counts after the failover", apps)
        wait_until(lambda: transaction(server.bootstrap, txn) == "CompleteAbort", 60,
                   f"{txn}'s transaction aborted by groupd", apps)
        seen: dict[str, list[int]] = collections.defaultdict(list)
        for _p, _o, word, count in read_topic(server.bootstrap, "eos-out", committed=True):
            seen[word].append(int(count))
        assert dict(seen) == {w: list(range(1, int(n) + 1)) for w, n in want.items()}
        assert topic_config(server.bootstrap, "eos-counts-changelog")["cleanup.policy"] == "compact"
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join(120)
        for x in apps:
            x.stop()


def test_stream_table_join_record_by_record(tmp_path, server):
    create_topics(server.bootstrap, {"orders": 2, "customers": 2, "joined": 2})
    app = StreamsApp(str(tmp_path), server.bootstrap, "join", app="join",
                     topics={"left": "orders", "right": "customers", "output": "joined"}, extra=APP_CONFIG).start()
    try:
        app.wait_for("STATE RUNNING")

        def table_has(key: str, value: str | None) -> None:
            def check() -> bool:
                mark = app.mark()
                app.send(f"GET customers {key}")
                return app.wait_for("VALUE customers", after=mark) == f"VALUE customers {key} {value or 'null'}"
            wait_until(check, 60, f"customers[{key}] = {value}", [app])

        produce(server.bootstrap, "customers", [("c1", "ada"), ("c2", "bob"), ("c3", "cy")])
        table_has("c3", "cy")
        produce(server.bootstrap, "orders", [("c1", "o1"), ("c2", "o2"), ("c9", "o3"), ("c1", "o4"), ("c3", "o5")])
        produce(server.bootstrap, "customers", [("c1", "ann"), ("c2", None)])  # c2 deleted: a tombstone
        table_has("c1", "ann")
        table_has("c2", None)
        produce(server.bootstrap, "orders", [("c1", "o6"), ("c2", "o7"), ("c3", "o8")])
        want = [("c1", "o1@ada"), ("c2", "o2@bob"), ("c1", "o4@ada"), ("c3", "o5@cy"), ("c1", "o6@ann"),
                ("c3", "o8@cy")]

        def joined() -> list[tuple[str, str]]:
            return [(k, v) for _p, _o, k, v in read_topic(server.bootstrap, "joined")]
        wait_until(lambda: len(joined()) >= len(want), 60, lambda: f"joined output {joined()}", [app])
        out = joined()
        # a key's records are in one partition, in order; across keys the order is the partitions'
        per_key = collections.defaultdict(list)
        for k, v in out:
            per_key[k].append(v)
        want_per_key = collections.defaultdict(list)
        for k, v in want:
            want_per_key[k].append(v)
        assert per_key == want_per_key
        assert topic_config(server.bootstrap, "join-customers-changelog")["cleanup.policy"] == "compact"
    finally:
        app.stop()

