"""Kafka's own `kafka-share-groups.sh` (org.apache.kafka.tools.consumer.group.ShareGroupCommand from the
kafka-tools 4.3.1 jar) against groupd: --list, --describe (start offset and lag, from
DescribeShareGroupOffsets), --describe --members (ShareGroupDescribe) and --describe --state, as Kafka
prints them for the same state, then --reset-offsets and --delete-offsets once the group is empty
(AlterShareGroupOffsets, DeleteShareGroupOffsets). A member joined, acquired six records, accepted
0–1 and rejected 3: the start offset is 2, the lag 6 − 2 − 1 = 3."""

from __future__ import annotations

import subprocess

import pytest

from tests.apis.test_share_fetch_wire import acquired, produce, share_ack, share_fetch, topic_id
from tests.apis.test_share_group_offsets_wire import join, leave
from tests.support.kafka import java_command
from tests.support.process import WireClient, groupd_fixture

pytestmark = pytest.mark.clients

server = groupd_fixture("topics=sgc:1", "records.plane=memory")
TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def run_tool(bootstrap: str, *args: str) -> list[list[str]]:
    out = subprocess.run(java_command(TOOL, "--bootstrap-server", bootstrap, *args), capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return [line.split() for line in out.stdout.splitlines() if line.strip()]


def test_list_and_describe_a_share_group(server):
    with WireClient(server.bootstrap) as c:
        join(c, "sgc-tool", "m", ["sgc"])
        tid = topic_id(c, "sgc")
        share_fetch(c, "sgc-tool", "m", 0, tid)
        produce(server.bootstrap, "sgc", 6)
        assert acquired(share_fetch(c, "sgc-tool", "m", 1, wait_ms=5000))[0] == [(0, 5, 1)]
        share_ack(c, "sgc-tool", "m", 2, tid, [(0, 1, 1), (3, 3, 3)])
    assert ["sgc-tool"] in run_tool(server.bootstrap, "--list")
    assert run_tool(server.bootstrap, "--describe", "--group", "sgc-tool") == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], ["sgc-tool", "sgc", "0", "2", "3"]]
    assert run_tool(server.bootstrap, "--describe", "--group", "sgc-tool", "--members") == [
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
        ["sgc-tool", "m", "/127.0.0.1", "wire-test", "1", "sgc:0"]]
    state = run_tool(server.bootstrap, "--describe", "--group", "sgc-tool", "--state")
    assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
    assert state[1][0] == "sgc-tool" and state[1][-2:] == ["Stable", "1"]
    with WireClient(server.bootstrap) as c:  # the group empties (its session ended with its connection)
        leave(c, "sgc-tool", "m")
    assert run_tool(server.bootstrap, "--reset-offsets", "--group", "sgc-tool", "--topic", "sgc", "--to-earliest",
                    "--execute") == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["sgc-tool", "sgc", "0", "0"]]
    assert run_tool(server.bootstrap, "--describe", "--group", "sgc-tool")[1] == ["sgc-tool", "sgc", "0", "0", "6"]
    assert run_tool(server.bootstrap, "--delete-offsets", "--group", "sgc-tool", "--topic", "sgc") == [
        ["TOPIC", "STATUS"], ["sgc", "Successful"]]
    # no state left, and the topic no longer among the group's initialized share-partitions
    assert run_tool(server.bootstrap, "--describe", "--group", "sgc-tool") == [
        "Share group 'sgc-tool' has no offset information.".split()]
