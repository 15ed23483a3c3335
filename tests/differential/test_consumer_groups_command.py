"""Kafka's own `kafka-consumer-groups.sh` (org.apache.kafka.tools.consumer.group.ConsumerGroupCommand from the
kafka-tools 4.3.1 jar) against Apache Kafka and against groupd, output compared line by line.

Both servers get the same records (five in dt1-0 and dt3-1) and groups first: a classic group with a live member (dt3 assigned to it) and
committed offsets, a KIP-848 group with a live member and a commit, and an Empty group with offsets only.
Then the same commands run against each, in order (the last ones change the Empty group): list, describe
(offsets, members, verbose members, state), errors, reset-offsets (every mode as a dry run, --export, on a
live group, executed), delete-offsets, delete. Outputs compare after normalising member ids (by identity, as diff.py does) and the bootstrap
address; any other difference is listed in allowlist.txt under its finding, as the corpus's are.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections import Counter

import pytest
from confluent_kafka import Producer

from groupd.protocol.apis import ApiKey
from tests.support.kafka import java_command

from .corpus import Member, commit, join_alone
from .diff import Side, assert_same_output, on_both

pytestmark = pytest.mark.differential

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CLASSIC, CONSUMER, EMPTY = "cgc-classic", "cgc-consumer", "cgc-empty"
ALL = ["--describe", "--group", CLASSIC, "--group", CONSUMER, "--group", EMPTY]  # not --all-groups: the
# session's Kafka also holds the corpus's groups
COMMANDS: dict[str, list[str]] = {
    "tool-list": ["--list"],
    "tool-list-state": ["--list", "--state"],
    "tool-list-state-stable": ["--list", "--state", "Stable"],
    "tool-list-type": ["--list", "--type"],
    "tool-list-type-consumer": ["--list", "--type", "consumer"],
    "tool-describe-offsets": ALL + ["--offsets"],
    "tool-describe-members": ALL + ["--members"],
    "tool-describe-members-verbose": ALL + ["--members", "--verbose"],
    "tool-describe-state": ALL + ["--state"],
    "tool-describe-state-verbose": ALL + ["--state", "--verbose"],
    "tool-describe-unknown-group": ["--describe", "--group", "cgc-none"],
    "tool-delete-live-group": ["--delete", "--group", CLASSIC],
    "tool-reset-dry-run": ["--reset-offsets", "--group", EMPTY, "--topic", "dt1", "--to-offset", "1", "--dry-run"],
    **{f"tool-reset-{mode[0][2:]}": ["--reset-offsets", "--group", EMPTY, "--all-topics", *mode, "--dry-run"]
       for mode in (["--to-earliest"], ["--to-latest"], ["--to-current"], ["--shift-by", "-2"],
                    ["--by-duration", "PT1H"], ["--to-datetime", "2020-01-01T00:00:00.000"])},
    "tool-reset-export": ["--reset-offsets", "--group", EMPTY, "--all-topics", "--to-current", "--dry-run",
                          "--export"],
    "tool-reset-live-group": ["--reset-offsets", "--group", CLASSIC, "--all-topics", "--to-earliest", "--execute"],
    "tool-reset-execute": ["--reset-offsets", "--group", EMPTY, "--all-topics", "--to-offset", "1", "--execute"],
    "tool-describe-after-reset": ["--describe", "--group", EMPTY, "--offsets"],
    "tool-delete-offsets": ["--delete-offsets", "--group", EMPTY, "--topic", "dt1"],
    "tool-delete-offsets-live": ["--delete-offsets", "--group", CLASSIC, "--topic", "dt3"],
    "tool-delete-empty-group": ["--delete", "--group", EMPTY],
    "tool-list-after-delete": ["--list"],
}
_UUID = re.compile(r"\b([\w.-]*?)-?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")


def produce(bootstrap: str) -> None:
    """Five records in dt1-0 and in dt3-1, so that log-end offsets, lag and the reset modes have something
    to show (groupd's records plane keeps them in memory)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})
    for topic, partition in (("dt1", 0), ("dt3", 1)):
        for i in range(5):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(60) == 0, "records were not acknowledged"


def prepare(side: Side) -> Member:
    """The groups of the module's docstring; returns the KIP-848 member (kept alive by `keep_alive`)."""
    produce(side.bootstrap)
    member, gen = join_alone(side, CLASSIC, session=600_000, rebalance=600_000, client="classic")
    side.call("commit-classic", ApiKey.OFFSET_COMMIT, 8, commit(CLASSIC, {"dt3": {0: 5, 1: 6}}, gen, member),
              client="classic")
    side.call("commit-empty", ApiKey.OFFSET_COMMIT, 8, commit(EMPTY, {"dt1": {0: 3}, "dt3": {1: 4}}))
    m = Member(side, CONSUMER, "aaaaaaaa-0000-4000-8000-0000000000aa", "consumer", topics=["dt3"])
    m.heartbeat("consumer-join")
    m.settle("consumer-settled")
    side.call("commit-consumer", ApiKey.OFFSET_COMMIT, 9, commit(CONSUMER, {"dt3": {2: 9}}, m.epoch, m.id),
              client="consumer")
    return m


def keep_alive(member: Member, stop: threading.Event) -> None:
    """Heartbeat the KIP-848 member (45 s sessions) every 3 s while the commands run."""
    while not stop.wait(3):
        member.heartbeat(None)


def run_tool(bootstrap: str, args: list[str]) -> list[str]:
    out = subprocess.run(java_command(TOOL, "--bootstrap-server", bootstrap, *args), capture_output=True,
                         text=True, timeout=180)
    lines = [f"rc={out.returncode}"] + out.stdout.splitlines() + [
        "stderr: " + line for line in out.stderr.splitlines() if not line.startswith(("\tat ", "SLF4J"))]
    return lines


def normalise(lines: list[str], bootstrap: str, members: dict[str, str], others: set[str]) -> Counter:
    def member(m: re.Match) -> str:
        if m.group(2) not in members:
            members[m.group(2)] = f"#{len(members) + 1}"
        return f"{m.group(1)}{members[m.group(2)]}"

    out = Counter()
    for line in lines:
        line = _UUID.sub(member, line.replace(bootstrap, "BOOTSTRAP"))
        line = " ".join(line.split())  # column widths follow the longest value
        if line and line.split()[0] not in others:  # a --list row of another test's group
            out[line] += 1
    return out


def run_all(server) -> dict[str, Counter]:
    side = Side(server.name, server.bootstrap, "cgc", server.topic_ids)
    member = prepare(side)
    stop = threading.Event()
    beat = threading.Thread(target=keep_alive, args=(member, stop), daemon=True)
    beat.start()
    members: dict[str, str] = {}
    listed = side.client().request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    others = {g.group_id for g in listed.groups} - {CLASSIC, CONSUMER, EMPTY}
    try:
        return {name: normalise(run_tool(server.bootstrap, args), server.bootstrap, members, others)
                for name, args in COMMANDS.items()}
    finally:
        stop.set()
        beat.join(30)
        side.close()


@pytest.fixture(scope="module")
def outputs(servers):
    return on_both(run_all, *servers)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_consumer_groups_command(name, outputs):
    kafka, groupd = (o[name] for o in outputs)
    assert_same_output(name, f"kafka-consumer-groups {' '.join(COMMANDS[name])}", kafka, groupd)
