"""The operations commands (`groupd groups`, `groupd offsets reset`, `groupd health`, in
coordinator/admin.py) run as the real CLI against the real server process, with live consumer
groups of confluent-kafka (librdkafka) as members."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

from coordinator.admin import DEFAULT_BOOTSTRAP, AdminError, default_bootstrap, split_bootstrap
from protocol import ErrorCode
from protocol.apis import ApiKey
from tests.harness import ClientProcess, wait_until
from tests.support import ROOT, GroupdProcess, WireClient, free_port, groupd_fixture

T4 = {f"t4-{p}" for p in range(4)}


server = groupd_fixture("topics=t4:4", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")


@pytest.fixture
def members():
    """Start confluent-kafka group members; every one is closed (leaves its group) at the end."""
    started: list[ClientProcess] = []

    def start(bootstrap: str, group: str, client_id: str) -> ClientProcess:
        c = ClientProcess("confluent", "subscribe", bootstrap, {
            "topic": "t4", "group": group, "seconds": 0, "session.ms": 6000,
            "heartbeat.interval.ms": 500, "client.id": client_id})
        started.append(c)
        return c

    yield start
    for c in started:
        c.close(timeout=20)


def groupd(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """The real CLI, `python -m coordinator ARGS`, with no GROUPD_* variables unless given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GROUPD_")}
    return subprocess.run([sys.executable, "-m", "coordinator", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**clean, **(env or {})})


def groupd_json(*args: str):
    r = groupd(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def balanced(clients: list[ClientProcess]) -> bool:
    assignments = [c.assignment() for c in clients]
    if any(not a for a in assignments):
        return False
    flat = [p for a in assignments for p in a]
    return len(flat) == len(set(flat)) and set(flat) == T4


def committed(bootstrap: str, group: str) -> dict[str, tuple[int, str | None]]:
    with WireClient(bootstrap) as w:
        r = w.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
    assert r.groups[0].error_code is ErrorCode.none
    return {f"{t.name}-{p.partition_index}": (p.committed_offset, p.metadata)
            for t in r.groups[0].topics for p in t.partitions}


def state(bootstrap: str, group: str) -> str:
    with WireClient(bootstrap) as w:
        return w.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}
                         ).groups[0].group_state


# --- groups list / describe -----------------------------------------------------------------------

def test_list_and_describe_show_a_live_group(server, members):
    b = ["--bootstrap", server.bootstrap]
    # offsets first (the group is created Empty by the reset), then two members join and read from them
    assert groupd("offsets", "reset", "live", "--topic", "t4", "--to-offset", "3", *b).returncode == 0
    clients = [members(server.bootstrap, "live", "member-a"), members(server.bootstrap, "live", "member-b")]
    wait_until(lambda: balanced(clients), 60, "two members sharing t4")
    wait_until(lambda: state(server.bootstrap, "live") == "Stable", 30, "a Stable group")

    listed = groupd_json("groups", "list", *b)
    assert {"group": "live", "state": "Stable", "protocol_type": "consumer", "type": "classic"} in listed
    text = groupd("groups", "list", *b)
    assert text.returncode == 0 and text.stdout.splitlines()[0].split() == ["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"]
    assert re.search(r"^live +Stable +consumer +classic$", text.stdout, re.M), text.stdout

    d = groupd_json("groups", "describe", "live", *b)
    assert (d["group"], d["state"], d["protocol_type"]) == ("live", "Stable", "consumer")
    assert d["protocol"] in ("range", "roundrobin")  # librdkafka's default assignors
    assert sorted(m["client_id"] for m in d["members"]) == ["member-a", "member-b"]
    # each member's assignment, decoded from the SyncGroup bytes, is what that client was given
    reported = {c.wait_for(lambda e: e["event"] == "assigned")["member_id"]: sorted(c.assignment()) for c in clients}
    decoded = {m["member_id"]: sorted(f"{t}-{p}" for t, ps in m["assignment"].items() for p in ps)
               for m in d["members"]}
    assert decoded == reported
    assert all(m["client_host"] and m["group_instance_id"] is None for m in d["members"])
    owner = {f"t4-{p}": m["member_id"] for m in d["members"] for p in m["assignment"]["t4"]}
    assert [(o["topic"], o["partition"], o["offset"], o["log_end_offset"], o["lag"], o["member_id"])
            for o in d["offsets"]] == [("t4", p, 3, 0, -3, owner[f"t4-{p}"]) for p in range(4)]

    text = groupd("groups", "describe", "live", *b)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("group live: Stable, protocol type consumer, protocol ")
    assert "2 members" in text.stdout.splitlines()[0]
    for m in d["members"]:
        assert re.search(rf"^{re.escape(m['member_id'])} +{m['client_id']} ", text.stdout, re.M), text.stdout
    assert re.search(r"^TOPIC +PARTITION +CURRENT-OFFSET +LOG-END-OFFSET +LAG +CONSUMER-ID$", text.stdout, re.M)
    assert all(re.search(rf"^t4 +{p} +3 +0 +-3 +{re.escape(owner[f't4-{p}'])}$", text.stdout, re.M)
               for p in range(4)), text.stdout


