"""The node's view of the cluster (coordinator/cluster/view.py) decides what Metadata and FindCoordinator
answer and which offsets partitions the runtime loads: a Node on a real event loop, in process, with a
view of three brokers where this node (1) owns the even partitions and nobody the last one."""

from __future__ import annotations

import pytest

from groupd.coordinator.apis import find_coordinator, metadata
from groupd.coordinator.apis.request import Request
from groupd.coordinator.cluster.view import Broker, ClusterView
from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.observability import readiness
from groupd.coordinator.server.node import Node
from groupd.coordinator.settings import Listener, Settings
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request
from tests.support.process import wait_for

PARTITIONS = 5
INTERNAL = Listener("INTERNAL", "10.0.0.1", 9092)  # the listener a request came in on, as advertised


class ThreeBrokers(ClusterView):
    node_id = 1

    def brokers(self):
        return (Broker(1), Broker(2, {"INTERNAL": ("10.0.0.2", 9093)}), Broker(3, {"OTHER": ("10.0.0.3", 9094)}))

    def controller_id(self):
        return 2

    def coordinator(self, partition):
        if partition == PARTITIONS - 1:
            return None
        return 1 if partition % 2 == 0 else 2

    def leader(self, topic, partition):
        return 2


def request(api: ApiKey, version: int, body: dict) -> Request:
    header = RequestHeader(api, version, 1, "t")
    return Request(header, build_request(api, version, body), "/127.0.0.1", INTERNAL)


def group_on(partition: int) -> str:
    return next(g for g in (f"g{i}" for i in range(10_000)) if partition_for(g, PARTITIONS) == partition)


@pytest.fixture
async def node(tmp_path):
    settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "node.id=1",
                                                      f"offsets.topic.num.partitions={PARTITIONS}", "topics=t:2"])
    node = Node(settings, cluster=ThreeBrokers())
    node.coordinator.start(p for p in range(PARTITIONS) if node.cluster.owns(p))  # as the server tells it
    await wait_for(lambda: readiness.is_ready(node.coordinator))
    yield node
    await node.coordinator.close()
    node.close()


async def test_only_the_owned_partitions_are_loaded_and_served(node, tmp_path):
    groups = node.coordinator
    assert readiness.partitions(groups) == {"partitions": 2, "loaded": 2, "loading": 0, "failed": 0}
    assert [p for p in range(PARTITIONS) if groups.writers[p] is not None] == [0, 2]
    for p in (1, 3, 4):
        assert groups.unavailable(p) is ErrorCode.not_coordinator
        assert not (tmp_path / f"__consumer_offsets-{p}").exists()
    assert groups.unavailable(0) is None


async def test_metadata_lists_the_brokers_of_the_requests_listener_and_each_partitions_leader(node):
    response = metadata.handle(node, request(ApiKey.METADATA, 12, {
        "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}))
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "10.0.0.1", 9092), (2, "10.0.0.2", 9093)]
    assert response.controller_id == 2
    topics = {t.name: t for t in response.topics}
    assert [p.leader_id for p in topics["t"].partitions] == [2, 2]
    offsets = topics["__consumer_offsets"].partitions
    assert [p.leader_id for p in offsets] == [1, 2, 1, 2, -1]
    assert [p.error_code for p in offsets] == [ErrorCode.none] * 4 + [ErrorCode.leader_not_available]


@pytest.mark.parametrize("version", [3, 4])
async def test_find_coordinator_answers_the_owner_at_its_address_on_the_same_listener(node, version):
    keys = [group_on(0), group_on(1), group_on(PARTITIONS - 1)]

    def find(key: str):
        body = {"key": key, "key_type": 0, "coordinator_keys": [key]}
        response = find_coordinator.handle(node, request(ApiKey.FIND_COORDINATOR, version, body))
        return response.coordinators[0] if version >= 4 else response

    answers = [find(k) for k in keys]
    assert [(a.error_code, a.node_id, a.host, a.port) for a in answers] == [
        (ErrorCode.none, 1, "10.0.0.1", 9092), (ErrorCode.none, 2, "10.0.0.2", 9093),
        (ErrorCode.coordinator_not_available, -1, "", -1)]


def test_a_lone_node_is_the_whole_cluster(tmp_path):
    settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "node.id=7"])
    node = Node(settings)
    try:
        view = node.cluster
        assert view.owns(0) and view.coordinator(3) == 7 and view.controller_id() == 7
        assert view.leader("t", 0) == 7
        assert [b.node_id for b in view.brokers()] == [7]
    finally:
        node.close()
