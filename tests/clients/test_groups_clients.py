"""Consumer groups of real clients against the real server process (issue 3's scenarios), each on
every stack that supports it. Clients run as child processes (tests/support/harness.py)."""

from __future__ import annotations

import datetime
import re
import time

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.harness import ClientProcess, wait_until
from tests.support.process import WireClient, groupd_fixture

pytestmark = pytest.mark.clients

ALL = ["confluent", "kafka-python", "aiokafka", "java", "kafkajs", "platformatic"]
STATIC = ["confluent", "kafka-python", "aiokafka", "java", "platformatic"]
SIX = {f"t6-{p}" for p in range(6)}


server = groupd_fixture("topics=t6:6", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")


def group_name(request) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", request.node.name)


def balanced(members: list[ClientProcess], partitions: set[str]) -> bool:
    """Every member has a non-empty assignment; together they cover `partitions` exactly once."""
    assignments = [m.assignment() for m in members]
    if any(not a for a in assignments):
        return False
    flat = [p for a in assignments for p in a]
    return len(flat) == len(set(flat)) and set(flat) == partitions


def describe(bootstrap: str, group: str):
    with WireClient(bootstrap) as c:
        return c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]


def subscribe_opts(stack: str, group: str, **extra) -> dict:
    # KafkaJS heartbeats only between fetches: keep them short (librdkafka names the key differently)
    wait_key = "fetch.wait.max.ms" if stack == "confluent" else "fetch.max.wait.ms"
    opts = {"topic": "t6", "group": group, "seconds": 0, "session.ms": 6000, "heartbeat.interval.ms": 500,
            wait_key: 500}
    opts.update(extra)
    return opts


# --- 1. three consumers, one generation (with the default initial delay) -----------------------

delayed_server = groupd_fixture("topics=t6:6", name="delayed_server")  # default 3 s initial rebalance delay


@pytest.mark.parametrize("stack", ALL)
def test_three_consumers_share_six_partitions_in_one_generation(delayed_server, clients, stack, request):
    group = group_name(request)
    members = [clients(stack, "subscribe", delayed_server.bootstrap, **subscribe_opts(stack, group))
               for _ in range(3)]
    wait_until(lambda: balanced(members, SIX), 90, "a complete, disjoint assignment")
    assert all(not m.errors() for m in members), [m.errors() for m in members]
    log = delayed_server.log()
    assert log.count(f"join phase completed group={group} ") == 1, "the initial delay gathers all three"
    assert f"join phase completed group={group} generation=1 " in log
    d = describe(delayed_server.bootstrap, group)
    assert (d.group_state, len(d.members)) == ("Stable", 3)


@pytest.mark.parametrize("stack", ["sarama"])
def test_debian_sarama_1_22_joins_with_join_group_v1(server, clients, stack, request):
    """JoinGroup v1 and no ApiVersions: MEMBER_ID_REQUIRED must not be sent below v4."""
    group = group_name(request)
    members = [clients(stack, "subscribe", server.bootstrap, topic="t6", group=group) for _ in range(2)]
    wait_until(lambda: balanced(members, SIX), 90, "two sarama members share the topic")
    assert all(not m.errors() for m in members), [m.errors() for m in members]


