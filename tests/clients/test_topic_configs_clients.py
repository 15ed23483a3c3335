"""Topic configs through real admin clients (confluent-kafka's AdminClient, and the Java AdminClient
when it is installed) against the real server: CreateTopics keeps the configs it is given (and
validate_only keeps nothing), DescribeConfigs answers TOPIC and BROKER resources with values, sources
and synonyms as Kafka does, AlterConfigs and IncrementalAlterConfigs change them, bad input gets
Kafka's error code and message, and a restart keeps them (issue 22)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from groupd.protocol import ErrorCode
from tests.support.kafka_errors import kafka_error
from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients

DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
STATIC_BROKER = ConfigSource.STATIC_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp("topicconf")), "log.retention.ms=3600000").start()
    yield s
    assert s.stop() == 0


def admin(server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


def create(server, topic: NewTopic, validate_only: bool = False) -> None:
    client = admin(server)  # held until the answer is in: a destroyed client fails its futures
    client.create_topics([topic], validate_only=validate_only, operation_timeout=10)[topic.topic].result(10)


def describe(server, resource_type: ResourceType, name: str) -> dict:
    resource = ConfigResource(resource_type, name)
    client = admin(server)
    return client.describe_configs([resource])[resource].result(10)


def values(server, topic: str) -> dict[str, tuple[str, int]]:
    return {n: (c.value, c.source) for n, c in describe(server, ResourceType.TOPIC, topic).items()}


def incremental(server, topic: str, *ops: tuple[str, str | None, AlterConfigOpType], validate_only=False):
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    client = admin(server)
    return client.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(10)


def refusal(call) -> tuple[int, str]:
    error = kafka_error(call)
    return error.code(), error.str()


def test_a_compacted_topic_is_described_exactly_as_created(server):
    create(server, NewTopic("tc-compact", 2, 1, config={"cleanup.policy": "compact", "segment.bytes": "1048576",
                                                        "min.compaction.lag.ms": "5000"}))
    configs = values(server, "tc-compact")
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC)  # what Kafka Connect checks
    assert configs["segment.bytes"] == ("1048576", DYNAMIC_TOPIC)
    assert configs["min.compaction.lag.ms"] == ("5000", DYNAMIC_TOPIC)
    # the others: the broker's defaults, a static setting where one is given
    assert configs["retention.ms"] == ("3600000", STATIC_BROKER)
    assert configs["max.message.bytes"] == ("1048588", DEFAULT)
    assert configs["message.timestamp.type"] == ("CreateTime", DEFAULT)
    assert len(configs) > 30  # every Kafka topic config, as Kafka answers


def test_synonyms_name_the_broker_settings_behind_a_value(server):
    create(server, NewTopic("tc-syn", 1, 1, config={"retention.ms": "1000"}))
    entry = describe(server, ResourceType.TOPIC, "tc-syn")["retention.ms"]
    assert [(s.name, s.value, s.source) for s in entry.synonyms.values()] == [
        ("retention.ms", "1000", DYNAMIC_TOPIC), ("log.retention.ms", "3600000", STATIC_BROKER),
        ("log.retention.hours", "168", DEFAULT)]
    segment = describe(server, ResourceType.TOPIC, "tc-syn")["segment.bytes"]
    assert [(s.name, s.source) for s in segment.synonyms.values()] == [("log.segment.bytes", DEFAULT)]


def test_validate_only_creates_nothing_and_checks_the_configs(server):
    create(server, NewTopic("tc-dry", 1, 1, config={"cleanup.policy": "compact"}), validate_only=True)
    assert refusal(lambda: describe(server, ResourceType.TOPIC, "tc-dry"))[0] == ErrorCode.unknown_topic_or_partition
    code, message = refusal(lambda: create(server, NewTopic("tc-dry", 1, 1, config={"cleanup.policy": "compacted"}),
                                           validate_only=True))
    assert (code, message) == (ErrorCode.invalid_config, "Invalid value compacted for configuration cleanup.policy: "
                                                         "String must be one of: compact, delete")


@pytest.mark.parametrize("config, message", [
    ({"retention.ms": "forever"}, "Invalid value forever for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "1000"}, "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"),
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"message.timestamp.type": "createtime"},
     "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, "
     "LogAppendTime"),
])
def test_a_bad_config_is_invalid_config_with_kafkas_message(server, config, message):
    assert refusal(lambda: create(server, NewTopic("tc-bad", 1, 1, config=config))) == (ErrorCode.invalid_config,
                                                                                        message)


def test_a_replication_factor_above_the_brokers_is_refused(server):
    code, message = refusal(lambda: create(server, NewTopic("tc-rf", 1, 3)))
    assert code == ErrorCode.invalid_replication_factor
    assert message.endswith("cannot be reached because only 1 broker(s) are registered or some brokers have "
                            "all their log directories cordoned.")
    create(server, NewTopic("tc-rf", 1, -1))


def test_incremental_alter_sets_deletes_appends_and_subtracts(server):
    create(server, NewTopic("tc-alter", 1, 1))
    assert values(server, "tc-alter")["cleanup.policy"] == ("delete", DEFAULT)
    incremental(server, "tc-alter", ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
                ("retention.bytes", "1048576", AlterConfigOpType.SET))
    assert values(server, "tc-alter")["cleanup.policy"] == ("delete,compact", DYNAMIC_TOPIC)
    assert values(server, "tc-alter")["retention.bytes"] == ("1048576", DYNAMIC_TOPIC)
    incremental(server, "tc-alter", ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
                ("retention.bytes", None, AlterConfigOpType.DELETE))
    configs = values(server, "tc-alter")
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC)
    assert configs["retention.bytes"] == ("-1", DEFAULT)
    # validate_only changes nothing
    incremental(server, "tc-alter", ("segment.ms", "60000", AlterConfigOpType.SET), validate_only=True)
    assert values(server, "tc-alter")["segment.ms"] == ("604800000", DEFAULT)
    assert refusal(lambda: incremental(server, "tc-alter", ("retention.ms", "5", AlterConfigOpType.APPEND))) == (
        ErrorCode.invalid_config, "Can't APPEND to key retention.ms because its type is not LIST.")
    assert refusal(lambda: incremental(server, "tc-nope", ("retention.ms", "5", AlterConfigOpType.SET)))[0] == \
        ErrorCode.unknown_topic_or_partition


def test_legacy_alter_configs_replaces_the_whole_set(server):
    create(server, NewTopic("tc-legacy", 1, 1, config={"retention.ms": "1000", "segment.ms": "2000"}))
    resource = ConfigResource(ResourceType.TOPIC, "tc-legacy", set_config={"cleanup.policy": "compact"})
    client = admin(server)
    client.alter_configs([resource])[resource].result(10)
    configs = values(server, "tc-legacy")
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC)
    assert configs["retention.ms"] == ("3600000", STATIC_BROKER) and configs["segment.ms"][1] == DEFAULT


def test_the_broker_resource_lists_the_settings_read_only(server):
    configs = describe(server, ResourceType.BROKER, "1")
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == ("3600000", STATIC_BROKER)
    assert (configs["log.segment.bytes"].value, configs["log.segment.bytes"].source) == ("1073741824", DEFAULT)
    assert configs["log.cleanup.policy"].is_read_only
    assert configs["sasl.users"].is_sensitive and configs["sasl.users"].value is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_configs_survive_a_restart(tmp_path, sig):
    s = GroupdProcess(str(tmp_path)).start()
    try:
        create(s, NewTopic("tc-kept", 1, 1, config={"cleanup.policy": "compact"}))
        incremental(s, "tc-kept", ("delete.retention.ms", "1000", AlterConfigOpType.SET))
        s.stop(sig)  # answered only once written: nothing to lose
        s.start()
        configs = values(s, "tc-kept")
        assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC)
        assert configs["delete.retention.ms"] == ("1000", DYNAMIC_TOPIC)
    finally:
        s.stop()


JAVA_LIB = os.path.join(os.environ.get("KAFKA_TEST_CLIENTS", os.path.expanduser("~/.cache/groupd-clients")),
                        "java", "lib")
TOOL = os.path.join(os.path.dirname(__file__), "java", "TopicConfigs.java")


def require(path: str, what: str) -> None:
    """Never a skip: CI installs every client (.ci/install-clients)."""
    if shutil.which("java") is None or not os.path.isdir(path):
        pytest.fail(f"{what} is not installed (.ci/install-clients)")


def test_the_java_admin_client_creates_alters_and_describes(server):
    require(JAVA_LIB, "the Java client")
    out = subprocess.run(["java", "-cp", f"{JAVA_LIB}/*", TOOL, server.bootstrap, "tc-java"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["created"]["cleanup.policy"] == ["compact", "DYNAMIC_TOPIC_CONFIG"]
    assert result["altered"]["cleanup.policy"] == ["compact,delete", "DYNAMIC_TOPIC_CONFIG"]
    assert result["altered"]["retention.ms"] == ["60000", "DYNAMIC_TOPIC_CONFIG"]
    assert result["bad"] == "InvalidConfigurationException"


CLI_LIB = os.path.join(os.path.dirname(JAVA_LIB), "tools", "lib")


def kafka_cli(main: str, server, *args: str) -> subprocess.CompletedProcess:
    """One of Kafka's own CLI tools (kafka-configs.sh and kafka-topics.sh run these classes)."""
    return subprocess.run(["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", f"{CLI_LIB}/*", main,
                           "--bootstrap-server", server.bootstrap, *args], capture_output=True, text=True, timeout=120)


