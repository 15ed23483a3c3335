"""Streams groups (KIP-1071) in cluster mode: a real etcd, two real groupd nodes on one shared data
dir, Kafka Streams 4.3.1's word count with group.protocol=streams. The group's coordinator is one
node, the input topic's partitions are led by both; the coordinator creates the internal topics
(any node writes the catalog), the counts are right; after a kill -9 of the coordinating node the
group moves to the survivor with its topology, epochs and assignment (read back from the offsets
log), the survivor leads every partition, and Kafka Streams carries on counting from its commits."""

from __future__ import annotations

import signal

import pytest

from groupd.protocol.apis import ApiKey
from tests.cluster.test_cluster_etcd import SETTINGS, etcd, two_nodes  # noqa: F401 (the fixture)
from tests.cluster.test_cluster_records import agreed_leaders
from tests.support.etcd_server import coordinators
from tests.support.harness import wait_until
from tests.support.process import WireClient
from tests.support.streams import StreamsApp, create_topics, last_values, produce, read_topic

pytestmark = pytest.mark.clients

STREAMS = ("records.plane=disk", "group.streams.min.session.timeout.ms=2000", "group.streams.session.timeout.ms=6000",
           "group.streams.min.heartbeat.interval.ms=500", "group.streams.heartbeat.interval.ms=1000",
           "group.streams.initial.rebalance.delay.ms=0")
TIMEOUT = 120.0


@pytest.fixture
def nodes(tmp_path, etcd):  # noqa: F811
    yield from two_nodes(tmp_path, etcd, *STREAMS)


def counts(bootstrap: str) -> dict:
    return last_values(read_topic(bootstrap, "wc-output"))


def describe(bootstrap: str, group: str):
    with WireClient(bootstrap) as c:
        [g] = c.request(ApiKey.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                           "include_authorized_operations": False}).groups
    return g


def test_a_streams_group_moves_with_its_coordinator_and_kafka_streams_carries_on(nodes, tmp_path):
    agreed_leaders(nodes, {1, 2}, exactly=True)  # topic t's four partitions: led by both nodes
    victim = 1
    survivor = nodes[1]
    app_id = next(g for g in (f"wc-cluster-{i}" for i in range(1000))
                  if wait_until(lambda g=g: coordinators(survivor.bootstrap, [g]), 30, "a coordinator")[g] == victim)
    bootstrap = f"{nodes[0].bootstrap},{nodes[1].bootstrap}"
    create_topics(bootstrap, {"wc-output": 2})
    app = StreamsApp(str(tmp_path), bootstrap, app_id, group_protocol="streams", topics={"input": "t"}).start()
    try:
        app.wait_for("STATE RUNNING", TIMEOUT)
        wait_until(lambda: len(app.tasks()[0]) == 8, TIMEOUT, "every task (two subtopologies of four)", [app])
        g = describe(nodes[0].bootstrap, app_id)
        assert (g.error_code, g.group_state) == (0, "Stable")
        epoch = g.group_epoch
        # the internal topics, created by the coordinator, with the source's partitions
        with WireClient(survivor.bootstrap) as c:  # the other node's catalog sees them
            meta = c.request(ApiKey.METADATA, 12, {"topics": [{"name": f"{app_id}-{t}", "topic_id": None}
                                                             for t in ("words-repartition", "counts-changelog")],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        assert sorted((t.name, t.error_code, len(t.partitions)) for t in meta.topics) == [
            (f"{app_id}-counts-changelog", 0, 4), (f"{app_id}-words-repartition", 0, 4)]
        produce(bootstrap, "t", [(None, "a b c"), (None, "b c"), (None, "c")])
        wait_until(lambda: counts(bootstrap) == {"a": "1", "b": "2", "c": "3"}, TIMEOUT,
                   lambda: f"counts {counts(bootstrap)}", [app])

        mark = app.mark()
        nodes[victim - 1].stop(signal.SIGKILL)
        agreed_leaders([survivor], {2})
        wait_until(lambda: coordinators(survivor.bootstrap, [app_id]) == {app_id: 2}, 60, "the group moved")
        moved = wait_until(lambda: (lambda d: d if d.error_code == 0 else None)(describe(survivor.bootstrap, app_id)),
                           60, "the survivor loaded the group's offsets partition")
        assert moved.group_epoch >= epoch and moved.topology.epoch == 0
        produce(survivor.bootstrap, "t", [(None, "a c d")])
        wait_until(lambda: counts(survivor.bootstrap) == {"a": "2", "b": "2", "c": "4", "d": "1"}, TIMEOUT,
                   lambda: f"counts {counts(survivor.bootstrap)}", [app])
        assert app.alive() and not any(line.startswith("ERROR") for line in app.lines[mark:])
        member = g.members[0].member_id  # the same member, reconciled at the survivor

        def stable_with_the_member() -> bool:
            after = describe(survivor.bootstrap, app_id)
            return (after.group_state, [m.member_id for m in after.members]) == ("Stable", [member])
        wait_until(stable_with_the_member, TIMEOUT, "the group Stable with its member at the survivor")
    finally:
        app.stop()
