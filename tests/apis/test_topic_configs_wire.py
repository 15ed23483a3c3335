"""CreateTopics and DescribeConfigs of topic configs on the raw wire, where clients hide fields: v5+
answers the new topic's configs (with their sources), validate_only answers them and creates
nothing, a replication factor up to `default.replication.factor` is accepted on one node (one
replica kept), beyond it INVALID_REPLICATION_FACTOR; a topic's DescribeConfigs with and without
synonyms and documentation."""

from __future__ import annotations

import datetime

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.process import WireClient, groupd_fixture

E = ErrorCode
DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5

server = groupd_fixture("default.replication.factor=3", "log.segment.bytes=2097152")


def create(c: WireClient, name: str, replication: int, configs: dict[str, str], validate_only: bool = False):
    return c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": replication, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout": datetime.timedelta(seconds=5), "validate_only": validate_only}).topics[0]


def describe(c: WireClient, name: str, synonyms: bool, documentation: bool):
    return c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": 2, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": synonyms, "include_documentation": documentation}).results[0]


def test_create_topics_answers_the_new_topics_configs_with_their_sources(server):
    with WireClient(server.bootstrap) as c:
        r = create(c, "w-compact", 1, {"cleanup.policy": "compact", "retention.ms": "1000"})
    assert (r.error_code, r.num_partitions, r.replication_factor) == (E.none, 1, 1)
    configs = {x.name: (x.value, x.config_source, x.read_only, x.is_sensitive) for x in r.configs}
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC, False, False)
    assert configs["retention.ms"] == ("1000", DYNAMIC_TOPIC, False, False)
    assert configs["segment.bytes"] == ("2097152", STATIC_BROKER, False, False)
    assert configs["max.message.bytes"] == ("1048588", DEFAULT, False, False)


def test_validate_only_answers_the_configs_and_creates_nothing(server):
    with WireClient(server.bootstrap) as c:
        r = create(c, "w-dry", 1, {"cleanup.policy": "compact"}, validate_only=True)
        assert r.error_code is E.none and {x.name: x.value for x in r.configs}["cleanup.policy"] == "compact"
        assert describe(c, "w-dry", False, False).error_code is E.unknown_topic_or_partition


@pytest.mark.parametrize("replication, error", [(-1, E.none), (1, E.none), (3, E.none),
                                                (4, E.invalid_replication_factor)])
def test_a_single_node_accepts_a_replication_factor_up_to_the_default(server, replication, error):
    with WireClient(server.bootstrap) as c:
        r = create(c, f"w-rf{replication}", replication, {})
    assert r.error_code is error, r.error_message
    if error is E.none:
        assert r.replication_factor == 1  # one copy is kept, whatever was asked
    else:
        assert r.error_message == ("Unable to replicate the partition 4 time(s): The target replication factor "
                                   "of 4 cannot be reached because only 1 broker(s) are registered or some brokers have all "
                                   "their log directories cordoned.")


def test_describe_configs_gives_synonyms_and_documentation_only_when_asked(server):
    with WireClient(server.bootstrap) as c:
        assert create(c, "w-doc", 1, {"segment.bytes": "1048576"}).error_code is E.none
        bare = {x.name: x for x in describe(c, "w-doc", False, False).configs}
        full = {x.name: x for x in describe(c, "w-doc", True, True).configs}
        assert describe(c, "bad/name", False, False).error_code is E.invalid_topic_exception
    assert bare["segment.bytes"].synonyms == () and bare["segment.bytes"].documentation is None
    assert [(s.name, s.value, s.source) for s in full["segment.bytes"].synonyms] == [
        ("segment.bytes", "1048576", DYNAMIC_TOPIC), ("log.segment.bytes", "2097152", STATIC_BROKER),
        ("log.segment.bytes", "1073741824", DEFAULT)]
    assert full["segment.bytes"].documentation.startswith("This configuration controls the segment file size")
    assert (full["segment.bytes"].config_type, full["cleanup.policy"].config_type) == (3, 7)  # INT, LIST
