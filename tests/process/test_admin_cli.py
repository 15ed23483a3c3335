"""The operations commands (`groupd groups`, `groupd offsets reset`, `groupd health`, in
coordinator/tools/groups.py) run as the real CLI against the real server process, with live consumer
groups of confluent-kafka (librdkafka) as members."""

from __future__ import annotations

import argparse
import json
import re
import socket
import time

import pytest

from groupd.coordinator.settings import ConfigError
from groupd.coordinator.tools.client import AdminError, split_bootstrap
from groupd.coordinator.tools.commands import LAG_FOOTNOTE, resolve_bootstrap
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.harness import ClientProcess, wait_until
from tests.support.process import GroupdProcess, WireClient, free_port, groupd_fixture
from tests.support.process import groupd_cli as groupd  # the real CLI, as most tests here call it

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
    assert groupd("offsets", "reset", "live", "--topic", "t4", "--to-offset", "3", "--execute", *b).returncode == 0
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
            for o in d["offsets"]] == [("t4", p, 3, 0, None, owner[f"t4-{p}"]) for p in range(4)]

    text = groupd("groups", "describe", "live", *b)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("group live: Stable, protocol type consumer, protocol ")
    assert "2 members" in text.stdout.splitlines()[0]
    for m in d["members"]:
        assert re.search(rf"^{re.escape(m['member_id'])} +{m['client_id']} ", text.stdout, re.M), text.stdout
    assert re.search(r"^TOPIC +PARTITION +CURRENT-OFFSET +LOG-END-OFFSET +LAG +CONSUMER-ID +HOST +CLIENT-ID$",
                     text.stdout, re.M)
    # no records (records.plane=none): the lag is unknown, not negative, and a footnote says why
    client = {m["member_id"]: m for m in d["members"]}
    assert all(re.search(rf"^t4 +{p} +3 +0 +- +{re.escape(owner[f't4-{p}'])} +{re.escape(client[owner[f't4-{p}']]['client_host'])}"
                         rf" +{client[owner[f't4-{p}']]['client_id']}$", text.stdout, re.M)
               for p in range(4)), text.stdout
    assert text.stdout.rstrip().endswith(LAG_FOOTNOTE)


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

    refused = groupd("offsets", "reset", "resettable", "--topic", "t4", "--to-offset", "9", "--execute", *b)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == ("groupd: Assignments can only be reset if the group 'resettable' is inactive, "
                              "but the current state is Stable.\n")
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

    for dry_run in ((), ("--dry-run",)):  # a dry run is the default, as in Kafka's tool
        dry = groupd("offsets", "reset", "resettable", "--topic", "t4", "--to-offset", "9", *dry_run, *b)
        assert dry.returncode == 0 and "dry run: nothing committed" in dry.stdout
    assert committed(server.bootstrap, "resettable") == {}

    done = groupd("offsets", "reset", "resettable", "--topic", "t4", "--to-offset", "9", "--execute", *b)
    assert done.returncode == 0, done.stderr
    assert [line.split() for line in done.stdout.splitlines()] == (
        [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [["resettable", "t4", str(p), "9"] for p in range(4)]
        + [["committed", "4", "offsets"]])
    assert committed(server.bootstrap, "resettable") == {tp: (9, "") for tp in T4}

    # earliest comes from ListOffsets: 0 while groupd stores no records
    r = groupd_json("offsets", "reset", "resettable", "--topic", "t4", "--to-earliest", "--execute", *b)
    assert r["offsets"] == [{"topic": "t4", "partition": p, "offset": 0} for p in range(4)] and not r["created"]
    assert committed(server.bootstrap, "resettable") == {tp: (0, "") for tp in T4}
    assert state(server.bootstrap, "resettable") == "Empty"


def test_earliest_and_lag_come_from_the_records_plane_when_it_is_on(tmp_path):
    """With records kept (and the oldest dropped by retention), --to-earliest commits the earliest
    offset ListOffsets reports, not 0, and describe shows the real log-end offset and lag."""
    from groupd.coordinator.settings import KEYS_BY_NAME
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
        r = groupd_json("offsets", "reset", "plane", "--topic", "r2", "--to-earliest", "--execute",
                        "--bootstrap", s.bootstrap)
        earliest = [o["offset"] for o in r["offsets"]]
        assert len(earliest) == 2 and all(0 < e < 10 for e in earliest), r
        d = groupd_json("groups", "describe", "plane", "--bootstrap", s.bootstrap)
        assert [(o["offset"], o["log_end_offset"], o["lag"]) for o in d["offsets"]] == [(e, 10, 10 - e) for e in earliest]
    finally:
        assert s.stop() == 0, s.log()


def test_offsets_reset_of_an_unknown_topic_fails_and_commits_nothing(server):
    r = groupd("offsets", "reset", "typo", "--topic", "no-such-topic", "--to-earliest", "--execute",
               "--bootstrap", server.bootstrap)
    assert r.returncode == 1
    assert r.stderr.strip() == "groupd: topic 'no-such-topic': UNKNOWN_TOPIC_OR_PARTITION"
    assert committed(server.bootstrap, "typo") == {}


def test_offsets_reset_needs_exactly_one_target():
    assert groupd("offsets", "reset", "g", "--topic", "t").returncode == 2
    assert groupd("offsets", "reset", "g", "--topic", "t", "--to-earliest", "--to-offset", "1").returncode == 2
    bad = groupd("offsets", "reset", "g", "--topic", "t", "--to-offset", "-1")
    assert bad.returncode == 2 and "an offset is 0 or more" in bad.stderr
    # a usage mistake is one line, as every other failure
    assert bad.stderr == ("groupd offsets reset: argument --to-offset: an offset is 0 or more "
                          "(see groupd offsets reset --help)\n")
    both = groupd("offsets", "reset", "g", "--topic", "t", "--to-earliest", "--execute", "--dry-run")
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "not allowed with argument --execute" in both.stderr


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


@pytest.mark.parametrize("command", [("groups", "list"), ("groups", "describe", "g"), ("groups", "delete", "g"),
                                     ("offsets", "delete", "g", "--topic", "t"),
                                     ("offsets", "reset", "g", "--all-topics", "--to-earliest")])
def test_every_command_against_a_closed_port_fails_in_one_line(command):
    port = free_port()
    r = groupd(*command, "--bootstrap", f"127.0.0.1:{port}")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"groupd: 127.0.0.1:{port}: Connection refused\n")


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