def test_describe_of_an_unknown_group_fails_clearly(server):
    r = groupd("groups", "describe", "never-seen", "--bootstrap", server.bootstrap)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == "groupd: group 'never-seen' does not exist"


# --- offsets reset --------------------------------------------------------------------------------

def test_offsets_reset_refuses_a_live_group_and_works_once_it_is_empty(server, members):
    b = ["--bootstrap", server.bootstrap]
    clients = [members(server.bootstrap, "resettable", f"m{i}") for i in range(2)]
    wait_until(lambda: balanced(clients), 60, "two members sharing t4")
    wait_until(lambda: state(server.bootstrap, "resettable") == "Stable", 30, "a Stable group")

    refused = groupd("offsets", "reset", "resettable", "--topic", "t4", "--to-offset", "9", *b)
    assert refused.returncode == 1 and refused.stdout == ""
    assert "cannot reset the offsets of group 'resettable': it is Stable with 2 members" in refused.stderr
    assert "only be reset while the group is Empty" in refused.stderr
    assert committed(server.bootstrap, "resettable") == {}
    # the commit the command sends (generation -1, no member) is refused by a live group too, so a
    # member joining between the state check and the commit makes the reset fail, not race
    with WireClient(server.bootstrap) as w:
        r = w.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "resettable", "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": "t4", "partitions": [
                {"partition_index": 0, "committed_offset": 9, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
    assert r.topics[0].partitions[0].error_code is not ErrorCode.none
    assert committed(server.bootstrap, "resettable") == {}

    for c in clients:
        assert c.close() == 0, c.events  # a clean leave each
    wait_until(lambda: state(server.bootstrap, "resettable") == "Empty", 30, "an Empty group")

    dry = groupd("offsets", "reset", "resettable", "--topic", "t4", "--to-offset", "9", "--dry-run", *b)
    assert dry.returncode == 0 and "dry run" in dry.stdout
    assert committed(server.bootstrap, "resettable") == {}

    done = groupd("offsets", "reset", "resettable", "--topic", "t4", "--to-offset", "9", *b)
    assert done.returncode == 0, done.stderr
    assert [line.split() for line in done.stdout.splitlines()] == (
        [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [["resettable", "t4", str(p), "9"] for p in range(4)]
        + [["committed", "4", "offsets"]])
    assert committed(server.bootstrap, "resettable") == {tp: (9, "") for tp in T4}

    # earliest comes from ListOffsets: 0 while groupd stores no records
    r = groupd_json("offsets", "reset", "resettable", "--topic", "t4", "--to-earliest", *b)
    assert r["offsets"] == [{"partition": p, "offset": 0} for p in range(4)] and not r["created"]
    assert committed(server.bootstrap, "resettable") == {tp: (0, "") for tp in T4}
    assert state(server.bootstrap, "resettable") == "Empty"


def test_earliest_and_lag_come_from_the_records_plane_when_it_is_on(tmp_path):
    """With records kept (and the oldest dropped by retention), --to-earliest commits the earliest
    offset ListOffsets reports, not 0, and describe shows the real log-end offset and lag."""
    from coordinator.settings import KEYS_BY_NAME
    if "records.plane" not in KEYS_BY_NAME:
        pytest.skip("no records plane in this build")
    from confluent_kafka import Producer

    s = GroupdProcess(str(tmp_path / "data"), "topics=r2:2", "records.plane=memory",
                      "records.retention.bytes=200").start()
    try:
        producer = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        for i in range(20):  # one batch each, ten per partition; retention keeps only the newest few
            producer.produce("r2", value=b"x" * 50, partition=i % 2)
            producer.flush(10)
        assert len(producer) == 0
        r = groupd_json("offsets", "reset", "plane", "--topic", "r2", "--to-earliest", "--bootstrap", s.bootstrap)
        earliest = [o["offset"] for o in r["offsets"]]
        assert len(earliest) == 2 and all(0 < e < 10 for e in earliest), r
        d = groupd_json("groups", "describe", "plane", "--bootstrap", s.bootstrap)
        assert [(o["offset"], o["log_end_offset"], o["lag"]) for o in d["offsets"]] == [(e, 10, 10 - e) for e in earliest]
    finally:
        assert s.stop() == 0, s.log()


def test_offsets_reset_of_an_unknown_topic_fails_and_commits_nothing(server):
    r = groupd("offsets", "reset", "typo", "--topic", "no-such-topic", "--to-earliest", "--bootstrap", server.bootstrap)
    assert r.returncode == 1
    assert r.stderr.strip() == "groupd: topic 'no-such-topic': UNKNOWN_TOPIC_OR_PARTITION"
    assert committed(server.bootstrap, "typo") == {}


def test_offsets_reset_needs_exactly_one_target():
    assert groupd("offsets", "reset", "g", "--topic", "t").returncode == 2
    assert groupd("offsets", "reset", "g", "--topic", "t", "--to-earliest", "--to-offset", "1").returncode == 2
    bad = groupd("offsets", "reset", "g", "--topic", "t", "--to-offset", "-1")
    assert bad.returncode == 2 and "an offset is 0 or more" in bad.stderr


# --- health ---------------------------------------------------------------------------------------

def test_health_exits_0_when_groupd_answers(server):
    r = groupd("health", "--bootstrap", server.bootstrap)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.fullmatch(rf"healthy: {server.bootstrap} answered ApiVersions in [\d.]+ ms \(\d+ APIs\)\n", r.stdout)


def test_health_exits_1_against_a_closed_port():
    port = free_port()  # bound and released: nothing listens there
    r = groupd("health", "--bootstrap", f"127.0.0.1:{port}")
    assert r.returncode == 1
    assert r.stdout == f"unhealthy: 127.0.0.1:{port}: Connection refused\n"


def test_health_exits_1_when_nothing_answers_within_the_timeout():
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = "127.0.0.1:%d" % silent.getsockname()[1]
        start = time.monotonic()
        r = groupd("health", "--bootstrap", address, "--timeout", "0.5")
        assert time.monotonic() - start < 10
    assert r.returncode == 1
    assert r.stdout == f"unhealthy: {address}: no answer within 0.5 s\n"


def test_health_finds_groupd_through_its_own_listeners_variable(server):
    """The image's HEALTHCHECK runs `groupd health` with no flag: GROUPD_LISTENERS tells it where."""
    r = groupd("health", env={"GROUPD_LISTENERS": f"PLAINTEXT://0.0.0.0:{server.port}"})
    assert r.returncode == 0, r.stdout
    assert r.stdout.startswith(f"healthy: 127.0.0.1:{server.port} ")


# --- addresses ------------------------------------------------------------------------------------

def test_default_bootstrap_follows_groupd_listeners():
    assert default_bootstrap({}) == DEFAULT_BOOTSTRAP == "127.0.0.1:9092"
    assert default_bootstrap({"GROUPD_LISTENERS": "PLAINTEXT://0.0.0.0:19092"}) == "127.0.0.1:19092"
    assert default_bootstrap({"GROUPD_LISTENERS": "PLAINTEXT://[::]:9093"}) == "[::1]:9093"
    assert default_bootstrap({"GROUPD_LISTENERS": "PLAINTEXT://10.1.2.3:9094,PLAINTEXT://127.0.0.1:1"}) == "10.1.2.3:9094"
    assert default_bootstrap({"GROUPD_LISTENERS": "nonsense"}) == DEFAULT_BOOTSTRAP


def test_default_bootstrap_is_the_first_plaintext_listener():
    """The commands speak neither TLS nor SASL: the PLAINTEXT listener, wherever it is listed."""
    env = {"GROUPD_LISTENERS": "EXTERNAL://0.0.0.0:9093,INTERNAL://0.0.0.0:9092",
           "GROUPD_LISTENER_SECURITY_PROTOCOL_MAP": "EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT"}
    assert default_bootstrap(env) == "127.0.0.1:9092"
    assert default_bootstrap({"GROUPD_LISTENERS": "SSL://0.0.0.0:9093,PLAINTEXT://0.0.0.0:9092"}) == "127.0.0.1:9092"


def test_split_bootstrap():
    assert split_bootstrap("groupd:9092") == ("groupd", 9092)
    assert split_bootstrap("[::1]:9092") == ("::1", 9092)
    assert split_bootstrap("PLAINTEXT://127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert split_bootstrap("a:1,b:2") == ("a", 1)
    with pytest.raises(AdminError):
        split_bootstrap("no-port")