def test_kafka_topics_and_kafka_configs_manage_topic_configs(server):
    require(CLI_LIB, "Kafka's CLI tools (with mvn)")
    topics, configs = "org.apache.kafka.tools.TopicCommand", "kafka.admin.ConfigCommand"
    created = kafka_cli(topics, server, "--create", "--topic", "tc-cli", "--partitions", "2",
                        "--config", "cleanup.policy=compact", "--config", "retention.ms=1000")
    assert created.returncode == 0 and "Created topic tc-cli." in created.stdout, created.stderr[-2000:]
    altered = kafka_cli(configs, server, "--entity-type", "topics", "--entity-name", "tc-cli", "--alter",
                        "--add-config", "segment.ms=60000,cleanup.policy=[compact,delete]", "--delete-config",
                        "retention.ms")
    assert altered.returncode == 0, altered.stderr[-2000:]
    described = kafka_cli(configs, server, "--entity-type", "topics", "--entity-name", "tc-cli", "--describe")
    assert described.returncode == 0, described.stderr[-2000:]
    lines = sorted(line.split(" sensitive=")[0].strip() for line in described.stdout.splitlines()
                   if "sensitive=" in line)
    assert lines == ["cleanup.policy=compact,delete", "segment.ms=60000"]
    listed = kafka_cli(topics, server, "--describe", "--topic", "tc-cli")
    # every config not at Kafka's default: the static log.retention.ms of this server too
    fields = listed.stdout.splitlines()[0].split("\t")
    assert "Configs: cleanup.policy=compact,delete,retention.ms=3600000,segment.ms=60000" in fields, listed.stdout
    refused = kafka_cli(configs, server, "--entity-type", "topics", "--entity-name", "tc-cli", "--alter",
                        "--add-config", "segment.bytes=5")
    assert refused.returncode != 0
    assert "Invalid value 5 for configuration segment.bytes: Value must be at least 1048576" in refused.stderr