def bootstrap_of(*argv: str, env: dict | None = None) -> str:
    args = argparse.Namespace(bootstrap=None, config=None, set=[])
    for flag, value in zip(argv[::2], argv[1::2]):
        if flag == "--set":
            args.set.append(value)
        else:
            setattr(args, flag.lstrip("-"), value)
    return resolve_bootstrap(args, env or {})


def test_bootstrap_comes_from_the_settings_serve_reads(tmp_path):
    assert bootstrap_of() == "127.0.0.1:9092"  # listeners' default
    assert bootstrap_of(env={"GROUPD_LISTENERS": "PLAINTEXT://0.0.0.0:19092"}) == "127.0.0.1:19092"
    assert bootstrap_of(env={"GROUPD_LISTENERS": "PLAINTEXT://[::]:9093"}) == "[::1]:9093"
    assert bootstrap_of("--set", "listeners=PLAINTEXT://10.1.2.3:9094,PLAINTEXT://127.0.0.1:1") == "10.1.2.3:9094"
    config = tmp_path / "groupd.yaml"
    config.write_text("listeners: PLAINTEXT://127.0.0.1:19095\n")
    assert bootstrap_of("--config", str(config)) == "127.0.0.1:19095"
    # precedence as serve's: file < env < --set; --bootstrap beats them all
    env = {"GROUPD_LISTENERS": "PLAINTEXT://127.0.0.1:19096"}
    assert bootstrap_of("--config", str(config), env=env) == "127.0.0.1:19096"
    assert bootstrap_of("--config", str(config), "--set", "listeners=PLAINTEXT://:19097", env=env) == "127.0.0.1:19097"
    assert bootstrap_of("--bootstrap", "groupd:9092", env={"GROUPD_LISTENERS": "nonsense"}) == "groupd:9092"
    with pytest.raises(ConfigError, match="listeners="):
        bootstrap_of(env={"GROUPD_LISTENERS": "nonsense"})


