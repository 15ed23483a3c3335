"""The longer Kafka Streams tier (`make streams`; not collected by `make test`, whose name pattern is test_*.py):
the apps of tests/clients/java/StreamsApps.java against groupd at more length than
tests/clients/test_streams_apps.py, for Kafka Streams 4.3.1 and 4.4.0 (STREAMS_VERSIONS=... to choose):

- word count, exactly_once_v2, three instances with one standby replica each: the standbys are placed,
  then each instance in turn is killed with -9 and restarted on its old state directory while input flows;
  read_committed, every word's counts in the output are exactly 1, 2, ..., n.
- word count, at_least_once, three instances: two of them killed with -9 one after the other once their work
  is committed; the last one restores everything and the final counts are exact.
- word count, exactly_once_v2, an instance stopped (SIGSTOP) inside an open transaction past its session
  timeout, then resumed: fenced by its stale generation, no count duplicated.
- word count, exactly_once_v2, groupd itself killed with -9 and restarted under two instances while input
  flows: counts still exact.
- word count, exactly_once_v2, changelogs compacted by groupd's cleaner (with an aborted transaction in
  them): a new instance restores from the compacted changelogs and counts on exactly.
- Kafka's StreamsResetter (the application reset tool) against groupd.
- a rolling upgrade from 4.3.1 to 4.4.0, the two versions in one group on the way.
- the internal topics Streams creates on groupd and on Apache Kafka 4.3.1 (tests/support/kafka.py) carry the
  same topic-level configs (DescribeConfigs, the ones set on the topic).
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

import tests.clients.test_streams_apps as base
from tests.support.kafka import KafkaBroker
from tests.support.process import GroupdProcess
from tests.support.streams import StreamsApp, create_topics, last_values, produce, read_topic, wait_until

pytestmark = pytest.mark.clients

VERSIONS = os.environ.get("STREAMS_VERSIONS", "4.3.1,4.4.0").split(",")
ALL_TASKS = {"0_0", "0_1", "1_0", "1_1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    g = GroupdProcess(str(tmp_path_factory.mktemp("streams-long")), *base.SETTINGS).start()
    yield g
    g.stop()


def wait_all_tasks(apps: list[StreamsApp], marks: dict[str, int]) -> None:
    """The live instances hold every task between them, each by an ASSIGNED line after its mark."""
    def held() -> bool:
        tasks: set[str] = set()
        for a in apps:
            if not any(s.startswith("ASSIGNED ") for s in a.lines[marks.get(a.name, 0):]):
                return False
            tasks |= a.tasks()[0]
        return tasks == ALL_TASKS
    wait_until(held, 120, lambda: f"tasks {[(a.name, a.tasks()) for a in apps]}", apps)


@pytest.mark.parametrize("version", VERSIONS)
def test_exactly_once_three_instances_killed_in_turn(tmp_path, server, version):
    app_id = f"eos3-{version.replace('.', '')}"
    src, out = f"{app_id}-in", f"{app_id}-out"
    create_topics(server.bootstrap, {src: 2, out: 2})

    def instance(name: str) -> StreamsApp:
        return StreamsApp(str(tmp_path), server.bootstrap, app_id, guarantee="exactly_once_v2", name=name,
                          standbys=1, topics={"input": src, "output": out}, version=version,
                          extra=(*base.APP_CONFIG, "--commit-ms", "500")).start()
    apps = {n: instance(n) for n in ("a", "b", "c")}
    total = 1500
    stop = threading.Event()

    def feed() -> None:
        for s in range(0, total, 20):
            produce(server.bootstrap, src, base.lines(s, 20))
            stop.wait(0.1)
    feeder = threading.Thread(target=feed)
    try:
        wait_all_tasks(list(apps.values()), {})
        wait_until(lambda: {"1_0", "1_1"} <= set().union(*(a.tasks()[1] for a in apps.values())), 120,
                   "standbys of the stateful tasks placed", list(apps.values()))
        feeder.start()
        for victim in ("a", "b", "c"):
            marks = {n: a.mark() for n, a in apps.items() if n != victim}
            apps[victim].kill()
            wait_all_tasks([a for n, a in apps.items() if n != victim], marks)
            apps[victim] = instance(victim)  # the same state directory: its checkpoints, then the changelog
            wait_all_tasks(list(apps.values()), {victim: 0})
        feeder.join(300)
        want = base.expected_counts(total)
        wait_until(lambda: last_values(read_topic(server.bootstrap, out, committed=True)) == want, 180,
                   "exact counts", list(apps.values()))
        seen: dict[str, list[int]] = {}
        for _p, _o, word, count in read_topic(server.bootstrap, out, committed=True):
            seen.setdefault(word, []).append(int(count))
        assert seen == {w: list(range(1, int(n) + 1)) for w, n in want.items()}
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join(300)
        for a in apps.values():
            a.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_at_least_once_two_of_three_killed(tmp_path, server, version):
    app_id = f"alos3-{version.replace('.', '')}"
    src, out = f"{app_id}-in", f"{app_id}-out"
    create_topics(server.bootstrap, {src: 2, out: 2})
    apps = [StreamsApp(str(tmp_path), server.bootstrap, app_id, name=n, topics={"input": src, "output": out},
                       version=version, extra=base.APP_CONFIG).start() for n in ("a", "b", "c")]
    try:
        wait_all_tasks(apps, {})
        produced = 0
        for victim in apps[:2]:
            produce(server.bootstrap, src, base.lines(produced, 150))
            produced += 150
            want = base.expected_counts(produced)
            wait_until(lambda w=want: last_values(read_topic(server.bootstrap, out)) == w, 120, "counts", apps)
            wait_until(lambda: base.committed_to_end(server.bootstrap, app_id, src, 2)
                       and base.committed_to_end(server.bootstrap, app_id, f"{app_id}-words-repartition", 2),
                       60, "offsets committed", apps)
            live = [a for a in apps if a.alive() and a is not victim]
            marks = {a.name: a.mark() for a in live}
            victim.kill()
            wait_all_tasks(live, marks)
        produce(server.bootstrap, src, base.lines(produced, 150))
        want = base.expected_counts(produced + 150)
        wait_until(lambda: last_values(read_topic(server.bootstrap, out)) == want, 120, "final counts", apps)
    finally:
        for a in apps:
            a.stop()


def end_offset(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offset"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        c.close()


def internal_topic_configs(bootstrap: str, topics: list[str]) -> dict[str, dict[str, str]]:
    """The configs set on each topic (DescribeConfigs, source DYNAMIC_TOPIC_CONFIG)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    out = {}
    for r, f in admin.describe_configs(resources).items():
        out[r.name] = {n: e.value for n, e in f.result(30).items()
                       if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    return out


def test_internal_topics_have_kafkas_configs(tmp_path, server):
    kafka = KafkaBroker(str(tmp_path / "kafka")).start()
    configs = {}
    try:
        for label, bootstrap in (("kafka", kafka.bootstrap), ("groupd", server.bootstrap)):
            create_topics(bootstrap, {"cfg-in": 2, "cfg-out": 2})
            app = StreamsApp(str(tmp_path / label), bootstrap, "cfg", name=label,
                             topics={"input": "cfg-in", "output": "cfg-out"}, extra=base.APP_CONFIG).start()
            try:
                app.wait_for("ASSIGNED ")
                configs[label] = internal_topic_configs(bootstrap, ["cfg-counts-changelog", "cfg-words-repartition"])
            finally:
                app.stop()
    finally:
        kafka.stop()
    assert configs["groupd"] == configs["kafka"]
    assert configs["groupd"]["cfg-counts-changelog"]["cleanup.policy"] == "compact"


def test_exactly_once_paused_zombie_is_fenced(tmp_path, server):
    """An instance stopped (SIGSTOP) inside an open transaction past its session timeout: the other takes its
    tasks (its offset reads wait for the open transaction: KIP-447's require_stable), then the zombie resumes
    with a stale generation and producer epoch; neither its late writes nor a rebalance storm may duplicate a
    count."""
    app_id = "eos-zombie"
    src, out = f"{app_id}-in", f"{app_id}-out"
    create_topics(server.bootstrap, {src: 2, out: 2})
    apps = base.start_pair(tmp_path, server, app_id, "exactly_once_v2", {"input": src, "output": out},
                           commit_ms=2000)
    a, b = apps
    total = 800
    stop = threading.Event()

    def feed() -> None:
        for s in range(0, total, 20):
            produce(server.bootstrap, src, base.lines(s, 20))
            stop.wait(0.05)
    feeder = threading.Thread(target=feed)
    try:
        txn = f"{app_id}-{b.process_id(app_id)}-1"
        feeder.start()
        wait_until(lambda: base.transaction(server.bootstrap, txn)[0] == "Ongoing", 90, f"{txn} open", apps)
        mark = a.mark()
        b.proc.send_signal(signal.SIGSTOP)
        try:
            a.wait_for(lambda s: s == "ASSIGNED 0_0,0_1,1_0,1_1 STANDBY -", 90, after=mark)
        finally:
            b.proc.send_signal(signal.SIGCONT)
        feeder.join(300)
        want = base.expected_counts(total)
        wait_until(lambda: last_values(read_topic(server.bootstrap, out, committed=True)) == want, 180,
                   "exact counts", apps)
        seen: dict[str, list[int]] = {}
        for _p, _o, word, count in read_topic(server.bootstrap, out, committed=True):
            seen.setdefault(word, []).append(int(count))
        assert seen == {w: list(range(1, int(n) + 1)) for w, n in want.items()}
        assert b.alive(), b.tail()  # fenced, it rejoined rather than died
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join(300)
        for x in apps:
            x.stop()


@pytest.mark.parametrize("sig", [signal.SIGKILL])
def test_exactly_once_through_groupd_kill(tmp_path, sig):
    """groupd killed with -9 and restarted (same port and data directory) under two running exactly_once_v2
    instances while input flows: the transactions, offsets, changelogs and records on disk carry over and
    every word's counts are still exactly 1, 2, ..., n."""
    server = GroupdProcess(str(tmp_path / "groupd"), *base.SETTINGS).start()
    app_id = "eos-restart"
    src, out = f"{app_id}-in", f"{app_id}-out"
    create_topics(server.bootstrap, {src: 2, out: 2})
    apps = base.start_pair(tmp_path, server, app_id, "exactly_once_v2", {"input": src, "output": out},
                           commit_ms=500)
    total = 800
    stop = threading.Event()

    def feed() -> None:  # the producer retries through the restart (idempotent: no duplicate input)
        for s in range(0, total, 20):
            produce(server.bootstrap, src, base.lines(s, 20))
            stop.wait(0.05)
    feeder = threading.Thread(target=feed)
    try:
        feeder.start()
        wait_until(lambda: len(read_topic(server.bootstrap, out, committed=True)) > 50, 90, "output flowing", apps)
        server.stop(sig)
        server.start(timeout=60)
        feeder.join(300)
        want = base.expected_counts(total)
        wait_until(lambda: last_values(read_topic(server.bootstrap, out, committed=True)) == want, 240,
                   "exact counts", apps)
        seen: dict[str, list[int]] = {}
        for _p, _o, word, count in read_topic(server.bootstrap, out, committed=True):
            seen.setdefault(word, []).append(int(count))
        assert seen == {w: list(range(1, int(n) + 1)) for w, n in want.items()}
        assert all(a.alive() for a in apps), [a.tail() for a in apps]
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join(300)
        for x in apps:
            x.stop()
        server.stop()


def test_application_reset_tool(tmp_path, server):
    """Kafka's StreamsResetter (kafka-streams-application-reset) against groupd: with the app stopped and its
    member removed (--force: RemoveMembersFromConsumerGroup), it resets the input offsets to the start and
    deletes the internal topics; the app started again on a clean state directory counts everything anew."""
    import subprocess

    from tests.support.kafka import java_command
    app_id = "reset"
    src, out = f"{app_id}-in", f"{app_id}-out"
    create_topics(server.bootstrap, {src: 2, out: 2})
    produce(server.bootstrap, src, base.lines(0, 100))
    want = base.expected_counts(100)

    def run(name: str) -> None:
        app = StreamsApp(str(tmp_path), server.bootstrap, app_id, name=name, topics={"input": src, "output": out},
                         extra=base.APP_CONFIG).start()
        try:
            wait_until(lambda: base.committed_to_end(server.bootstrap, app_id, src, 2)
                       and last_values(read_topic(server.bootstrap, out)) == want, 120, "counted", [app])
        finally:
            app.stop()
    run("first")
    first = len(read_topic(server.bootstrap, out))
    tool = subprocess.run(java_command("org.apache.kafka.tools.StreamsResetter", "--bootstrap-server",
                                       server.bootstrap, "--application-id", app_id, "--input-topics", src,
                                       "--force"), capture_output=True, text=True, timeout=180)
    assert tool.returncode == 0, (tool.stdout, tool.stderr[-3000:])
    topics = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(timeout=30).topics
    assert f"{app_id}-counts-changelog" not in topics and f"{app_id}-words-repartition" not in topics
    run("second")  # a new state directory: nothing restored locally
    records = read_topic(server.bootstrap, out)
    assert len(records) == 2 * first
    assert last_values(records) == want


def test_exactly_once_restore_from_compacted_changelog(tmp_path):
    """Changelogs compacted under exactly_once_v2, with an aborted transaction in them (an instance killed
    inside one): a new instance restores the counts from the compacted changelogs (fewer records than were
    written, read_committed) and counts on exactly. Segments roll each 200 ms (`topic.segment.ms`, the
    internal topics' configs) and groupd's cleaner looks every 300 ms."""
    server = GroupdProcess(str(tmp_path / "groupd"), *base.SETTINGS, "log.cleaner.backoff.ms=300").start()
    app_id = "eos-compact"
    src, out = f"{app_id}-in", f"{app_id}-out"
    changelog = f"{app_id}-counts-changelog"
    extra = ("--session-ms", "3000", "--commit-ms", "500", "--config",
             "producer.transaction.timeout.ms=5000,topic.segment.ms=200,topic.min.cleanable.dirty.ratio=0.01")

    def instance(name: str) -> StreamsApp:
        return StreamsApp(str(tmp_path), server.bootstrap, app_id, guarantee="exactly_once_v2", name=name,
                          topics={"input": src, "output": out}, extra=extra).start()
    create_topics(server.bootstrap, {src: 2, out: 2})
    apps = [instance("a"), instance("b")]
    try:
        wait_all_tasks(apps, {})
        a, b = apps
        assert base.topic_config(server.bootstrap, changelog)["segment.ms"] == "200"
        txn = f"{app_id}-{b.process_id(app_id)}-1"
        produce(server.bootstrap, src, base.lines(0, 300))
        wait_until(lambda: base.transaction(server.bootstrap, txn)[0] == "Ongoing", 90, f"{txn} open", apps)
        produce(server.bootstrap, src, base.lines(300, 100))
        mark = a.mark()
        b.kill()  # its open transaction is aborted by groupd after 5 s
        wait_all_tasks([a], {"a": mark})
        for s in range(400, 700, 50):
            produce(server.bootstrap, src, base.lines(s, 50))
        want = base.expected_counts(700)
        wait_until(lambda: last_values(read_topic(server.bootstrap, out, committed=True)) == want, 120,
                   "counts", apps)
        def compacted_since_abort() -> bool:
            log = server.log()
            at = log.find(f"transaction aborted transactional_id={txn} ")
            return at >= 0 and all(f"compacted partition={changelog}-{p} " in log[at:] for p in (0, 1))
        wait_until(compacted_since_abort, 120, "both changelog partitions compacted after the abort", apps)
        # the changelogs' end offsets count every update (and marker) written; compaction left one per word
        written = sum(end_offset(server.bootstrap, changelog, p) for p in (0, 1))
        assert len(read_topic(server.bootstrap, changelog, committed=True, decode=False)) < written
        c = instance("c")
        apps.append(c)
        wait_all_tasks([a, c], {})
        mark = c.mark()
        a.kill()
        wait_all_tasks([c], {"c": mark})
        wait_until(lambda: all(restored for restored in (base.restored(c, f"{changelog}-{p}") for p in (0, 1))),
                   60, "c restored both changelogs", apps)
        restored = sum(base.restored(c, f"{changelog}-{p}")[-1] for p in (0, 1))
        assert 0 < restored < written, (restored, written)
        produce(server.bootstrap, src, base.lines(700, 100))
        want = base.expected_counts(800)
        wait_until(lambda: last_values(read_topic(server.bootstrap, out, committed=True)) == want, 120,
                   "counts after the restore", apps)
        seen: dict[str, list[int]] = {}
        for _p, _o, word, count in read_topic(server.bootstrap, out, committed=True):
            seen.setdefault(word, []).append(int(count))
        assert seen == {w: list(range(1, int(n) + 1)) for w, n in want.items()}
    finally:
        for x in apps:
            x.stop()
        server.stop()


def test_rolling_upgrade_4_3_to_4_4(tmp_path, server):
    """A rolling upgrade, one instance at a time: 4.3.1 and 4.4.0 instances in one classic group (the
    assignor's subscription versions relayed as they are), then both on 4.4.0 (each restarted on its state
    directory with SIGTERM); the counts stay exact through every step."""
    if not {"4.3.1", "4.4.0"} <= set(VERSIONS):
        pytest.fail("the rolling upgrade needs STREAMS_VERSIONS to name 4.3.1 and 4.4.0")
    app_id = "upgrade"
    src, out = f"{app_id}-in", f"{app_id}-out"
    create_topics(server.bootstrap, {src: 2, out: 2})

    def instance(name: str, version: str) -> StreamsApp:
        return StreamsApp(str(tmp_path), server.bootstrap, app_id, name=name, topics={"input": src, "output": out},
                          version=version, extra=base.APP_CONFIG).start()
    apps = {"a": instance("a", "4.3.1"), "b": instance("b", "4.3.1")}
    produced = 0
    try:
        for step in ("a", "b", None):
            wait_all_tasks(list(apps.values()), {})
            produce(server.bootstrap, src, base.lines(produced, 100))
            produced += 100
            want = base.expected_counts(produced)
            wait_until(lambda w=want: last_values(read_topic(server.bootstrap, out)) == w, 120,
                       f"counts before upgrading {step}", list(apps.values()))
            if step is not None:
                apps[step].stop()
                apps[step] = instance(step, "4.4.0")
    finally:
        for x in apps.values():
            x.stop()
