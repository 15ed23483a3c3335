"""Cluster mode with a real etcd and two real groupd nodes on one shared data dir: the offsets
partitions spread over both, a killed node's groups move to the survivor with their committed
offsets, and real clients follow (README "Cluster mode")."""

from __future__ import annotations

import datetime
import os
import re
import signal
import time

import pytest

from coordinator.admin import AdminConnection
from protocol import ErrorCode
from protocol.apis import ApiKey
from tests.etcd_server import EtcdServer, cluster_node, coordinators
from tests.harness import wait_until

pytestmark = pytest.mark.clients

PARTITIONS = 8
SETTINGS = (f"offsets.topic.num.partitions={PARTITIONS}", "topics=t:4", "group.initial.rebalance.delay.ms=0")
GROUPS = [f"group-{i}" for i in range(24)]


@pytest.fixture
def etcd(tmp_path):
    server = EtcdServer(str(tmp_path / "etcd")).start()
    yield server
    server.stop()


@pytest.fixture
def nodes(tmp_path, etcd):
    """Nodes 1 and 2 on one data dir, started one after the other (the first declares the topic)."""
    data = str(tmp_path / "data")
    started = [cluster_node(data, etcd, 1, *SETTINGS).start(), cluster_node(data, etcd, 2, *SETTINGS).start()]
    yield started
    for node in started:
        if node.alive():
            assert node.stop() == 0, node.log()


def spread(nodes, among: set[int] = frozenset({1, 2})) -> dict[str, int]:
    """Every group's coordinator, once every live node names the same ones, all `among` them."""
    def agreed():
        seen = [coordinators(n.bootstrap, GROUPS) for n in nodes if n.alive()]
        if seen and all(s == seen[0] for s in seen) and seen[0] and set(seen[0].values()) == among:
            return seen[0]
        return None
    return wait_until(agreed, 60, "every group has one coordinator that every node names")


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> dict[int, ErrorCode]:
    with AdminConnection(bootstrap, "cluster-test") as c:
        r = c.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time": datetime.timedelta(milliseconds=-1),
            "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": o,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}
                                                    for p, o in offsets.items()]}]})
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def fetch(bootstrap: str, group: str):
    """(group error, {partition: offset}) as `bootstrap` answers OffsetFetch v8."""
    with AdminConnection(bootstrap, "cluster-test") as c:
        g = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                                "require_stable": True}).groups[0]
    return g.error_code, {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


def test_groups_spread_over_both_nodes_and_only_the_owner_serves_a_group(nodes):
    owner = spread(nodes)
    assert set(owner.values()) == {1, 2}
    with AdminConnection(nodes[0].bootstrap, "cluster-test") as c:
        meta = c.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
    assert [(b.node_id, b.port) for b in meta.brokers] == [(1, nodes[0].port), (2, nodes[1].port)]
    assert meta.controller_id == 1
    group = GROUPS[0]
    on, off = (nodes[0], nodes[1]) if owner[group] == 1 else (nodes[1], nodes[0])
    assert commit(on.bootstrap, group, {0: 5}) == {0: ErrorCode.none}
    assert commit(off.bootstrap, group, {0: 6}) == {0: ErrorCode.not_coordinator}
    assert fetch(on.bootstrap, group) == (ErrorCode.none, {0: 5})
    assert fetch(off.bootstrap, group)[0] == ErrorCode.not_coordinator


def test_a_killed_nodes_groups_move_to_the_survivor_and_a_real_client_resumes_with_its_offsets(nodes):
    from confluent_kafka import Consumer, TopicPartition

    owner = spread(nodes)
    group = next(g for g in GROUPS if owner[g] == 2)
    committed = {p: 100 + p for p in range(4)}
    c = Consumer({"bootstrap.servers": f"{nodes[0].bootstrap},{nodes[1].bootstrap}", "group.id": group,
                  "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                  "auto.offset.reset": "earliest"})
    try:
        assigned = []
        c.subscribe(["t"], on_assign=lambda consumer, tps: assigned.extend(tps))
        wait_until(lambda: c.poll(0.2) is None and len(assigned) == 4, 60, "confluent-kafka assigned t's 4 partitions")
        result = c.commit(offsets=[TopicPartition("t", p, o) for p, o in committed.items()], asynchronous=False)
        assert all(tp.error is None for tp in result), result

        nodes[1].stop(signal.SIGKILL)
        moved = time.monotonic()
        wait_until(lambda: coordinators(nodes[0].bootstrap, [group]).get(group) == 1, 60,
                   "the survivor coordinates the killed node's group")

        def resumed():
            c.poll(0.1)
            try:
                seen = c.committed([TopicPartition("t", p) for p in range(4)], timeout=5)
            except Exception:  # COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR while the group moves
                return None
            return {tp.partition: tp.offset for tp in seen} == committed
        wait_until(resumed, 60, "confluent-kafka reads its committed offsets from the survivor")
        print(f"group moved and offsets read back after {time.monotonic() - moved:.1f} s")
        result = c.commit(offsets=[TopicPartition("t", p, o + 1) for p, o in committed.items()], asynchronous=False)
        assert all(tp.error is None for tp in result), result
    finally:
        c.close()
    assert fetch(nodes[0].bootstrap, group) == (ErrorCode.none, {p: o + 1 for p, o in committed.items()})
    assert re.search(r"partition claimed partition=\d+ stamp=\d+", nodes[0].log())


def test_two_nodes_with_the_same_node_id_on_one_data_dir_refuse(nodes, etcd, tmp_path):
    twin = cluster_node(str(tmp_path / "data"), etcd, 2, *SETTINGS)
    with pytest.raises(RuntimeError, match=r"\.lock-node-2 is held by pid"):
        twin.start()
    assert os.path.exists(tmp_path / "data" / ".lock-node-1")