def test_commands_find_groupd_through_set_and_config_like_serve(server, tmp_path):
    """After `groupd serve --set listeners=...`, a plain `groupd health --set listeners=...` (or
    the same --config file) looks where it listens."""
    listeners = f"listeners=PLAINTEXT://127.0.0.1:{server.port}"
    r = groupd("health", "--set", listeners)
    assert r.returncode == 0 and r.stdout.startswith(f"healthy: 127.0.0.1:{server.port} "), r.stdout
    config = tmp_path / "groupd.yaml"
    config.write_text(f"listeners: PLAINTEXT://0.0.0.0:{server.port}\n")
    r = groupd("groups", "list", "--config", str(config))
    assert r.returncode == 0 and r.stdout.splitlines()[0].split() == ["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"], r
    r = groupd("groups", "list", "--set", "listenrs=PLAINTEXT://127.0.0.1:1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("groupd: configuration error: unknown setting 'listenrs' given to --set (did you mean "
                        "listeners?); `groupd config show` lists the keys\n")


def test_bootstrap_server_is_an_alias_of_bootstrap(server):
    r = groupd("groups", "list", "--bootstrap-server", server.bootstrap, "--json")
    assert r.returncode == 0 and isinstance(json.loads(r.stdout), list), r.stderr


def test_default_bootstrap_is_the_first_plaintext_listener():
    """The commands speak neither TLS nor SASL: the PLAINTEXT listener, wherever it is listed."""
    env = {"GROUPD_LISTENERS": "EXTERNAL://0.0.0.0:9093,INTERNAL://0.0.0.0:9092",
           "GROUPD_LISTENER_SECURITY_PROTOCOL_MAP": "EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT"}
    assert bootstrap_of(env=env) == "127.0.0.1:9092"
    assert bootstrap_of(env={"GROUPD_LISTENERS": "SSL://0.0.0.0:9093,PLAINTEXT://0.0.0.0:9092"}) == "127.0.0.1:9092"


def test_split_bootstrap():
    assert split_bootstrap("groupd:9092") == ("groupd", 9092)
    assert split_bootstrap("[::1]:9092") == ("::1", 9092)
    assert split_bootstrap("PLAINTEXT://127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert split_bootstrap("a:1,b:2") == ("a", 1)
    with pytest.raises(AdminError):
        split_bootstrap("no-port")


# --- the commands of kafka-consumer-groups, against groups of real clients ---------------------------

def commit_offsets(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit as an application does: a confluent-kafka (librdkafka) consumer of `group` that
    commits without joining."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def test_list_filters_by_state_and_type(server, members):
    b = ["--bootstrap", server.bootstrap]
    commit_offsets(server.bootstrap, "idle", {("t4", 0): 1})
    clients = [members(server.bootstrap, "busy", "busy-a")]
    wait_until(lambda: balanced(clients), 60, "one member owning t4")
    wait_until(lambda: state(server.bootstrap, "busy") == "Stable", 30, "a Stable group")

    def listed(*flags: str) -> set[str]:
        return {g["group"] for g in groupd_json("groups", "list", *flags, *b)}
    assert {"idle", "busy"} <= listed()
    stable, empty = listed("--state", "stable"), listed("--state", "Empty")
    assert "busy" in stable and "idle" not in stable and "idle" in empty and "busy" not in empty
    assert {"idle", "busy"} <= listed("--state", "Empty,Stable") == listed("--state", "Empty", "--state", "Stable")
    assert {"idle", "busy"} <= listed("--type", "classic") and listed("--type", "consumer").isdisjoint({"idle", "busy"})
    bad = groupd("groups", "list", "--state", "Stabel", *b)
    assert bad.returncode == 2 and "Stabel: not a group state (one of Empty, PreparingRebalance" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_describe_several_groups_or_all_of_them(server):
    b = ["--bootstrap", server.bootstrap]
    commit_offsets(server.bootstrap, "several-1", {("t4", 0): 0})
    commit_offsets(server.bootstrap, "several-2", {("t4", 1): 0, ("t4", 2): 0})
    both = groupd_json("groups", "describe", "several-1", "several-2", *b)
    assert [(d["group"], d["state"], [(o["topic"], o["partition"], o["offset"], o["lag"]) for o in d["offsets"]])
            for d in both] == [("several-1", "Empty", [("t4", 0, 0, 0)]),
                               ("several-2", "Empty", [("t4", 1, 0, 0), ("t4", 2, 0, 0)])]
    every = {d["group"]: d for d in groupd_json("groups", "describe", "--all-groups", *b)}
    assert set(every) == {g["group"] for g in groupd_json("groups", "list", *b)}
    assert [every[g] for g in ("several-1", "several-2")] == both
    # an unknown group among several: the others are described, it gets one line, the exit is 1
    r = groupd("groups", "describe", "several-1", "never-seen", *b)
    assert r.returncode == 1 and r.stdout.startswith("group several-1: Empty")
    assert r.stderr == "groupd: group 'never-seen' does not exist\n"
    assert groupd("groups", "describe", *b).returncode == 2  # a group or --all-groups


def test_groups_delete_removes_empty_groups_and_refuses_live_ones(server, members):
    b = ["--bootstrap", server.bootstrap]
    commit_offsets(server.bootstrap, "doomed-1", {("t4", 0): 4})
    commit_offsets(server.bootstrap, "doomed-2", {("t4", 1): 4})
    r = groupd("groups", "delete", "doomed-1", "doomed-2", *b)
    assert (r.returncode, r.stdout, r.stderr) == (0, "deleted groups 'doomed-1', 'doomed-2'\n", "")
    assert committed(server.bootstrap, "doomed-1") == {} and committed(server.bootstrap, "doomed-2") == {}
    assert groupd("groups", "describe", "doomed-1", *b).stderr == "groupd: group 'doomed-1' does not exist\n"

    clients = [members(server.bootstrap, "alive", "alive-a")]
    wait_until(lambda: balanced(clients), 60, "one member owning t4")
    r = groupd("groups", "delete", "alive", "never-seen", *b)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "groupd: group 'alive' could not be deleted: NON_EMPTY_GROUP (it has members; stop them first)",
        "groupd: group 'never-seen' could not be deleted: GROUP_ID_NOT_FOUND"]
    assert state(server.bootstrap, "alive") == "Stable"


def test_offsets_delete_removes_the_named_partitions_only(server, members):
    b = ["--bootstrap", server.bootstrap]
    commit_offsets(server.bootstrap, "pruned", {("t4", p): 10 + p for p in range(4)})
    r = groupd("offsets", "delete", "pruned", "--topic", "t4:0,2", *b)
    assert r.returncode == 0, r.stderr
    assert [line.split() for line in r.stdout.splitlines()] == [
        ["TOPIC", "PARTITION", "STATUS"], ["t4", "0", "Successful"], ["t4", "2", "Successful"]]
    assert committed(server.bootstrap, "pruned") == {"t4-1": (11, ""), "t4-3": (13, "")}
    r = groupd_json("offsets", "delete", "pruned", "--topic", "t4", *b)
    assert r["error"] is None and [p["error"] for p in r["partitions"]] == [None] * 4
    assert committed(server.bootstrap, "pruned") == {}

    clients = [members(server.bootstrap, "subscribed", "sub-a")]
    wait_until(lambda: balanced(clients), 60, "one member owning t4")
    # a live group keeps the offsets of topics it consumes (Kafka: a partition-level error)
    r = groupd("offsets", "delete", "subscribed", "--topic", "t4:0,1", *b)
    assert r.returncode == 1 and r.stderr == "groupd: some offsets of group 'subscribed' were not deleted\n"
    assert [line.split() for line in r.stdout.splitlines()] == [
        ["TOPIC", "PARTITION", "STATUS"], ["t4", "0", "Error:", "GROUP_SUBSCRIBED_TO_TOPIC"],
        ["t4", "1", "Error:", "GROUP_SUBSCRIBED_TO_TOPIC"]]
    r = groupd("offsets", "delete", "never-seen", "--topic", "t4", *b)
    assert (r.returncode, r.stderr) == (1, "groupd: cannot delete the offsets of group 'never-seen': "
                                           "GROUP_ID_NOT_FOUND (no such group)\n")
    r = groupd("offsets", "delete", "pruned", "--topic", "no-such-topic", *b)
    assert (r.returncode, r.stderr) == (1, "groupd: topic 'no-such-topic': UNKNOWN_TOPIC_OR_PARTITION\n")


def test_reset_scopes_and_scenarios_without_records(server):
    """records.plane=none: every partition's earliest and latest offsets are 0."""
    b = ["--bootstrap", server.bootstrap]
    commit_offsets(server.bootstrap, "scoped", {("t4", 0): 7, ("t4", 1): 8})

    def plan(*flags: str) -> dict[str, int]:
        r = groupd_json("offsets", "reset", "scoped", *flags, *b)
        return {f"{o['topic']}-{o['partition']}": o["offset"] for o in r["offsets"]}
    assert plan("--all-topics", "--to-current") == {"t4-0": 7, "t4-1": 8}
    # a partition without a commit gets the log-end offset, as Kafka's tool
    assert plan("--topic", "t4:1,3", "--to-current") == {"t4-1": 8, "t4-3": 0}
    assert plan("--topic", "t4", "--to-latest") == {f"t4-{p}": 0 for p in range(4)}
    assert plan("--topic", "t4:0", "--to-offset", "42") == {"t4-0": 42}  # as given: the records may live elsewhere
    r = groupd("offsets", "reset", "scoped", "--all-topics", "--shift-by", "-2", *b)
    assert r.returncode == 0
    assert [line.split() for line in r.stdout.splitlines()[:3]] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["scoped", "t4", "0", "0"], ["scoped", "t4", "1", "0"]]
    assert r.stderr.splitlines() == [
        "groupd: warning: New offset (5) is higher than latest offset for topic partition t4-0. Value will be set to 0",
        "groupd: warning: New offset (6) is higher than latest offset for topic partition t4-1. Value will be set to 0"]
    r = groupd("offsets", "reset", "scoped", "--topic", "t4:2", "--shift-by", "1", *b)
    assert (r.returncode, r.stderr) == (1, "groupd: cannot shift the offset of t4-2: no committed offset\n")
    r = groupd("offsets", "reset", "scoped", "--topic", "t4:9", "--to-earliest", *b)
    assert (r.returncode, r.stderr) == (1, "groupd: ListOffsets: unknown partition t4-9\n")
    assert committed(server.bootstrap, "scoped") == {"t4-0": (7, ""), "t4-1": (8, "")}  # all dry runs


def test_reset_export_then_from_file_round_trips(server, tmp_path):
    b = ["--bootstrap", server.bootstrap]
    commit_offsets(server.bootstrap, "exported", {("t4", p): 20 + p for p in range(4)})
    r = groupd("offsets", "reset", "exported", "--all-topics", "--to-current", "--export", *b)
    assert r.returncode == 0 and r.stdout == "".join(f"t4,{p},{20 + p}\n" for p in range(4))
    plan = tmp_path / "plan.csv"
    plan.write_text(r.stdout)
    groupd("groups", "delete", "exported", *b)
    assert committed(server.bootstrap, "exported") == {}
    r = groupd("offsets", "reset", "exported", "--from-file", str(plan), "--execute", *b)
    assert r.returncode == 0, r.stderr
    assert committed(server.bootstrap, "exported") == {f"t4-{p}": (20 + p, "") for p in range(4)}
    r = groupd("offsets", "reset", "exported", "--from-file", str(tmp_path / "missing.csv"), *b)
    assert (r.returncode, r.stderr) == (1, f"groupd: cannot read --from-file {tmp_path / 'missing.csv'}: No such file or directory\n")
    r = groupd("offsets", "reset", "exported", "--to-earliest", *b)  # a usage mistake: 2, as the README says
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", "groupd offsets reset: one of the reset scopes is needed: --topic T[:P,...] or --all-topics "
               "(see groupd offsets reset --help)\n")