def test_kcat_balanced_consumers_on_librdkafka_2_0_2_share_the_topic(server, request):
    group = group_name(request)
    latest: list[set | None] = [None, None]
    procs = []

    def watch(i, proc):
        for line in proc.stderr:
            found = re.search(r"rebalanced .*: (assigned|revoked): (.*)", line)
            if found:
                parts = set(re.findall(r"(\S+) \[(\d+)\]", found.group(2)))
                latest[i] = {f"{t}-{p}" for t, p in parts} if found.group(1) == "assigned" else set()

    import subprocess
    import threading
    try:
        for i in range(2):
            proc = subprocess.Popen(["kcat", "-b", server.bootstrap, "-G", group, "t6", "-o", "beginning",
                                     "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            procs.append(proc)
            threading.Thread(target=watch, args=(i, proc), daemon=True).start()
        wait_until(lambda: all(latest) and not (latest[0] & latest[1]) and latest[0] | latest[1] == SIX,
                   60, "two kcat members share the topic")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(20)


# --- 2. a consumer closes: the others take over --------------------------------------------------

@pytest.mark.parametrize("stack", ALL)
def test_closed_consumer_partitions_move_to_the_others(server, clients, stack, request):
    group = group_name(request)
    members = [clients(stack, "subscribe", server.bootstrap, **subscribe_opts(stack, group)) for _ in range(3)]
    wait_until(lambda: balanced(members, SIX), 90, "three-way assignment")
    assert members[0].close() == 0, (members[0].errors(), members[0].stderr_tail())
    wait_until(lambda: balanced(members[1:], SIX), 60, "two-way assignment after a close")
    assert "members left group=" + group in server.log()


# --- 3. a consumer is killed: its session expires -----------------------------------------------

@pytest.mark.parametrize("stack", ALL)
def test_killed_consumer_expires_and_its_partitions_move(server, clients, stack, request):
    group = group_name(request)
    members = [clients(stack, "subscribe", server.bootstrap, **subscribe_opts(stack, group, **{"session.ms": 3000}))
               for _ in range(3)]
    wait_until(lambda: balanced(members, SIX), 90, "three-way assignment")
    members[0].kill()
    wait_until(lambda: balanced(members[1:], SIX), 60, "two-way assignment after session expiry")
    assert re.search(f"member expired group={re.escape(group)} .*reason=session-timeout", server.log())


# --- 4. static membership ---------------------------------------------------------------------

@pytest.mark.parametrize("stack", STATIC)
def test_static_member_restart_keeps_partitions_without_rebalance(server, clients, stack, request):
    group = group_name(request)
    opts = subscribe_opts(stack, group, **{"session.ms": 20000})
    a = clients(stack, "subscribe", server.bootstrap, instance="a", **opts)
    b = clients(stack, "subscribe", server.bootstrap, instance="b", **opts)
    wait_until(lambda: balanced([a, b], SIX), 90, "two static members assigned")
    before = a.assignment()
    time.sleep(1)  # let the group settle (e.g. a leader's metadata re-join)
    completed = server.log().count(f"join phase completed group={group} ")
    a.kill()  # a static member does not leave; its replacement takes over its identity
    a2 = clients(stack, "subscribe", server.bootstrap, instance="a", **opts)
    wait_until(lambda: a2.assignment() is not None, 60, "restarted member assigned")
    assert a2.assignment() == before
    assert b.assignment() and set(b.assignment()) == SIX - set(before)
    assert server.log().count(f"join phase completed group={group} ") == completed, "no rebalance"
    assert f"static member replaced group={group} instance=a" in server.log()


# aiokafka sends Heartbeat v1, which carries no group.instance.id: Kafka answers the replaced
# member UNKNOWN_MEMBER_ID there (not FENCED_INSTANCE_ID), and aiokafka re-joins; so it is not in this list.
@pytest.mark.parametrize("stack", ["confluent", "kafka-python", "java", "platformatic"])
def test_second_process_with_same_instance_id_fences_the_first(server, clients, stack, request):
    group = group_name(request)
    opts = subscribe_opts(stack, group, **{"session.ms": 20000})
    first = clients(stack, "subscribe", server.bootstrap, instance="dup", **opts)
    first.wait_for(lambda e: e["event"] == "assigned", 60)
    second = clients(stack, "subscribe", server.bootstrap, instance="dup", **opts)
    second.wait_for(lambda e: e["event"] == "assigned", 60)
    fenced = first.wait_for(lambda e: e["event"] == "error" and re.search(
        r"fenced|errorCode=82|apiCode=82|FENCED_INSTANCE_ID", e["type"] + e["message"], re.I), 60)
    assert fenced


# --- 5. cooperative-sticky: only moved partitions are revoked ----------------------------------

@pytest.mark.parametrize("stack", ["confluent", "kafka-python", "java"])
def test_cooperative_sticky_revokes_only_what_moves(server, clients, stack, request):
    group = group_name(request)
    opts = subscribe_opts(stack, group, assignor="cooperative-sticky")
    a = clients(stack, "subscribe", server.bootstrap, **opts)
    wait_until(lambda: a.assignment() == sorted(SIX), 60, "first member owns everything")
    b = clients(stack, "subscribe", server.bootstrap, **opts)
    wait_until(lambda: balanced([a, b], SIX) and len(a.assignment()) == 3, 90, "cooperative hand-over")
    revoked = [p for e in a.events if e["event"] == "revoked" for p in e["partitions"]]
    assert sorted(revoked) == sorted(b.assignment()), "only the partitions that moved were revoked"
    assert describe(server.bootstrap, group).protocol_data == "cooperative-sticky"


# --- 6. assignors ---------------------------------------------------------------------------------

ASSIGNORS = [("confluent", "range"), ("confluent", "roundrobin"), ("kafka-python", "range"),
             ("kafka-python", "roundrobin"), ("kafka-python", "sticky"), ("aiokafka", "roundrobin"),
             ("java", "range"), ("java", "roundrobin"), ("java", "sticky")]


@pytest.mark.parametrize("stack, assignor", ASSIGNORS)
def test_assignor_produces_its_assignment(server, clients, stack, assignor, request):
    group = group_name(request)
    members = [clients(stack, "subscribe", server.bootstrap, **subscribe_opts(stack, group, assignor=assignor))
               for _ in range(2)]
    try:
        wait_until(lambda: balanced(members, SIX), 90, "two-way assignment")
    except AssertionError:  # say what the group went through: this has timed out under heavy load
        history = [line for line in server.log().splitlines() if group in line][-40:]
        raise AssertionError("timed out waiting for two-way assignment; assignments "
                             f"{[m.assignment() for m in members]}; the group's log:\n" + "\n".join(history))
    time.sleep(1)
    d = describe(server.bootstrap, group)
    assert d.protocol_data == assignor
    # both assignors order members by member id
    by_id = sorted(d.members, key=lambda m: m.member_id)
    numbers = {m.member_id: sorted(int(p.rsplit("-", 1)[1]) for p in c.assignment())
               for c in members for m in d.members if _member_of(c, m.member_id)}
    parts = [numbers[m.member_id] for m in by_id]
    if assignor == "range":
        assert parts == [[0, 1, 2], [3, 4, 5]]
    elif assignor == "roundrobin":
        assert parts == [[0, 2, 4], [1, 3, 5]]
    else:
        assert sorted(map(len, parts)) == [3, 3]


def _member_of(client: ClientProcess, member_id: str) -> bool:
    return any(e.get("member_id") == member_id for e in client.events if e["event"] == "assigned")


# --- 7. commits --------------------------------------------------------------------------------------

# What each client actually puts on the wire as commit metadata: confluent-kafka sends the C
# string's terminating NUL with it, and the Node clients cannot send any. groupd stores the bytes.
SENT_METADATA = {"confluent": "m-confluent\x00", "kafkajs": "", "platformatic": ""}


@pytest.mark.parametrize("committer", ALL)
def test_committed_offset_and_metadata_are_read_back_by_another_client(server, clients, committer, request):
    group = group_name(request)
    c = clients(committer, "commit", server.bootstrap, group=group, topic="t6", partition=4, offset=42,
                metadata="m-" + committer)
    assert c.wait() == 0, c.events
    # confluent-kafka reads metadata as a C string, so the reader is kafka-python (or aiokafka for it)
    reader = "aiokafka" if committer == "kafka-python" else "kafka-python"
    f = clients(reader, "fetch", server.bootstrap, group=group, topic="t6")
    assert f.wait() == 0, f.events
    offsets = f.wait_for(lambda e: e["event"] == "offsets")["offsets"]
    assert offsets == {"t6-4": {"offset": 42, "metadata": SENT_METADATA.get(committer, "m-" + committer)}}


def test_commit_metadata_is_stored_byte_exact(server):
    """Metadata with a NUL inside survives the round trip (librdkafka test 0099 checks the same)."""
    with WireClient(server.bootstrap) as w:
        commit = w.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "nul-meta", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t6", "partitions": [{"partition_index": 1, "committed_offset": 7,
                                                      "committed_leader_epoch": 3, "committed_metadata": "a\x00b"}]}]})
        assert commit.topics[0].partitions[0].error_code is ErrorCode.none
        fetched = w.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "nul-meta", "topics": None}],
                                                     "require_stable": True})
    (p,) = fetched.groups[0].topics[0].partitions
    assert (p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata) == (1, 7, 3, "a\x00b")


