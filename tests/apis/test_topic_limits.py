"""A topic's partition count is bounded by `topic.max.partitions` (Metadata lists every partition:
an unbounded count holds the loop and memory): CreateTopics and CreatePartitions beyond it get
INVALID_PARTITIONS with a message, and nonsense counts and replication factors get Kafka 4's codes
and messages. Through a real admin client (confluent-kafka) and the raw wire."""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.kafka_errors import kafka_error
from tests.support.process import WireClient, groupd_fixture

E = ErrorCode
LIMIT = 100


server = groupd_fixture(f"topic.max.partitions={LIMIT}", "topics=small:2")


def test_admin_client_create_topics_beyond_the_limit_gets_invalid_partitions(server):
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    futures = admin.create_topics([NewTopic("too-big", LIMIT + 1, 1), NewTopic("at-limit", LIMIT, 1)],
                                  operation_timeout=10)
    error = kafka_error(lambda: futures["too-big"].result(timeout=30))
    assert error.code() == KafkaError.INVALID_PARTITIONS
    assert f"Number of partitions {LIMIT + 1} is more than topic.max.partitions ({LIMIT})" in error.str()
    futures["at-limit"].result(timeout=30)
    topics = admin.list_topics(timeout=30).topics
    assert "too-big" not in topics and len(topics["at-limit"].partitions) == LIMIT


def test_admin_client_create_partitions_beyond_the_limit_gets_invalid_partitions(server):
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    future = admin.create_partitions([NewPartitions("small", LIMIT + 1)], operation_timeout=10)["small"]
    error = kafka_error(lambda: future.result(timeout=30))
    assert error.code() == KafkaError.INVALID_PARTITIONS
    assert "topic.max.partitions" in error.str()
    assert len(admin.list_topics(timeout=30).topics["small"].partitions) == 2


def create(c: WireClient, name: str, partitions: int, replication_factor: int):
    return c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": replication_factor, "assignments": [],
         "configs": []}], "timeout": datetime.timedelta(seconds=5), "validate_only": False}).topics[0]


@pytest.mark.parametrize("partitions, replication_factor, error, message", [
    (2**31 - 1, 1, E.invalid_partitions, f"Number of partitions {2**31 - 1} is more than topic.max.partitions"),
    (2**31 - 1, -1, E.invalid_partitions, "is more than topic.max.partitions"),
    (0, 1, E.invalid_partitions, "Number of partitions was set to an invalid non-positive value."),
    (-2, 1, E.invalid_partitions, "Number of partitions was set to an invalid non-positive value."),
    (1, 0, E.invalid_replication_factor, "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, -7, E.invalid_replication_factor, "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, 3, E.invalid_replication_factor, "The target replication factor of 3 cannot be reached"),
])
def test_wire_create_topics_refuses_nonsense_as_kafka_does(server, partitions, replication_factor, error, message):
    name = f"nonsense-{partitions}-{replication_factor}"
    with WireClient(server.bootstrap) as c:
        result = create(c, name, partitions, replication_factor)
        meta = c.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": None}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
    assert result.error_code is error, result
    assert message in result.error_message
    assert (result.num_partitions, result.replication_factor) == (-1, -1)
    assert meta.topics[0].error_code is E.unknown_topic_or_partition


def test_wire_create_partitions_to_the_int32_maximum_is_refused(server):
    with WireClient(server.bootstrap) as c:
        r = c.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "small", "count": 2**31 - 1, "assignments": None}],
                                                    "timeout": datetime.timedelta(seconds=5), "validate_only": False})
    assert r.results[0].error_code is E.invalid_partitions
    assert "topic.max.partitions" in r.results[0].error_message


def test_settings_above_the_limit_are_a_configuration_error():
    from groupd.coordinator.settings import ConfigError, Settings

    with pytest.raises(ConfigError, match=r"num.partitions asks for 20 partitions, more than topic.max.partitions \(10\)"):
        Settings.load(env={}, overrides=["topic.max.partitions=10", "num.partitions=20"])
    with pytest.raises(ConfigError, match=r"topics \(big\) asks for 11 partitions"):
        Settings.load(env={}, overrides=["topic.max.partitions=10", "topics=big:11"])
