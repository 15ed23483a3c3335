"""Kafka's own `kafka-streams-groups.sh` (org.apache.kafka.tools.streams.StreamsGroupCommand from the
kafka-tools 4.3.1 jar) against groupd, with Kafka Streams 4.3.1's word count (group.protocol=streams)
as the group: --list, --describe (offsets, --members, --state, each with --verbose), an unknown group,
--delete, --reset-offsets and --delete-offsets while the app runs (refused) and once it stopped.

The expected tables are what the same commands print against Apache Kafka 4.3.1 for the same app (run
side by side while writing this test); only the member id, process id, group epochs and coordinator
address differ there. Kafka's describe lists a subtopology's source topics as the member sent them
(the repartition topic among its repartition sources only), so `--all-input-topics` means wc-input."""

from __future__ import annotations

import subprocess

import pytest

from groupd.protocol.apis import ApiKey
from tests.support.kafka import java_command
from tests.support.process import GroupdProcess, WireClient
from tests.support.streams import StreamsApp, create_topics, last_values, produce, read_topic, wait_until

pytestmark = pytest.mark.clients

TOOL = "org.apache.kafka.tools.streams.StreamsGroupCommand"
SETTINGS = ("group.streams.min.session.timeout.ms=2000", "group.streams.session.timeout.ms=6000",
            "group.streams.min.heartbeat.interval.ms=500", "group.streams.heartbeat.interval.ms=1000")
APP = "wc-sgc"
REPARTITION = f"{APP}-words-repartition"
TIMEOUT = 90.0


@pytest.fixture
def server(tmp_path):
    s = GroupdProcess(str(tmp_path / "groupd"), *SETTINGS).start()
    yield s
    assert s.stop() == 0, s.log()


def tool(bootstrap: str, *args: str, ok: bool = True) -> list[list[str]]:
    """The tool's stdout and stderr as split lines (its tables pad with spaces)."""
    out = subprocess.run(java_command(TOOL, "--bootstrap-server", bootstrap, *args), capture_output=True,
                         text=True, timeout=180)
    assert (out.returncode == 0) == ok, out.stdout + out.stderr
    return [line.split() for line in (out.stdout + out.stderr).splitlines() if line.strip()]


def state(c: WireClient) -> str:
    [g] = c.request(ApiKey.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [APP],
                                                       "include_authorized_operations": False}).groups
    return g.group_state


def test_the_streams_groups_tool_on_a_running_then_stopped_app(server, tmp_path):
    b = server.bootstrap
    create_topics(b, {"wc-input": 2, "wc-output": 2})
    # a record in each input partition: Kafka Streams commits only the partitions it read, and the
    # reset below lists the committed ones (keyless records land on a random partition)
    produce(b, "wc-input", [(None, "a b c")], partition=0)
    produce(b, "wc-input", [(None, "b c"), (None, "c")], partition=1)
    app = StreamsApp(str(tmp_path), b, APP, group_protocol="streams").start()
    try:
        app.wait_for("STATE RUNNING", TIMEOUT)
        wait_until(lambda: last_values(read_topic(b, "wc-output")) == {"a": "1", "b": "2", "c": "3"}, TIMEOUT,
                   "the counts", [app])
        assert tool(b, "--list") == [[APP]]
        assert tool(b, "--list", "--state") == [["GROUP", "STATE"], [APP, "Stable"]]
        every = [["GROUP", "TOPIC", "PARTITION", "OFFSET-LAG"], [APP, "wc-input", "0", "0"], [APP, "wc-input", "1", "0"],
                 [APP, REPARTITION, "0", "0"], [APP, REPARTITION, "1", "0"]]
        wait_until(lambda: tool(b, "--describe", "--group", APP) == every, TIMEOUT, "committed offsets", [app])
        assert tool(b, "--describe", "--group", APP, "--offsets") == every
        verbose = tool(b, "--describe", "--group", APP, "--offsets", "--verbose")
        assert verbose[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET",
                              "OFFSET-LAG"]
        assert [row[1:3] for row in verbose[1:]] == [row[1:3] for row in every[1:]]

        [header, row] = tool(b, "--describe", "--group", APP, "--members")
        assert header == ["GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
        process = app.process_id(APP)
        assert row[0] == APP and row[2] == process and row[3] == f"{APP}-{process}-StreamThread-1-consumer"
        assert row[4:] == ["ACTIVE:", "0:[0,1];", "1:[0,1];"]
        [header, row] = tool(b, "--describe", "--group", APP, "--members", "--verbose")
        assert header == ["GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "MEMBER-PROTOCOL",
                          "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
        assert row[1] == row[5] and row[2] == "0" and row[4] == "streams"  # reconciled with the target
        assert row[8:] == ["ACTIVE:", "0:[0,1];", "1:[0,1];", "TARGET-ACTIVE:", "0:[0,1];", "1:[0,1];"]
        [header, row] = tool(b, "--describe", "--group", APP, "--state")
        assert header == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert (row[0], row[1], row[-2:]) == (APP, b, ["Stable", "1"])
        [header, row] = tool(b, "--describe", "--group", APP, "--state", "--verbose")
        assert header == ["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH",
                          "#MEMBERS"]
        assert row[3] == "Stable" and row[4] == row[5] and row[6] == "1"
        assert "GroupIdNotFoundException: Group nope not found." in " ".join(
            " ".join(r) for r in tool(b, "--describe", "--group", "nope", ok=False))

        # a live group: nothing deleted or reset
        assert tool(b, "--delete", "--group", APP)[1:] == [
            "* Group 'wc-sgc' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: "
            "Streams group 'wc-sgc' is not EMPTY.".split()]
        assert tool(b, "--reset-offsets", "--group", APP, "--all-input-topics", "--to-earliest", "--dry-run")[0] == (
            "Error: Assignments can only be reset if the group 'wc-sgc' is inactive, but the current state is "
            "Stable.".split())
        refused = tool(b, "--delete-offsets", "--group", APP, "--input-topic", "wc-input")
        assert [row[:2] for row in refused[2:]] == [["wc-input", "0"], ["wc-input", "1"]]
        assert all(row[3] == "org.apache.kafka.common.errors.GroupSubscribedToTopicException:" for row in refused[2:])
    finally:
        app.stop()

    with WireClient(b) as c:  # Kafka Streams' close leaves the group
        wait_until(lambda: state(c) == "Empty", TIMEOUT, "the group empties")
    [error, header, row] = tool(b, "--describe", "--group", APP, "--state")
    assert (error, header) == ("Error: Streams group 'wc-sgc' has no active members.".split(),
                               ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"])
    assert (row[:2], row[3:]) == ([APP, b], ["Empty", "0"])
    assert tool(b, "--reset-offsets", "--group", APP, "--all-input-topics", "--to-earliest", "--dry-run") == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [APP, "wc-input", "0", "0"], [APP, "wc-input", "1", "0"]]
    assert tool(b, "--reset-offsets", "--group", APP, "--input-topic", "wc-input", "--to-offset", "1",
                "--execute") == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [APP, "wc-input", "0", "1"],
                                 [APP, "wc-input", "1", "1"]]
    assert tool(b, "--delete-offsets", "--group", APP, "--input-topic", "wc-input") == [
        "Request succeeded for deleting offsets from group wc-sgc.".split(), ["TOPIC", "PARTITION", "STATUS"],
        ["wc-input", "0", "Successful"], ["wc-input", "1", "Successful"]]
    assert tool(b, "--delete", "--group", APP) == [
        "Deletion of requested streams groups ('wc-sgc') was successful.".split()]
    assert tool(b, "--list") == []