def test_offset_fetch_of_an_unknown_group_is_empty_not_an_error(server, clients):
    f = clients("confluent", "fetch", server.bootstrap, group="never-seen", topic="t6")
    assert f.wait() == 0, f.events
    assert f.wait_for(lambda e: e["event"] == "offsets")["offsets"] == {}


# --- 8. group administration through admin clients -------------------------------------------

def test_admin_clients_describe_list_and_delete_groups(server, clients, request):
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    group = group_name(request)
    live = clients("confluent", "subscribe", server.bootstrap, **subscribe_opts("confluent", group))
    wait_until(lambda: live.assignment() == sorted(SIX), 60, "member assigned")
    idle = group + "-idle"
    assert clients("confluent", "commit", server.bootstrap, group=idle, topic="t6", partition=0, offset=1).wait() == 0

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(10)
    assert described.state == ConsumerGroupState.STABLE
    assert described.partition_assignor == "range"
    assert [sorted(f"{tp.topic}-{tp.partition}" for tp in m.assignment.topic_partitions)
            for m in described.members] == [sorted(SIX)]
    listed = {g.group_id: g.state for g in admin.list_consumer_groups().result(10).valid}
    assert listed[group] == ConsumerGroupState.STABLE and listed[idle] == ConsumerGroupState.EMPTY

    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        kd = kp.describe_groups([group])[group]
        assert (kd["group_state"], kd["protocol_data"], len(kd["members"])) == ("Stable", "range", 1)
        assert {g["group_id"] for g in kp.list_groups()} >= {group, idle}
        assert kp.delete_groups([idle, group, "no-such-group"]) == {
            idle: "OK", group: "NonEmptyGroupError", "no-such-group": "GroupIdNotFoundError"}
    finally:
        kp.close()
    listed = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert idle not in listed and group in listed


