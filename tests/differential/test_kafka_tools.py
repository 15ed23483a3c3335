"""Kafka's own topic, config, console and log-dir tools (the kafka-tools and kafka_2.13 4.3.1 jars)
against Apache Kafka and against groupd, output compared line by line, as
test_consumer_groups_command.py does for kafka-consumer-groups.

The commands run in order against each server and change it as they go: kafka-topics creates, lists,
describes, grows and deletes topics (with the refusals: an existing name, an unreachable replication
factor, bad and unknown configs, an illegal name, a partition count that is not an increase);
kafka-configs describes and alters a topic's and a group's configs and describes the broker;
kafka-console-producer writes keyed records that kafka-get-offsets, kafka-console-consumer (in a group)
and kafka-log-dirs then read. Outputs compare after normalising the bootstrap address, topic ids and
the log dir's path; any other difference is listed in allowlist.txt under its finding (FINDINGS.md).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter

import pytest

from tests.support.kafka import java_command

from .diff import assert_same_output, on_both

pytestmark = pytest.mark.differential

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"


def _topics(*args: str) -> tuple[str, list[str]]:
    return TOPICS, list(args)


def _configs(entity: str, name: str, *args: str) -> tuple[str, list[str]]:
    return CONFIGS, ["--entity-type", entity, "--entity-name", name, *args]


KEYED = "a:1\nb:2\nc:3\nd:4\ne:5\n"
# name → (tool, arguments, standard input); run in this order
COMMANDS: dict[str, tuple[str, list[str], str]] = {name: (*command, "") for name, command in {
    "topics-create": _topics("--create", "--topic", "tool-a", "--partitions", "3", "--replication-factor", "1",
                             "--config", "cleanup.policy=compact"),
    "topics-create-existing": _topics("--create", "--topic", "tool-a", "--partitions", "1"),
    "topics-create-if-not-exists": _topics("--create", "--topic", "tool-a", "--if-not-exists"),
    "topics-create-replication": _topics("--create", "--topic", "tool-b", "--replication-factor", "2"),
    "topics-create-bad-value": _topics("--create", "--topic", "tool-b", "--config", "retention.ms=abc"),
    "topics-create-unknown-config": _topics("--create", "--topic", "tool-b", "--config", "no.such=1"),
    "topics-create-removed-config": _topics("--create", "--topic", "tool-b", "--config",
                                            "message.downconversion.enable=true"),
    "topics-create-illegal-name": _topics("--create", "--topic", "tool b"),
    "topics-create-second": _topics("--create", "--topic", "tool-b", "--partitions", "1"),
    "topics-create-one": _topics("--create", "--topic", "tool-c", "--partitions", "1"),
    "topics-list": _topics("--list", "--topic", "tool-.*"),
    "topics-describe": _topics("--describe", "--topic", "tool-a"),
    "topics-grow": _topics("--alter", "--topic", "tool-a", "--partitions", "5"),
    "topics-shrink": _topics("--alter", "--topic", "tool-a", "--partitions", "2"),
    "topics-same-count": _topics("--alter", "--topic", "tool-a", "--partitions", "5"),
    "topics-describe-grown": _topics("--describe", "--topic", "tool-a"),
    "topics-describe-unknown": _topics("--describe", "--topic", "tool-none"),
    "topics-describe-at-min-isr": _topics("--describe", "--topic", "tool-.*", "--under-min-isr-partitions"),
    "topics-delete": _topics("--delete", "--topic", "tool-b"),
    "topics-list-after-delete": _topics("--list", "--topic", "tool-.*"),
    "configs-topic": _configs("topics", "tool-a", "--describe"),
    "configs-topic-alter": _configs("topics", "tool-a", "--alter", "--add-config",
                                    "retention.ms=86400000,segment.bytes=2000000"),
    "configs-topic-altered": _configs("topics", "tool-a", "--describe"),
    "configs-topic-delete-config": _configs("topics", "tool-a", "--alter", "--delete-config", "retention.ms"),
    "configs-topic-bad-value": _configs("topics", "tool-a", "--alter", "--add-config", "segment.bytes=10"),
    "configs-topic-all": _configs("topics", "tool-a", "--describe", "--all"),
    "configs-broker": _configs("brokers", "1", "--describe"),
    "configs-group-alter": _configs("groups", "tool-g", "--alter", "--add-config",
                                    "consumer.session.timeout.ms=50000"),
    "configs-group": _configs("groups", "tool-g", "--describe"),
    "configs-group-bad-value": _configs("groups", "tool-g", "--alter", "--add-config",
                                        "consumer.heartbeat.interval.ms=0"),
}.items()}
COMMANDS["produce"] = (PRODUCER, ["--topic", "tool-c", "--reader-property", "parse.key=true",
                                  "--reader-property", "key.separator=:"], KEYED)
COMMANDS["produce-partitioned"] = (PRODUCER, ["--topic", "tool-a", "--reader-property", "parse.key=true",
                                              "--reader-property", "key.separator=:"], KEYED)
COMMANDS.update({
    "offsets-latest": (OFFSETS, ["--topic", "tool-.*"], ""),
    "offsets-earliest": (OFFSETS, ["--topic", "tool-.*", "--time", "-2"], ""),
    # by time (the max-timestamp spec, -3, answers whichever record the producer's clock stamped last:
    # not comparable between two runs)
    "offsets-by-time": (OFFSETS, ["--topic", "tool-c", "--time", "0"], ""),
    "consume": (CONSUMER, ["--topic", "tool-c", "--from-beginning", "--max-messages", "5", "--group", "tool-cc",
                           "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
                           "--timeout-ms", "60000"], ""),
    "consume-again": (CONSUMER, ["--topic", "tool-c", "--max-messages", "1", "--group", "tool-cc",
                                 "--timeout-ms", "5000"], ""),
    "log-dirs": (LOG_DIRS, ["--describe", "--topic-list", "tool-a,tool-c"], ""),
})
_TOPIC_ID = re.compile(r"TopicId: \S+")


def run(bootstrap: str, tool: str, args: list[str], stdin: str) -> list[str]:
    out = subprocess.run(java_command(tool, "--bootstrap-server", bootstrap, *args), input=stdin,
                         capture_output=True, text=True, timeout=180)
    return [f"rc={out.returncode}"] + out.stdout.splitlines() + [
        "stderr: " + line for line in out.stderr.splitlines() if not line.startswith(("\tat ", "SLF4J"))]


def normalise(lines: list[str], bootstrap: str) -> Counter:
    out = Counter()
    for line in lines:
        if line.startswith("{") and '"logDirs"' in line:  # kafka-log-dirs' JSON: in a stable order
            report = json.loads(line)
            for broker in report["brokers"]:
                for d in broker["logDirs"]:
                    d["logDir"] = "LOGDIR"
                    d["partitions"].sort(key=lambda p: p["partition"])
            line = json.dumps(report, sort_keys=True)
        line = _TOPIC_ID.sub("TopicId: ID", line.replace(bootstrap, "BOOTSTRAP"))
        line = " ".join(line.split())
        if line:
            out[line] += 1
    return out


def run_all(server) -> dict[str, Counter]:
    return {name: normalise(run(server.bootstrap, *command), server.bootstrap) for name, command in COMMANDS.items()}


@pytest.fixture(scope="module")
def outputs(servers):
    return on_both(run_all, *servers)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_kafka_tool(name, outputs):
    kafka, groupd = (o[name] for o in outputs)
    tool, args, _ = COMMANDS[name]
    assert_same_output(name, f"{tool.rsplit('.', 1)[1]} {' '.join(args)}", kafka, groupd)
