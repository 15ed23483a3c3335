"""Per-group configs through a real admin client (confluent-kafka's AdminClient on ConfigResource type
GROUP: IncrementalAlterConfigs, AlterConfigs, DescribeConfigs) against the real server: validated
against the broker's bounds, answered by the group's next ConsumerGroupHeartbeat, kept across a
restart (spec §2.4)."""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.kafka_errors import kafka_error
from tests.support.process import WireClient, groupd_fixture

pytestmark = pytest.mark.clients

SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
DEFAULT_CONFIG, GROUP_CONFIG = 5, 8


server = groupd_fixture("topics=t3:3")


def admin(server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


def incremental(server, group: str, *ops: tuple[str, str | None, AlterConfigOpType]):
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    client = admin(server)  # held until the answer is in: a destroyed client fails its futures
    return client.incremental_alter_configs([resource])[resource].result(10)


def described(server, group: str) -> dict[str, tuple[str, int]]:
    resource = ConfigResource(ResourceType.GROUP, group)
    client = admin(server)
    configs = client.describe_configs([resource])[resource].result(10)
    # the consumer ones (the share ones are tests/clients/test_share_fetch_clients.py's)
    return {name: (c.value, c.source) for name, c in configs.items() if name in (SESSION, HEARTBEAT)}


def heartbeat_interval(server, group: str) -> int:
    with WireClient(server.bootstrap) as c:
        r = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": group, "member_id": "m-1", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": datetime.timedelta(seconds=30), "subscribed_topic_names": ["t3"],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    assert r.error_code == ErrorCode.none
    return r.heartbeat_interval // datetime.timedelta(milliseconds=1)


def test_an_override_is_described_and_answered_by_the_next_heartbeat(server):
    assert described(server, "cfg-a") == {SESSION: ("45000", DEFAULT_CONFIG), HEARTBEAT: ("5000", DEFAULT_CONFIG)}
    incremental(server, "cfg-a", (HEARTBEAT, "7000", AlterConfigOpType.SET), (SESSION, "55000", AlterConfigOpType.SET))
    assert described(server, "cfg-a") == {SESSION: ("55000", GROUP_CONFIG), HEARTBEAT: ("7000", GROUP_CONFIG)}
    assert heartbeat_interval(server, "cfg-a") == 7000
    assert heartbeat_interval(server, "cfg-other") == 5000
    incremental(server, "cfg-a", (HEARTBEAT, None, AlterConfigOpType.DELETE))
    assert described(server, "cfg-a")[HEARTBEAT] == ("5000", DEFAULT_CONFIG)


@pytest.mark.parametrize("name, value, message", [
    (SESSION, "30000", "consumer.session.timeout.ms must be greater than or equal to "
                       "group.consumer.min.session.timeout.ms"),
    (HEARTBEAT, "20000", "consumer.heartbeat.interval.ms must be less than or equal to "
                         "group.consumer.max.heartbeat.interval.ms"),
    ("consumer.unknown.ms", "1", "Unknown group config name: consumer.unknown.ms"),
])
def test_a_value_outside_the_broker_bounds_is_invalid_config(server, name, value, message):
    error = kafka_error(lambda: incremental(server, "cfg-b", (name, value, AlterConfigOpType.SET)))
    assert (error.code(), error.str()) == (ErrorCode.invalid_config, message)
    assert described(server, "cfg-b")[SESSION] == ("45000", DEFAULT_CONFIG)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # the API under test
def test_the_legacy_alter_replaces_every_override(server):
    incremental(server, "cfg-c", (SESSION, "50000", AlterConfigOpType.SET))
    resource = ConfigResource(ResourceType.GROUP, "cfg-c", set_config={HEARTBEAT: "6000"})
    client = admin(server)
    client.alter_configs([resource])[resource].result(10)
    assert described(server, "cfg-c") == {SESSION: ("45000", DEFAULT_CONFIG), HEARTBEAT: ("6000", GROUP_CONFIG)}


def test_overrides_survive_a_restart(server):
    incremental(server, "cfg-d", (HEARTBEAT, "8000", AlterConfigOpType.SET))
    server.stop()
    server.start()
    assert described(server, "cfg-d")[HEARTBEAT] == ("8000", GROUP_CONFIG)
    assert heartbeat_interval(server, "cfg-d") == 8000
