"""Kafka's `kafka-acls.sh` and `kafka-configs.sh --entity-type users` (the 4.3.1 jars) against an Apache
Kafka broker and a groupd that both have the ACL authorizer on and a SASL listener, outputs compared
line by line, as test_kafka_tools.py does for the topic and config tools.

Both servers: a PLAINTEXT listener whose principal (User:ANONYMOUS) is the super user the admin
commands run as, and a SASL_PLAINTEXT listener (PLAIN for alice and bob from the server's own list,
SCRAM-SHA-256 for users created by kafka-configs). The commands run in order and change the server as
they go: ACLs are added, listed by resource and principal, removed; SCRAM credentials are created,
described, deleted; and alice, through the SASL listener, meets the ACLs from the other side: the topics
she may describe, a consumer group she may not read, her credentials by SCRAM.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter

import pytest

from tests.support.kafka import KAFKA_ONLY_SETTINGS, KafkaBroker, groupd_settings, java_command
from tests.support.process import GroupdProcess, free_ports

from .diff import assert_same_output, on_both

pytestmark = pytest.mark.differential

ACLS = "org.apache.kafka.tools.AclCommand"
CONFIGS = "kafka.admin.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def _acls(*args: str) -> tuple[str, str, list[str]]:
    return "admin", ACLS, list(args)


def _users(*args: str) -> tuple[str, str, list[str]]:
    return "admin", CONFIGS, ["--entity-type", "users", *args]


# name → (who runs it: admin on PLAINTEXT, alice-plain / alice-scram on SASL, tool, arguments), in order
COMMANDS: dict[str, tuple[str, str, list[str]]] = {
    "acls-list-empty": _acls("--list"),
    "acls-add-topic-read": _acls("--add", "--allow-principal", "User:alice", "--operation", "Read",
                                 "--operation", "Describe", "--topic", "sec-t"),
    "acls-add-prefixed": _acls("--add", "--allow-principal", "User:alice", "--operation", "Describe",
                               "--topic", "sec-", "--resource-pattern-type", "prefixed"),
    "acls-add-deny-host": _acls("--add", "--deny-principal", "User:bob", "--deny-host", "127.0.0.1",
                                "--operation", "All", "--topic", "sec-t"),
    "acls-add-group": _acls("--add", "--allow-principal", "User:alice", "--operation", "Describe",
                            "--group", "sec-g"),
    "acls-add-transactional-id": _acls("--add", "--allow-principal", "User:alice", "--operation", "Write",
                                       "--transactional-id", "sec-tx"),
    "acls-add-cluster": _acls("--add", "--allow-principal", "User:bob", "--operation", "Describe", "--cluster"),
    "acls-add-producer": _acls("--add", "--allow-principal", "User:bob", "--producer", "--topic", "sec-p"),
    "acls-add-consumer": _acls("--add", "--allow-principal", "User:bob", "--consumer", "--topic", "sec-p",
                               "--group", "sec-bob"),
    "acls-add-bad-operation": _acls("--add", "--allow-principal", "User:alice", "--operation", "Alter",
                                    "--group", "sec-g"),
    "acls-list": _acls("--list"),
    "acls-list-topic": _acls("--list", "--topic", "sec-t"),
    "acls-list-prefixed": _acls("--list", "--topic", "sec-", "--resource-pattern-type", "prefixed"),
    "acls-list-match": _acls("--list", "--topic", "sec-t", "--resource-pattern-type", "match"),
    "acls-list-principal": _acls("--list", "--principal", "User:bob"),
    "acls-list-group": _acls("--list", "--group", "sec-g"),
    "acls-remove-deny": _acls("--remove", "--force", "--deny-principal", "User:bob", "--deny-host", "127.0.0.1",
                              "--operation", "All", "--topic", "sec-t"),
    "acls-remove-consumer": _acls("--remove", "--force", "--allow-principal", "User:bob", "--consumer",
                                  "--topic", "sec-p", "--group", "sec-bob"),
    "acls-list-after-remove": _acls("--list"),
    "topics-create": ("admin", TOPICS, ["--create", "--topic", "sec-t", "--partitions", "1"]),
    "topics-create-other": ("admin", TOPICS, ["--create", "--topic", "other-t", "--partitions", "1"]),
    "users-add-scram": _users("--entity-name", "carol", "--alter", "--add-config",
                              "SCRAM-SHA-256=[iterations=8192,password=carol-secret]"),
    "users-add-scram-512": _users("--entity-name", "carol", "--alter", "--add-config",
                                  "SCRAM-SHA-512=[password=carol-512]"),
    "users-add-too-few-iterations": _users("--entity-name", "dave", "--alter", "--add-config",
                                           "SCRAM-SHA-256=[iterations=10,password=x]"),
    "users-describe": _users("--describe"),
    "users-describe-one": _users("--entity-name", "carol", "--describe"),
    "users-delete-one-mechanism": _users("--entity-name", "carol", "--alter", "--delete-config", "SCRAM-SHA-512"),
    "users-delete-missing": _users("--entity-name", "erin", "--alter", "--delete-config", "SCRAM-SHA-256"),
    "users-describe-after-delete": _users("--describe"),
    "alice-topics-list": ("alice-plain", TOPICS, ["--list"]),
    "alice-topics-describe-denied": ("alice-plain", TOPICS, ["--describe", "--topic", "other-t"]),
    "alice-groups-list": ("alice-plain", GROUPS, ["--list"]),
    "alice-group-describe-denied": ("alice-plain", GROUPS, ["--describe", "--group", "sec-other"]),
    "alice-acls-denied": ("alice-plain", ACLS, ["--list"]),
    "carol-scram-topics-list": ("carol-scram", TOPICS, ["--list"]),
    "carol-wrong-mechanism": ("carol-512", TOPICS, ["--list"]),
}


class SecuredKafka(KafkaBroker):
    """Kafka with a SASL_PLAINTEXT listener beside PLAINTEXT, and StandardAuthorizer."""

    def __init__(self, data_dir: str) -> None:
        self.sasl_port = free_ports(1)
        super().__init__(data_dir, {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})

    def properties(self) -> dict[str, str]:
        users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        return {**super().properties(),
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                             f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                                        f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                "listener.security.protocol.map": KAFKA_ONLY_SETTINGS["listener.security.protocol.map"]
                + ",SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": f"{PLAIN} required {users};",
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM} required;",
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;"}


def _client_configs(directory: str) -> dict[str, str]:
    """Who → a client properties file for the SASL listener (admin: none)."""
    files = {}
    for who, mechanism, user, password in (("alice-plain", "PLAIN", "alice", USERS["alice"]),
                                           ("carol-scram", "SCRAM-SHA-256", "carol", "carol-secret"),
                                           ("carol-512", "SCRAM-SHA-512", "carol", "carol-512")):
        module = PLAIN if mechanism == "PLAIN" else SCRAM
        path = os.path.join(directory, f"{who}.properties")
        with open(path, "w") as f:
            f.write(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                    f'sasl.jaas.config={module} required username="{user}" password="{password}";\n')
        files[who] = path
    return files


def run(plain: str, sasl: str, configs: dict[str, str], who: str, tool: str, args: list[str]) -> list[str]:
    if who == "admin":
        command = java_command(tool, "--bootstrap-server", plain, *args)
    else:
        option = "--command-config"
        command = java_command(tool, "--bootstrap-server", sasl, option, configs[who], *args)
    out = subprocess.run(command, capture_output=True, text=True, timeout=180)
    return [f"rc={out.returncode}"] + out.stdout.splitlines() + [
        "stderr: " + line for line in out.stderr.splitlines() if not line.startswith(("\tat ", "SLF4J"))]


# Kafka's message for a denied ACL request prints its own request object (processor, connection id,
# session): free-form text, compared as present (as diff.py compares error messages)
_DENIED = re.compile(r"(ClusterAuthorizationException): \S.*")
# Kafka keeps a user's credentials in a HashMap keyed by mechanism: their order varies between runs
_CREDENTIALS = re.compile(r"^(SCRAM credential configs for user-principal '[^']*' are )(.*)$")


def normalise(lines: list[str], addresses: list[str]) -> Counter:
    out = Counter()
    for line in lines:
        for address in addresses:
            line = line.replace(address, "BOOTSTRAP")
        line = _DENIED.sub(r"\1: MESSAGE", " ".join(line.split()))
        line = _CREDENTIALS.sub(lambda m: m[1] + ", ".join(sorted(m[2].split(", "))), line)
        if line:
            out[line] += 1
    return out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    kafka = SecuredKafka(str(tmp_path_factory.mktemp("secured-kafka")))
    ports: list[int] = []  # free now, and none of Kafka's: both servers bind at the same time
    while len(ports) < 2:
        if (port := free_ports(1)) not in (*ports, kafka.port, kafka.controller_port, kafka.sasl_port):
            ports.append(port)
    plain, sasl = ports
    groupd = GroupdProcess(
        str(tmp_path_factory.mktemp("secured-groupd")),
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.users=" + ",".join(f"{u}:{p}" for u, p in USERS.items()),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", f"authorizer.class.name={AUTHORIZER}",
        "super.users=User:ANONYMOUS", *groupd_settings(), port=plain)
    try:
        on_both(lambda server: server.start(), kafka, groupd)
        configs = _client_configs(str(tmp_path_factory.mktemp("client-configs")))
        return on_both(lambda addresses: {name: normalise(run(*addresses, configs, *command), list(addresses))
                                          for name, command in COMMANDS.items()},
                       (kafka.bootstrap, f"127.0.0.1:{kafka.sasl_port}"), (groupd.bootstrap, f"127.0.0.1:{sasl}"))
    finally:
        try:
            assert groupd.stop() == 0, groupd.log()
        finally:
            kafka.stop()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_security_tool(name, outputs):
    kafka, groupd = (o[name] for o in outputs)
    who, tool, args = COMMANDS[name]
    assert_same_output(name, f"{who}: {tool.rsplit('.', 1)[1]} {' '.join(args)}", kafka, groupd)