# --- 9. partitions added to the subscribed topic --------------------------------------------

# kafka-python's rounds end 300 ms after the leader's assignment, as on a loaded machine: the
# leader's re-join for the new partitions must still be collected (kafka-python 3.0.12 can lose it;
# tests/clients/python/client_tool.py works around that).
GROW_OPTS = {"confluent": {"topic.metadata.refresh.interval.ms": 500},
             "kafka-python": {"metadata.max.age.ms": 500, "leader_round_delay_ms": 300}}


# @platformatic/kafka 1.35 never re-joins when a subscribed topic grows (no metadata watch in its
# consumer), against Kafka as against groupd, so it is not in this list.
@pytest.mark.parametrize("stack", ["confluent", "kafka-python", "aiokafka", "java", "kafkajs"])
def test_added_partitions_are_rebalanced_onto_the_group(server, clients, stack, request):
    group = group_name(request)
    topic = f"grow-{stack}"
    with WireClient(server.bootstrap) as w:
        w.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1,
                                                        "assignments": [], "configs": []}],
                                            "timeout": datetime.timedelta(seconds=5),
                                            "validate_only": False})
    opts = {"topic": topic, "group": group, "seconds": 0, "session.ms": 6000, **GROW_OPTS.get(stack, {"metadata.max.age.ms": 500})}
    members = [clients(stack, "subscribe", server.bootstrap, **opts) for _ in range(2)]
    wait_until(lambda: balanced(members, {f"{topic}-0", f"{topic}-1"}), 90, "two partitions assigned")
    with WireClient(server.bootstrap) as w:
        r = w.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": topic, "count": 4, "assignments": None}],
                                                    "timeout": datetime.timedelta(seconds=5),
                                                    "validate_only": False})
        assert r.results[0].error_code is ErrorCode.none
    wait_until(lambda: balanced(members, {f"{topic}-{p}" for p in range(4)}), 90, "four partitions assigned")


# --- 10. a non-consumer protocol type electing a leader ------------------------------------

def test_non_consumer_protocol_type_elects_one_leader(server):
    """kafka-python's low-level coordinator with protocol type "sr" (schema-registry style)."""
    import threading

    from kafka.coordinator.base import BaseCoordinator
    from kafka.net.compat import KafkaNetClient

    leaders, errors = [], []

    class Election(BaseCoordinator):
        def __init__(self, name, client):
            super().__init__(client, group_id="sr-election", session_timeout_ms=6000,
                             heartbeat_interval_ms=500, max_poll_interval_ms=30000)
            self.name = name

        def protocol_type(self):
            return "sr"

        def group_protocols(self):
            return [("v0", self.name.encode())]

        def _perform_assignment(self, leader_id, protocol, members):
            metadata = {m.member_id: m.metadata for m in members}
            chosen = sorted(metadata.values())[0]  # the elected node, told to every member
            return {member_id: chosen for member_id in metadata}

        async def _on_join_complete_async(self, generation, member_id, protocol, assignment):
            leaders.append((self.name, bytes(assignment)))

    electors, net_clients = [], []
    for name in ("node-a", "node-b"):
        client = KafkaNetClient(bootstrap_servers=server.bootstrap, client_id=name)
        client._manager.bootstrap(10000)  # what KafkaConsumer does before its coordinator runs
        net_clients.append(client)
        electors.append(Election(name, client))

    def run(e):
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len({n for n, _ in leaders}) < 2:
                e.ensure_active_group(timeout_ms=1000)
                e._client.poll(timeout_ms=100)
        except Exception as ex:  # noqa: BLE001 — reported below
            errors.append(ex)

    threads = [threading.Thread(target=run, args=(e,)) for e in electors]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors, errors
    final = {}
    for name, assignment in leaders:
        final[name] = assignment
    assert set(final) == {"node-a", "node-b"} and set(final.values()) == {b"node-a"}
    d = describe(server.bootstrap, "sr-election")
    assert (d.protocol_type, d.protocol_data, len(d.members)) == ("sr", "v0", 2)
    for e in electors:
        e.close()
    for client in net_clients:
        client.close()  # its threads would otherwise log into later tests of this process
