"""Kafka Streams 4.3 with `group.protocol=streams` (KIP-1071) against groupd: the word count of
tests/clients/java/StreamsApps.java in two instances. groupd takes the topology, creates the
repartition and changelog topics, assigns the tasks over both processes with one standby each (the
group's streams.num.standby.replicas, on the other process); the counts on the output topic are
right; after a kill -9 of one instance its session expires and the survivor takes every task,
restores the store from the changelog and counts on from there.

Short timers so the test stays within its CI budget: groupd's streams session timeout is 6 s
(Kafka's minimum is 45 s; the bounds are lowered here) and heartbeats every second; the initial
rebalance delay is Kafka's default (3 s), so both instances join before the first assignment."""

from __future__ import annotations

import subprocess

import pytest

from groupd.protocol.apis import ApiKey
from tests.support.kafka import java_command
from tests.support.process import GroupdProcess, WireClient
from tests.support.streams import StreamsApp, create_topics, last_values, produce, read_topic, wait_until

SETTINGS = ("group.streams.min.session.timeout.ms=2000", "group.streams.session.timeout.ms=6000",
            "group.streams.min.heartbeat.interval.ms=500", "group.streams.heartbeat.interval.ms=1000")
APP = "wc-streams"
TIMEOUT = 90.0


@pytest.fixture
def server(tmp_path):
    s = GroupdProcess(str(tmp_path / "groupd"), *SETTINGS).start()
    yield s
    assert s.stop() == 0, s.log()


def counts(bootstrap: str) -> dict:
    return last_values(read_topic(bootstrap, "wc-output"))


def test_two_instances_count_words_and_the_survivor_of_a_kill_takes_over(server, tmp_path):
    b = server.bootstrap
    create_topics(b, {"wc-input": 2, "wc-output": 2})
    with WireClient(b) as c:
        altered = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 32, "resource_name": APP, "configs": [
                {"name": "streams.num.standby.replicas", "config_operation": 0, "value": "1"}]}],
            "validate_only": False}).responses[0]
        assert altered.error_code == 0
    apps = [StreamsApp(str(tmp_path), b, APP, group_protocol="streams", name=n).start() for n in ("a", "b")]
    try:
        for app in apps:
            app.wait_for("STATE RUNNING", TIMEOUT)
        # groupd created the internal topics the topology asked for and spread the four tasks
        wait_until(lambda: all(a.tasks()[0] for a in apps), TIMEOUT, "both instances hold tasks", apps)
        assert sorted(t for a in apps for t in a.tasks()[0]) == ["0_0", "0_1", "1_0", "1_1"]
        # one standby per task, on the process that does not run it (Kafka Streams keeps only those of
        # the stateful subtopology 1; each instance runs one of its tasks and stands by for the other)
        wait_until(lambda: all(a.tasks()[1] for a in apps), TIMEOUT, "standbys", apps)
        assert sorted(t for a in apps for t in a.tasks()[1]) == ["1_0", "1_1"]
        for a in apps:
            assert not a.tasks()[0] & a.tasks()[1]
        with WireClient(b) as c:  # a streams group, not a classic one
            listed = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups
        assert [(g.group_id, g.group_type) for g in listed] == [(APP, "streams")]
        produce(b, "wc-input", [(None, "a b c"), (None, "b c"), (None, "c")])
        wait_until(lambda: counts(b) == {"a": "1", "b": "2", "c": "3"}, TIMEOUT,
                   lambda: f"counts {counts(b)}", apps)

        survivor, victim = apps
        mark = survivor.mark()
        victim.kill()
        wait_until(lambda: len(survivor.tasks()[0]) == 4, TIMEOUT, "the survivor takes every task", apps)
        survivor.wait_for("STATE RUNNING", TIMEOUT, after=mark)
        produce(b, "wc-input", [(None, "a c d")])
        wait_until(lambda: counts(b) == {"a": "2", "b": "2", "c": "4", "d": "1"}, TIMEOUT,
                   lambda: f"counts {counts(b)}", [survivor])
    finally:
        for app in apps:
            if app.alive():
                app.stop()


def test_a_stream_table_join_with_copartitioned_topics(server, tmp_path):
    """The join's subtopology reads orders and customers as one copartition group: groupd checks they
    agree, creates the table's changelog, and the join's output is right record by record."""
    b = server.bootstrap
    create_topics(b, {"orders": 2, "customers": 2, "joined": 2})
    app = StreamsApp(str(tmp_path), b, "join-streams", app="join", group_protocol="streams",
                     topics={"left": "orders", "right": "customers", "output": "joined"}).start()
    try:
        app.wait_for("STATE RUNNING", TIMEOUT)
        wait_until(lambda: app.tasks()[0] == {"0_0", "0_1"}, TIMEOUT, "both tasks", [app])
        produce(b, "customers", [("c1", "ada"), ("c2", "bob")])

        def table_has(key: str, value: str) -> bool:
            mark = app.mark()
            app.send(f"GET customers {key}")
            return app.wait_for("VALUE customers", after=mark) == f"VALUE customers {key} {value}"
        wait_until(lambda: table_has("c2", "bob"), TIMEOUT, "the table", [app])
        produce(b, "orders", [("c1", "o1"), ("c2", "o2"), ("c9", "o3"), ("c1", "o4")])

        def joined() -> dict:
            out: dict[str, list[str]] = {}
            for _p, _o, k, v in read_topic(b, "joined"):
                out.setdefault(k, []).append(v)
            return out
        wait_until(lambda: joined() == {"c1": ["o1@ada", "o4@ada"], "c2": ["o2@bob"]}, TIMEOUT,
                   lambda: f"joined {joined()}", [app])
    finally:
        app.stop()


def test_kafka_streams_4_4_over_heartbeat_v1(server, tmp_path):
    """Kafka Streams 4.4.0 speaks StreamsGroupHeartbeat v1 (Kafka's client takes the highest version
    both sides know; groupd advertises 0–1) and runs; Kafka 4.4.0's kafka-streams-groups.sh describes
    the group over StreamsGroupDescribe v1."""
    b = server.bootstrap
    create_topics(b, {"wc-input": 2, "wc-output": 2})
    app = StreamsApp(str(tmp_path), b, "wc-streams-44", group_protocol="streams", version="4.4.0").start()
    try:
        app.wait_for("STATE RUNNING", TIMEOUT)
        wait_until(lambda: app.tasks()[0] == {"0_0", "0_1", "1_0", "1_1"}, TIMEOUT, "every task", [app])
        produce(b, "wc-input", [(None, "a b"), (None, "b")])
        wait_until(lambda: counts(b) == {"a": "1", "b": "2"}, TIMEOUT, lambda: f"counts {counts(b)}", [app])
        out = subprocess.run(java_command("org.apache.kafka.tools.streams.StreamsGroupCommand", "--bootstrap-server",
                                          b, "--describe", "--group", "wc-streams-44", "--members", version="4.4.0"),
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        [header, row] = [line.split() for line in out.stdout.splitlines() if line.strip()]
        assert header[:2] == ["GROUP", "MEMBER"] and row[0] == "wc-streams-44"
        assert row[-2:] == ["0:[0,1];", "1:[0,1];"]
    finally:
        app.stop()