plane = groupd_fixture("topics=r3:3", "records.plane=memory", name="plane")


def produce(bootstrap: str, topic: str, partition: int, timestamps: list[int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for ts in timestamps:
        producer.produce(topic, value=b"v", partition=partition, timestamp=ts)
    producer.flush(30)
    assert len(producer) == 0


def test_reset_by_time_and_shift_use_the_records_plane(plane):
    """Ten records in r3-0 an hour apart, ending an hour ago; r3-1 holds none."""
    b = ["--bootstrap", plane.bootstrap]
    now_ms = int(time.time() * 1000)
    hour = 3_600_000
    stamps = [now_ms - (10 - i) * hour for i in range(10)]
    produce(plane.bootstrap, "r3", 0, stamps)
    commit_offsets(plane.bootstrap, "timed", {("r3", 0): 4, ("r3", 1): 0})

    def plan(*flags: str) -> dict[str, int]:
        r = groupd("offsets", "reset", "timed", *flags, "--json", *b)
        assert r.returncode == 0, r.stderr
        return {f"{o['topic']}-{o['partition']}": o["offset"] for o in json.loads(r.stdout)["offsets"]}
    assert plan("--topic", "r3:0", "--to-latest") == {"r3-0": 10}
    # the first record at or after the time (ListOffsets with a timestamp)
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((stamps[6] - 1000) / 1000)) + "Z"
    assert plan("--topic", "r3:0", "--to-datetime", at) == {"r3-0": 6}
    assert plan("--topic", "r3:0", "--by-duration", "PT3H30M") == {"r3-0": 7}  # records 7..9 are newer
    # an empty partition falls back to its log-end offset, with Kafka's warning
    r = groupd("offsets", "reset", "timed", "--topic", "r3:1", "--by-duration", "P1D", *b)
    assert r.returncode == 0 and "Partition 1 from topic r3 is empty. Falling back to latest known offset." in r.stderr
    # shift clamps to [earliest, latest]
    assert plan("--topic", "r3:0", "--shift-by", "3") == {"r3-0": 7}
    assert plan("--topic", "r3:0", "--shift-by", "100") == {"r3-0": 10}
    assert plan("--topic", "r3:0", "--shift-by", "-100") == {"r3-0": 0}
    # describe: the log-end offset from ListOffsets and a real lag
    d = groupd_json("groups", "describe", "timed", *b)
    assert [(o["partition"], o["offset"], o["log_end_offset"], o["lag"]) for o in d["offsets"]] == [(0, 4, 10, 6), (1, 0, 0, 0)]
    text = groupd("groups", "describe", "timed", *b).stdout
    assert re.search(r"^r3 +0 +4 +10 +6 +- +- +-$", text, re.M) and LAG_FOOTNOTE not in text


def test_a_consumer_protocol_group_describes_epochs_and_current_vs_target_assignment(server):
    """KIP-848: ConsumerGroupDescribe gives the type, the group and assignment epochs and each
    member's current and target assignment; the log holds the consumer-group records."""
    b = ["--bootstrap", server.bootstrap]
    c = ClientProcess("confluent", "subscribe", server.bootstrap, {
        "topic": "t4", "group": "kip848", "seconds": 0, "group.protocol": "consumer", "client.id": "new-protocol"})
    try:
        wait_until(lambda: set(c.assignment() or ()) == T4, 60, "the member owning t4")
        wait_until(lambda: groupd_json("groups", "describe", "kip848", *b)["state"] == "Stable", 30, "Stable")
        d = groupd_json("groups", "describe", "kip848", *b)
        assert (d["type"], d["protocol_type"], d["protocol"]) == ("consumer", "consumer", "uniform")
        (m,) = d["members"]
        assert m["client_id"] == "new-protocol" and m["assignment"] == m["target_assignment"] == {"t4": [0, 1, 2, 3]}
        assert m["member_epoch"] == d["assignment_epoch"] == d["group_epoch"] >= 1
        assert {"group": "kip848", "state": "Stable", "protocol_type": "consumer", "type": "consumer"} in \
            groupd_json("groups", "list", "--type", "consumer", *b)
        text = groupd("groups", "describe", "kip848", *b).stdout
        assert text.startswith(f"group kip848: consumer group Stable, group epoch {d['group_epoch']}, assignment epoch "
                               f"{d['assignment_epoch']}, assignor uniform, 1 member")
        assert re.search(rf"^{re.escape(m['member_id'])} +new-protocol .* {m['member_epoch']} +t4:0,1,2,3 +t4:0,1,2,3$",
                         text, re.M), text

        dumped = log_dump(server.data_dir, "kip848")
        types = {r["type"] for r in dumped}
        assert {"consumer_group_metadata", "consumer_group_member_metadata", "consumer_group_target_assignment_member",
                "consumer_group_current_member_assignment"} <= types, types
        assert all(r["group"] == "kip848" for r in dumped)
        member = next(r for r in dumped if r["type"] == "consumer_group_member_metadata" and not r["tombstone"])
        assert (member["member_id"], member["value"]["client_id"], member["value"]["subscribed_topic_names"]) == (
            m["member_id"], "new-protocol", ["t4"])
        current = [r for r in dumped if r["type"] == "consumer_group_current_member_assignment"][-1]["value"]
        assert [sorted(tp["partitions"]) for tp in current["assigned_partitions"]] == [[0, 1, 2, 3]]
    finally:
        c.close(timeout=20)


def log_dump(data_dir: str, group: str) -> list[dict]:
    r = groupd("log", "dump", "--data-dir", data_dir, "--group", group)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_log_dump_of_one_group_decodes_its_subscriptions_and_assignments(server, members):
    clients = [members(server.bootstrap, "dumped", "dump-a"), members(server.bootstrap, "dumped", "dump-b")]
    wait_until(lambda: balanced(clients), 60, "two members sharing t4")
    commit_offsets(server.bootstrap, "dumped-too", {("t4", 0): 1})
    records = log_dump(server.data_dir, "dumped")
    assert records and {r["group"] for r in records} == {"dumped"}
    assert {r["type"] for r in records} == {"group_metadata"}
    last = [r for r in records if r["members"]][-1]
    assert sorted(m["client_id"] for m in last["members"]) == ["dump-a", "dump-b"]
    for m in last["members"]:  # ConsumerProtocol bytes decoded: topics, partitions, user data size
        assert m["subscription"]["topics"] == ["t4"] and m["subscription"]["user_data_bytes"] in (None, 0)
        assert set(m["assignment"]) == {"partitions", "user_data_bytes"}
    assert sorted(p for m in last["members"] for p in m["assignment"]["partitions"]["t4"]) == [0, 1, 2, 3]
    assert [(r["type"], r["topic"], r["partition"], r["offset"]) for r in log_dump(server.data_dir, "dumped-too")] == [
        ("offset_commit", "t4", 0, 1)]


@pytest.mark.parametrize("plane", ["memory", "disk"])
def test_describe_after_a_restart_shows_no_lag_past_the_log_end(tmp_path, plane):
    """After a restart no committed offset lies past a log end (issue 22): the disk plane keeps the
    records, the memory plane resumes each partition, empty, at its last log end."""
    s = GroupdProcess(str(tmp_path), "topics=r3:3", f"records.plane={plane}").start()
    try:
        produce(s.bootstrap, "r3", 0, [int(time.time() * 1000)] * 5)
        commit_offsets(s.bootstrap, "restarted", {("r3", 0): 5})
        assert s.stop() == 0, s.log()
        s.start()
        r = groupd("groups", "describe", "restarted", "--bootstrap", s.bootstrap)
        assert r.returncode == 0, r.stderr
        assert re.search(r"^r3 +0 +5 +5 +0 ", r.stdout, re.M), r.stdout
        assert LAG_FOOTNOTE not in r.stdout
    finally:
        assert s.stop() == 0, s.log()
