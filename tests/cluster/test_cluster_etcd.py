"""Cluster mode with a real etcd and two real groupd nodes on one shared data dir: the offsets
partitions spread over both, a killed node's groups move to the survivor with their committed
offsets, and real clients follow (README "Cluster mode")."""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import signal
import time

import pytest

from groupd.coordinator.tools.client import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.etcd_server import EtcdServer, cluster_node, coordinators
from tests.support.harness import wait_until

pytestmark = pytest.mark.clients

PARTITIONS = 8
SETTINGS = (f"offsets.topic.num.partitions={PARTITIONS}", "topics=t:4", "group.initial.rebalance.delay.ms=0")
GROUPS = [f"group-{i}" for i in range(24)]
MINUTE = datetime.timedelta(minutes=1)


@pytest.fixture
def etcd(tmp_path):
    server = EtcdServer(str(tmp_path / "etcd")).start()
    yield server
    server.stop()


def two_nodes(tmp_path, etcd, *settings: str):
    """Nodes 1 and 2 on one data dir, started one after the other; stopped cleanly at the end."""
    data = str(tmp_path / "data")
    started = [cluster_node(data, etcd, 1, *SETTINGS, *settings).start(),
               cluster_node(data, etcd, 2, *SETTINGS, *settings).start()]
    yield started
    for node in started:
        if node.alive():
            assert node.stop() == 0, node.log()


@pytest.fixture
def nodes(tmp_path, etcd):
    yield from two_nodes(tmp_path, etcd)


def spread(nodes, among: set[int] = frozenset({1, 2})) -> dict[str, int]:
    """Every group's coordinator, once every live node names the same ones, all `among` them."""
    def agreed():
        seen = [coordinators(n.bootstrap, GROUPS) for n in nodes if n.alive()]
        if seen and all(s == seen[0] for s in seen) and seen[0] and set(seen[0].values()) == among:
            return seen[0]
        return None
    return wait_until(agreed, 60, "every group has one coordinator that every node names")


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> dict[int, ErrorCode]:
    with AdminConnection(bootstrap, "cluster-test") as c:
        r = c.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time": datetime.timedelta(milliseconds=-1),
            "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": o,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}
                                                    for p, o in offsets.items()]}]})
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def commit_once_loaded(bootstrap: str, group: str, offsets: dict[int, int]) -> dict[int, ErrorCode]:
    """`commit`, retried while the coordinator answers COORDINATOR_LOAD_IN_PROGRESS (a node names its
    partitions in FindCoordinator before it has loaded them), as a client retries; then its answer."""
    def settled():
        answer = commit(bootstrap, group, offsets)
        return None if ErrorCode.coordinator_load_in_progress in answer.values() else answer
    return wait_until(settled, 60, f"the coordinator of {group} loaded its partition")


def fetch(bootstrap: str, group: str):
    """(group error, {partition: offset}) as `bootstrap` answers OffsetFetch v8."""
    with AdminConnection(bootstrap, "cluster-test") as c:
        g = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                                "require_stable": True}).groups[0]
    return g.error_code, {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


def test_groups_spread_over_both_nodes_and_only_the_owner_serves_a_group(nodes):
    owner = spread(nodes)
    assert set(owner.values()) == {1, 2}
    with AdminConnection(nodes[0].bootstrap, "cluster-test") as c:
        meta = c.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
    assert [(b.node_id, b.port) for b in meta.brokers] == [(1, nodes[0].port), (2, nodes[1].port)]
    assert meta.controller_id == 1
    group = GROUPS[0]
    on, off = (nodes[0], nodes[1]) if owner[group] == 1 else (nodes[1], nodes[0])
    assert commit(on.bootstrap, group, {0: 5}) == {0: ErrorCode.none}
    assert commit(off.bootstrap, group, {0: 6}) == {0: ErrorCode.not_coordinator}
    assert fetch(on.bootstrap, group) == (ErrorCode.none, {0: 5})
    assert fetch(off.bootstrap, group)[0] == ErrorCode.not_coordinator


def test_a_killed_nodes_groups_move_to_the_survivor_and_a_real_client_resumes_with_its_offsets(nodes):
    from confluent_kafka import Consumer, TopicPartition

    owner = spread(nodes)
    group = next(g for g in GROUPS if owner[g] == 2)
    committed = {p: 100 + p for p in range(4)}
    c = Consumer({"bootstrap.servers": f"{nodes[0].bootstrap},{nodes[1].bootstrap}", "group.id": group,
                  "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                  "auto.offset.reset": "earliest"})
    try:
        assigned = []
        c.subscribe(["t"], on_assign=lambda consumer, tps: assigned.extend(tps))
        wait_until(lambda: c.poll(0.2) is None and len(assigned) == 4, 60, "confluent-kafka assigned t's 4 partitions")
        result = c.commit(offsets=[TopicPartition("t", p, o) for p, o in committed.items()], asynchronous=False)
        assert all(tp.error is None for tp in result), result

        nodes[1].stop(signal.SIGKILL)
        moved = time.monotonic()
        wait_until(lambda: coordinators(nodes[0].bootstrap, [group]).get(group) == 1, 60,
                   "the survivor coordinates the killed node's group")

        def resumed():
            c.poll(0.1)
            try:
                seen = c.committed([TopicPartition("t", p) for p in range(4)], timeout=5)
            except Exception:  # COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR while the group moves
                return None
            return {tp.partition: tp.offset for tp in seen} == committed
        wait_until(resumed, 60, "confluent-kafka reads its committed offsets from the survivor")
        print(f"group moved and offsets read back after {time.monotonic() - moved:.1f} s")
        result = c.commit(offsets=[TopicPartition("t", p, o + 1) for p, o in committed.items()], asynchronous=False)
        assert all(tp.error is None for tp in result), result
    finally:
        c.close()
    assert fetch(nodes[0].bootstrap, group) == (ErrorCode.none, {p: o + 1 for p, o in committed.items()})
    assert re.search(r"partition claimed partition=\d+ stamp=\d+", nodes[0].log())


def test_two_nodes_with_the_same_node_id_on_one_data_dir_refuse(nodes, etcd, tmp_path):
    twin = cluster_node(str(tmp_path / "data"), etcd, 2, *SETTINGS)
    with pytest.raises(RuntimeError, match=r"\.lock-node-2 is held by pid"):
        twin.start()
    assert os.path.exists(tmp_path / "data" / ".lock-node-1")


def stamped(data: str, partition: int) -> dict[str, int]:
    """Segment file → size, in the partition's directory."""
    directory = os.path.join(data, f"__consumer_offsets-{partition}")
    return {name: os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)}


def test_a_node_cut_off_from_etcd_stops_acknowledging_and_its_partitions_move_to_new_segments(tmp_path, etcd):
    import json

    from groupd.coordinator.core.partitioning import partition_for
    from tests.support.etcd_server import Proxy, etcd_get

    data = str(tmp_path / "data")
    proxy = Proxy(etcd.port)
    nodes = [cluster_node(data, etcd, 1, *SETTINGS).start(), cluster_node(data, proxy, 2, *SETTINGS).start()]
    try:
        owner = spread(nodes)
        group = next(g for g in GROUPS if owner[g] == 2)
        p = partition_for(group, PARTITIONS)
        assert commit_once_loaded(nodes[1].bootstrap, group, {0: 7}) == {0: ErrorCode.none}
        deposed = json.loads(etcd_get(etcd.endpoint, f"/groupd/manifests/{p}"))[-1]

        proxy.cut()
        sent = [7]  # commits go on until the node refuses them; those it acknowledged must survive
        acked = 7

        def refused() -> bool:
            nonlocal acked
            sent.append(sent[-1] + 1)
            error = commit(nodes[1].bootstrap, group, {0: sent[-1]})[0]
            acked = sent[-1] if error == ErrorCode.none else acked
            return error == ErrorCode.not_coordinator
        wait_until(refused, 30, "the cut-off node stops acknowledging")
        assert "cluster fenced node.id=2" in nodes[1].log()
        frozen = stamped(data, p)
        wait_until(lambda: coordinators(nodes[0].bootstrap, [group]).get(group) == 1, 60,
                   "the partition moves to the node that still reaches etcd")
        error, seen = wait_until(lambda: (f := fetch(nodes[0].bootstrap, group))[0] == ErrorCode.none and f, 30,
                                 "the new owner loaded")
        assert acked <= seen[0] <= sent[-1]  # a write answered NOT_COORDINATOR may still have landed
        assert commit(nodes[0].bootstrap, group, {0: 8}) == {0: ErrorCode.none}
        assert commit(nodes[1].bootstrap, group, {0: 667}) == {0: ErrorCode.not_coordinator}

        # the deposed owner's stamp is closed where the new owner started; the new one writes its own file
        manifest = json.loads(etcd_get(etcd.endpoint, f"/groupd/manifests/{p}"))
        assert manifest[-2][0] == deposed[0] and manifest[-2][1] is not None and manifest[-1][1] is None
        after = stamped(data, p)
        assert {n: s for n, s in after.items() if n in frozen} == frozen  # nothing more from the cut-off node
        assert [n for n in after if n not in frozen] == [f"{manifest[-2][1]:020d}-{manifest[-1][0]}.log"]

        proxy.restore()  # back: it registers again and takes back what rendezvous gives it
        owner = spread(nodes)
        at = nodes[owner[group] - 1]
        assert wait_until(lambda: fetch(at.bootstrap, group)[0] == ErrorCode.none and fetch(at.bootstrap, group),
                          30, "the group is served again") == (ErrorCode.none, {0: 8})
    finally:
        for node in nodes:
            if node.alive():
                node.stop()
        proxy.close()


def test_a_crash_loop_across_two_nodes_loses_no_acknowledged_commit(nodes):
    """Each round kills one node (kill -9) while a client commits to a group it coordinates, then
    restarts it; every acknowledged commit is read back after every kill. CLUSTER_CRASH_ROUNDS sets
    the rounds (`make cluster-crash-loop` runs many)."""
    import threading

    rounds = int(os.environ.get("CLUSTER_CRASH_ROUNDS", "2"))
    acked: dict[str, int] = {}
    for i in range(rounds):
        victim = i % 2
        owner = spread(nodes)
        groups = [g for g in GROUPS if owner[g] == victim + 1][:3]
        stop = threading.Event()

        def committer(group: str, start: int) -> None:
            offset = start
            while not stop.is_set():
                offset += 1
                at = coordinators(nodes[1 - victim].bootstrap, [group]).get(group)
                try:
                    if at is not None and commit(nodes[at - 1].bootstrap, group, {0: offset}) == {0: ErrorCode.none}:
                        acked[group] = offset
                except OSError:
                    pass  # the coordinator died mid-request: not acknowledged

        threads = [threading.Thread(target=committer, args=(g, 1000 * i)) for g in groups]
        for t in threads:
            t.start()
        wait_until(lambda: all(g in acked and acked[g] > 1000 * i for g in groups), 30, "commits acknowledged")
        nodes[victim].stop(signal.SIGKILL)
        wait_until(lambda: all(coordinators(nodes[1 - victim].bootstrap, groups).get(g) == 2 - victim
                               for g in groups), 60, "the survivor took the groups")
        stop.set()
        for t in threads:
            t.join(30)
        for group, offset in acked.items():
            error, seen = wait_until(lambda: (f := fetch(nodes[1 - victim].bootstrap, group))[0] == ErrorCode.none
                                     and f, 30, "the survivor serves every group")
            assert seen[0] >= offset, f"round {i}: {group} acknowledged {offset}, read back {seen[0]}"
        nodes[victim].start()
    owner = spread(nodes)
    for group, offset in acked.items():
        error, seen = wait_until(lambda: (f := fetch(nodes[owner[group] - 1].bootstrap, group))[0] == ErrorCode.none
                                 and f, 30, "the owner serves every group")
        assert seen[0] >= offset


def test_every_node_sees_the_same_topic_catalog(nodes, etcd):
    """Topics live in etcd: one created on one node is listed, with its id, by the other."""
    from tests.support.etcd_server import etcd_get

    def topics(bootstrap: str) -> dict:
        with AdminConnection(bootstrap, "cluster-test") as c:
            meta = c.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
        return {t.name: (len(t.partitions), t.topic_id) for t in meta.topics if t.name != "__consumer_offsets"}

    with AdminConnection(nodes[1].bootstrap, "cluster-test") as c:
        r = c.request(ApiKey.CREATE_TOPICS, 5, {"topics": [{"name": "made-on-2", "num_partitions": 3,
                                                            "replication_factor": -1, "assignments": [],
                                                            "configs": []}], "timeout_ms": 5000,
                                                "validate_only": False})
    assert r.topics[0].error_code == ErrorCode.none
    seen = wait_until(lambda: "made-on-2" in (t := topics(nodes[0].bootstrap)) and t, 30,
                      "node 1 lists the topic node 2 created")
    assert seen == topics(nodes[1].bootstrap) and seen["made-on-2"][0] == 3 and seen["t"][0] == 4
    assert b"made-on-2" in etcd_get(etcd.endpoint, "/groupd/topics")
    assert not os.path.exists(os.path.join(nodes[0].data_dir, "topics.json"))


def described_topic(bootstrap: str, topic: str) -> dict[str, str]:
    with AdminConnection(bootstrap, "cluster-test") as c:
        r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": 2, "resource_name": topic, "configuration_keys": ["cleanup.policy", "retention.ms"]}],
            "include_synonyms": False, "include_documentation": False}).results[0]
    return {c.name: c.value for c in r.configs}


def test_topic_configs_live_in_etcd_with_the_catalog(nodes):
    """A topic created with configs on one node, altered on the other: both describe the same."""
    with AdminConnection(nodes[1].bootstrap, "cluster-test") as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
            "name": "compacted", "num_partitions": 1, "replication_factor": -1, "assignments": [],
            "configs": [{"name": "cleanup.policy", "value": "compact"}]}], "timeout_ms": 5000, "validate_only": False})
    assert r.topics[0].error_code == ErrorCode.none
    wait_until(lambda: described_topic(nodes[0].bootstrap, "compacted").get("cleanup.policy") == "compact", 30,
               "node 1 describes the topic node 2 created")
    with AdminConnection(nodes[0].bootstrap, "cluster-test") as c:
        r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": 2, "resource_name": "compacted", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": False})
    assert r.responses[0].error_code == ErrorCode.none
    assert described_topic(nodes[0].bootstrap, "compacted") == {"cleanup.policy": "compact", "retention.ms": "1000"}
    wait_until(lambda: described_topic(nodes[1].bootstrap, "compacted").get("retention.ms") == "1000", 30,
               "node 2 describes node 1's change")


async def test_a_catalog_change_that_loses_the_race_is_applied_on_top_of_the_winner(etcd, tmp_path):
    import aetcd

    from groupd.coordinator.cluster.etcd.catalog import CATALOG_KEY, EtcdCatalog, EtcdDocument

    host, _, port = etcd.endpoint.rpartition(":")
    async with aetcd.Client(host, int(port), timeout=5) as client:
        def document() -> EtcdDocument:
            return EtcdDocument([etcd.endpoint], CATALOG_KEY, 5, client=lambda: client)

        one, two, three = (EtcdCatalog(document(), str(tmp_path)) for _ in range(3))
        one.create("x", 1)  # at start-up: over etcd's JSON gateway
        made_by_one = await one.add("z", 2)  # while serving: through the asyncio client
        assert await two.add("y", 3) is not None  # two had not seen x and z: its swap loses, then applies on top
        assert sorted(t.name for t in two) == ["x", "y", "z"]
        assert await three.add("z", 5) == made_by_one  # both created z: the first one's id and count stay
        assert await one.add("z", 7) is None  # one knows z: nothing written
        value, revision = await document().read()
        one.follow(value, revision)
        assert {t.name: t.partitions for t in one} == {"x": 1, "y": 3, "z": 2}
        assert await two.remove("x") is not None and await three.resize("y", 4) is not None
        one.follow(*await document().read())
        assert {t.name: t.partitions for t in one} == {"y": 4, "z": 2}
        # configs swap like any change; a change of a topic's configs keeps another node's resize of it
        assert await two.reconfigure("z", lambda current: {"cleanup.policy": "compact"}) is not None
        assert await three.resize("z", 6) is not None  # three had not seen two's configs
        one.follow(*await document().read())
        assert (one.get("z").partitions, dict(one.get("z").configs)) == (6, {"cleanup.policy": "compact"})
        assert one.topic_config("z").compact
        assert await one.remove("y") is not None
        # deleted meanwhile: stays deleted
        assert await three.reconfigure("y", lambda current: {"retention.ms": "7"}) is None


def test_acls_scram_credentials_and_group_configs_changed_on_one_node_hold_on_the_other(tmp_path, etcd):
    from tests.support.authz import ANONYMOUS, DENY, GROUP, READ, acl, authorizer_settings, create_acls

    pair = two_nodes(tmp_path, etcd, *authorizer_settings(allow_everyone=True))
    nodes = next(pair)

    def join(bootstrap: str, group: str) -> ErrorCode:
        with AdminConnection(bootstrap, "cluster-test") as c:
            return c.request(ApiKey.JOIN_GROUP, 9, {
                "group_id": group, "session_timeout": MINUTE, "rebalance_timeout": MINUTE, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}], "reason": None}).error_code

    def users(bootstrap: str) -> set[str]:
        with AdminConnection(bootstrap, "cluster-test") as c:
            r = c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
        return {u.user for u in r.results}

    try:
        assert join(nodes[0].bootstrap, "blocked") != ErrorCode.group_authorization_failed
        assert create_acls(nodes[1].bootstrap, acl(GROUP, "blocked", READ, DENY, principal=ANONYMOUS)) == [
            ErrorCode.none]
        wait_until(lambda: join(nodes[0].bootstrap, "blocked") == ErrorCode.group_authorization_failed, 30,
                   "node 1 enforces the ACL created on node 2")
        with AdminConnection(nodes[1].bootstrap, "cluster-test") as c:
            salt = os.urandom(16)
            r = c.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [{
                "name": "alice", "mechanism": 2, "iterations": 4096, "salt": salt,
                "salted_password": hashlib.pbkdf2_hmac("sha512", b"secret", salt, 4096)}]})
        assert [x.error_code for x in r.results] == [ErrorCode.none]
        wait_until(lambda: "alice" in users(nodes[0].bootstrap), 30, "node 1 holds the credential made on node 2")

        with AdminConnection(nodes[1].bootstrap, "cluster-test") as c:
            r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": 32, "resource_name": "tuned", "configs": [
                    {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]}],
                "validate_only": False})
        assert r.responses[0].error_code == ErrorCode.none

        def heartbeat_interval(bootstrap: str) -> str | None:
            with AdminConnection(bootstrap, "cluster-test") as c:
                r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
                    "resource_type": 32, "resource_name": "tuned", "configuration_keys": None}],
                    "include_synonyms": False, "include_documentation": False})
            return {x.name: x.value for x in r.results[0].configs}.get("consumer.heartbeat.interval.ms")
        wait_until(lambda: heartbeat_interval(nodes[0].bootstrap) == "6000", 30,
                   "node 1 holds the group config set on node 2")
        assert not os.path.exists(tmp_path / "data" / "acls.json")
        assert not os.path.exists(tmp_path / "data" / "scram-credentials.json")
        assert not os.path.exists(tmp_path / "data" / "group_configs.json")
    finally:
        next(pair, None)


def test_with_etcd_stopped_no_node_acknowledges_and_both_serve_again_once_it_is_back(nodes, etcd):
    owner = spread(nodes)
    group = GROUPS[0]
    at = nodes[owner[group] - 1]
    assert commit_once_loaded(at.bootstrap, group, {0: 1}) == {0: ErrorCode.none}
    etcd.pause()  # SIGSTOP: no renewal, no claim, for anyone
    try:
        wait_until(lambda: all(commit(nodes[owner[g] - 1].bootstrap, g, {0: 2}) == {0: ErrorCode.not_coordinator}
                               for g in GROUPS), 30, "every node stops acknowledging")
    finally:
        etcd.resume()
    assert all("cluster fenced" in n.log() for n in nodes)
    owner = spread(nodes)
    at = nodes[owner[group] - 1]
    answers = []  # the last answers, and the nodes' logs, say why if it never loads

    def loaded():
        answers[:] = [fetch(at.bootstrap, group), coordinators(at.bootstrap, [group])]
        return answers[0][0] == ErrorCode.none and answers[0]
    error, seen = wait_until(loaded, 60, "loaded again", lambda: f"{answers} " + "".join(
        f"\n--- node {i + 1} ---\n{n.log()[-6000:]}" for i, n in enumerate(nodes)))
    assert seen[0] in (1, 2)  # 1 acknowledged; a 2 answered NOT_COORDINATOR may have landed
    assert commit(at.bootstrap, group, {0: 3}) == {0: ErrorCode.none}


def test_heartbeats_are_answered_while_admin_writes_wait_for_a_stopped_etcd(tmp_path, etcd):
    """CreateAcls and a Metadata auto-create write to etcd. With etcd stopped (SIGSTOP) the node goes on
    answering heartbeats while both wait (an etcd call off the event loop, design.md); each is answered
    once its write times out (or etcd answers), and nothing acknowledged before is lost."""
    import json
    import select

    from groupd.protocol.codec import decode_response
    from tests.support.authz import GROUP, READ, acl, authorizer_settings, create_acls
    from tests.support.etcd_server import etcd_get
    from tests.support.process import WireClient, join_and_sync

    # a longer lease than the other tests' (its quarter bounds each etcd call): the writes wait seconds
    node = cluster_node(str(tmp_path / "data"), etcd, 1, *SETTINGS, *authorizer_settings(allow_everyone=True),
                        "cluster.lease.ms=12000").start()

    def acls_in_etcd() -> set[str]:
        return {row["resource_name"] for row in json.loads(etcd_get(etcd.endpoint, "/groupd/acls.json"))["acls"]}

    def topic(c: WireClient, name: str):
        return c.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": None}],
                                               "allow_auto_topic_creation": True,
                                               "include_topic_authorized_operations": False}).topics[0]

    def joined(c: WireClient):
        try:
            return join_and_sync(c, "g")
        except AssertionError:  # its partition not claimed or loaded yet
            return None

    try:
        bob = {"principal": "User:bob"}  # ACLs that bind nobody the test acts as
        assert create_acls(node.bootstrap, acl(GROUP, "kept", READ, **bob)) == [ErrorCode.none]
        with WireClient(node.bootstrap, timeout=60) as c:
            assert topic(c, "kept-topic").error_code == ErrorCode.none
            member_id, generation = wait_until(lambda: joined(c), 60, "the member joins")
            writes = {}
            etcd.pause()
            try:
                for name, (api, version, body) in {
                        "acl": (ApiKey.CREATE_ACLS, 3, {"creations": [acl(GROUP, "paused", READ, **bob)]}),
                        "topic": (ApiKey.METADATA, 12, {"topics": [{"name": "paused-topic", "topic_id": None}],
                                                        "allow_auto_topic_creation": True,
                                                        "include_topic_authorized_operations": False})}.items():
                    w = WireClient(node.bootstrap, timeout=60)
                    cid, data = w.frame(api, version, body)
                    w.send_raw(data)
                    writes[name] = (w, api, version, cid)
                beats = {name: 0 for name in writes}  # heartbeats answered while each write waited
                answers = {}

                def all_answered() -> bool:
                    c.request(ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": generation,
                                                    "member_id": member_id, "group_instance_id": None})
                    for name, (w, api, version, cid) in writes.items():
                        if name in answers:
                            continue
                        if select.select([w.sock], [], [], 0)[0]:
                            try:
                                got, answers[name] = decode_response(api, version, w.read_frame())
                            except ConnectionError:  # closed instead: the assertions below say so
                                answers[name] = None
                                continue
                            assert got == cid
                        else:
                            beats[name] += 1
                    return len(answers) == len(writes)
                wait_until(all_answered, 120, "both writes are answered")
            finally:
                etcd.resume()
                for w, *_ in writes.values():
                    w.close()
        assert beats["acl"] >= 3 and beats["topic"] >= 3, (beats, answers)
        acl_error = answers["acl"].results[0].error_code
        assert acl_error in (ErrorCode.request_timed_out, ErrorCode.none), answers["acl"]
        assert answers["topic"].topics[0].error_code in (ErrorCode.leader_not_available, ErrorCode.none)

        # nothing acknowledged is lost, and with etcd back the same writes succeed
        assert create_acls(node.bootstrap, acl(GROUP, "after", READ, **bob)) == [ErrorCode.none]
        stored = acls_in_etcd()
        assert {"kept", "after"} <= stored and (acl_error != ErrorCode.none or "paused" in stored)
        with WireClient(node.bootstrap) as c:
            assert wait_until(lambda: topic(c, "paused-topic").error_code == ErrorCode.none, 60,
                              "the auto-create succeeds with etcd back")
            assert topic(c, "kept-topic").error_code == ErrorCode.none
        stored = {t["name"] for t in json.loads(etcd_get(etcd.endpoint, "/groupd/topics"))["topics"]}
        assert {"kept-topic", "paused-topic"} <= stored
    finally:
        assert node.stop() == 0, node.log()


def test_the_owner_compacts_and_after_a_failover_the_other_node_compacts_and_loads_every_offset(tmp_path, etcd):
    """Node 2 commits enough to roll small segments and compacts its partition (a manifest swap);
    killed, node 1 loads it with every offset, commits on, compacts again over node 2's segments and
    its own, and still reads every offset; the segments no manifest counts are gone."""
    import json

    from groupd.coordinator.core.partitioning import partition_for
    from groupd.storage import inspect
    from tests.support.etcd_server import etcd_get

    compacting = ("offsets.topic.segment.bytes=600", "min.cleanable.dirty.ratio=0.2", "log.cleaner.backoff.ms=100",
                  "log.cleaner.delete.retention.ms=0")
    data = str(tmp_path / "data")
    nodes = [cluster_node(data, etcd, n, *SETTINGS, *compacting).start() for n in (1, 2)]
    try:
        owner = spread(nodes)
        group = next(g for g in GROUPS if owner[g] == 2)
        p = partition_for(group, PARTITIONS)
        manifest = lambda: json.loads(etcd_get(etcd.endpoint, f"/groupd/manifests/{p}"))
        claimed = manifest()[-1][0]
        offsets, sent = {}, iter(range(10**6))

        def commit_on(node, rounds: int) -> None:
            for n in range(rounds):
                offsets[n % 4] = next(sent)
                assert commit(node.bootstrap, group, {n % 4: offsets[n % 4]}) == {n % 4: ErrorCode.none}

        commit_on(nodes[1], 40)
        wait_until(lambda: f"compacted partition={p} " in nodes[1].log() and manifest()[0][0] > claimed, 30,
                   "node 2 compacted its partition and swapped the manifest")
        commit_on(nodes[1], 8)
        nodes[1].stop(signal.SIGKILL)
        wait_until(lambda: fetch(nodes[0].bootstrap, group) == (ErrorCode.none, offsets), 60,
                   "node 1 loaded the partition with every offset")
        took = manifest()[-1][0]
        commit_on(nodes[0], 40)
        wait_until(lambda: manifest()[0][0] > took, 30, "node 1 compacted over node 2's segments and its own")
        compacted, mine = manifest()
        assert mine == [took, None]
        directory = os.path.join(data, f"__consumer_offsets-{p}")
        stamps = {int(name[:-4].partition("-")[2]) for name in os.listdir(directory) if name.endswith(".log")}
        assert stamps == {compacted[0], took}  # node 2's segments and the first compaction's went
        assert fetch(nodes[0].bootstrap, group) == (ErrorCode.none, offsets)
    finally:
        for node in nodes:
            if node.alive():
                node.stop()
    restarted = cluster_node(data, etcd, 1, *SETTINGS, *compacting).start()
    try:
        wait_until(lambda: fetch(restarted.bootstrap, group) == (ErrorCode.none, offsets), 60,
                   "a restart loads the compacted partition with every offset")
    finally:
        restarted.stop()
    lines, ok = inspect.verify(data)  # `groupd log verify`: every stamp's segments chain
    assert ok and f"partition {p:>3}: OK" in "\n".join(lines), lines


async def test_a_compactions_manifest_swap_holds_only_while_the_claim_and_the_manifest_do(etcd, tmp_path):
    """The etcd side of a compaction, on a real etcd: its stamp is taken only under the claim; the
    swap fails on a changed manifest (then the claim learns etcd's, as after a swap whose answer was
    lost) and once the claim is gone (then nothing is learnt)."""
    import json

    from groupd.coordinator.cluster.etcd.cluster import EtcdCluster, _Claim
    from groupd.coordinator.settings import Settings

    settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "node.id=1",
                                                      f"cluster.etcd.endpoints={etcd.endpoint}"])
    cluster = EtcdCluster(settings)
    await cluster.connect()
    _key = cluster.key
    try:
        client = cluster.client
        cluster.lease = await client.lease(30)
        stamp = (await client.put(_key("owners", 0), b"1", lease=cluster.lease)).header.revision
        cluster.mine[0] = stamp
        claim = _Claim(cluster, 0, stamp, [[0, None]])
        assert await claim.confirm(7)
        compaction = await claim.compaction_stamp()
        assert compaction > stamp
        assert await claim.swap(claim.counted(), compaction, 5)
        assert json.loads((await client.get(_key("manifests", 0))).value) == [[compaction, 5], [stamp, None]]
        assert not await claim.swap(((0, 7), (stamp, None)), compaction + 1, 6)  # not the manifest any more
        assert claim.counted() == ((compaction, 5), (stamp, None))
        await client.put(_key("manifests", 0), json.dumps([[compaction, 6], [stamp, None]]).encode())
        assert not await claim.swap(((compaction, 5), (stamp, None)), compaction + 2, 6)
        assert claim.counted() == ((compaction, 6), (stamp, None))  # etcd's, learnt from the failed swap
        await client.delete(_key("owners", 0))
        assert not await claim.swap(claim.counted(), compaction + 3, 6)  # the claim is gone
        assert claim.counted() == ((compaction, 6), (stamp, None))
        assert await claim.compaction_stamp() is None
    finally:
        await client.close()


def refusal(node) -> str:
    """The one line a node that refuses to start prints (it exits 1, no traceback)."""
    with pytest.raises(RuntimeError, match="groupd exited with 1") as refused:
        node.start()
    text = str(refused.value).split("\n", 1)[1]
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.startswith("groupd: ")]
    assert len(lines) == 1, text
    return lines[0]


def meta(data: str) -> dict[str, str]:
    with open(os.path.join(data, "meta.properties")) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


def test_a_data_dir_and_etcd_name_each_other_and_a_node_on_the_wrong_one_refuses(tmp_path, etcd):
    """The data dir records its cluster (meta.properties: cluster id, directory.id, prefix), etcd its
    data dir: a lone node on a cluster's dir, a cluster node on another dir (fresh or a lone
    node's), a fresh dir after the cluster's nodes stopped and a cluster's dir on an etcd prefix
    that holds no cluster each refuse with one line naming both; the right pair starts."""
    from tests.support.etcd_server import etcd_get
    from tests.support.process import GroupdProcess

    data, other = str(tmp_path / "data"), str(tmp_path / "other")
    node = cluster_node(data, etcd, 1, *SETTINGS).start()
    try:
        cluster_id = etcd_get(etcd.endpoint, "/groupd/cluster.id").decode()
        recorded = meta(data)
        assert recorded["cluster.id"] == cluster_id and recorded["cluster.etcd.prefix"] == "/groupd"
        assert etcd_get(etcd.endpoint, "/groupd/data.dir.id").decode() == recorded["directory.id"]
        line = refusal(cluster_node(other, etcd, 2, *SETTINGS))  # the operator's typo in data.dir
        assert f"data.dir {other} is not cluster {cluster_id}'s data dir" in line and "new (no meta.properties)" in line
        assert recorded["directory.id"] in line
        assert not os.path.exists(os.path.join(other, "meta.properties"))
        lone = str(tmp_path / "lone")
        GroupdProcess(lone, *SETTINGS).start().stop()
        line = refusal(cluster_node(lone, etcd, 2, *SETTINGS))
        assert f"a lone node's (cluster {meta(lone)['cluster.id']})" in line and cluster_id in line
    finally:
        assert node.stop() == 0, node.log()
    line = refusal(GroupdProcess(data, *SETTINGS))  # cluster.etcd.endpoints forgotten
    assert f"data.dir {data} is cluster {cluster_id}'s shared data dir" in line and "cluster.etcd.endpoints" in line
    assert meta(data) == recorded
    line = refusal(cluster_node(other, etcd, 1, *SETTINGS))  # a fresh dir never adopts the manifests
    assert cluster_id in line and "new (no meta.properties)" in line
    line = refusal(cluster_node(data, etcd, 1, *SETTINGS, "cluster.etcd.prefix=/elsewhere"))
    assert f"cluster {cluster_id}'s" in line and "etcd prefix /elsewhere" in line and "holds no cluster" in line
    again = cluster_node(data, etcd, 1, *SETTINGS).start()  # the right pair
    assert again.stop() == 0


def test_two_clusters_share_one_etcd_under_their_prefixes_with_endpoints_written_as_urls(tmp_path, etcd):
    """cluster.etcd.endpoints as etcd and etcdctl write it (http://host:port) or host:port;
    cluster.etcd.prefix keeps each cluster's keys apart: each node coordinates its own groups."""
    from tests.support.etcd_server import etcd_get

    one = cluster_node(str(tmp_path / "one"), etcd, 1, *SETTINGS, f"cluster.etcd.endpoints=http://{etcd.endpoint}")
    two = cluster_node(str(tmp_path / "two"), etcd, 1, *SETTINGS, "cluster.etcd.prefix=/groupd-two")
    one.start()
    try:
        two.start()
        try:
            for node in (one, two):
                assert set(spread([node], among={1}).values()) == {1}
                assert commit_once_loaded(node.bootstrap, GROUPS[0], {0: node.port}) == {0: ErrorCode.none}
            assert fetch(one.bootstrap, GROUPS[0]) == (ErrorCode.none, {0: one.port})
            assert etcd_get(etcd.endpoint, "/groupd/cluster.id") != etcd_get(etcd.endpoint, "/groupd-two/cluster.id")
            assert etcd_get(etcd.endpoint, "/groupd-two/topics") is not None
        finally:
            assert two.stop() == 0, two.log()
    finally:
        assert one.stop() == 0, one.log()


def test_a_node_reaches_etcd_over_tls_with_a_client_certificate(tmp_path):
    """https:// endpoints with cluster.etcd.ssl.cafile/certfile/keyfile, against an etcd that asks
    for client certificates; without the client certificate the refusal is one line."""
    from tests.support.etcd_server import EtcdServer, tls_certificates

    certs = tls_certificates(str(tmp_path / "certs"))
    server = EtcdServer(str(tmp_path / "etcd"), tls=certs).start()
    try:
        url = f"cluster.etcd.endpoints=https://{server.endpoint}"
        ca = f"cluster.etcd.ssl.cafile={certs}/ca.pem"
        node = cluster_node(str(tmp_path / "data"), server, 1, *SETTINGS, url, ca,
                            f"cluster.etcd.ssl.certfile={certs}/client.pem",
                            f"cluster.etcd.ssl.keyfile={certs}/client-key.pem").start()
        try:
            assert set(spread([node], among={1}).values()) == {1}
            assert commit_once_loaded(node.bootstrap, GROUPS[0], {0: 3}) == {0: ErrorCode.none}
        finally:
            assert node.stop() == 0, node.log()
        line = refusal(cluster_node(str(tmp_path / "data"), server, 1, *SETTINGS, url, ca))
        assert f"cannot reach etcd at cluster.etcd.endpoints=https://{server.endpoint}" in line
    finally:
        server.stop()



def test_a_lone_nodes_dir_and_an_unbound_cluster_dir_are_bound_at_their_next_cluster_start(tmp_path, etcd):
    """A lone node's data dir becomes the cluster's with its cluster id and its offsets; a cluster's
    dir from before data dirs and etcd named each other (no meta.properties, no data.dir.id) is bound
    to the cluster etcd already names, with its offsets."""
    import asyncio

    import aetcd

    from tests.support.process import GroupdProcess

    data = str(tmp_path / "data")
    lone = GroupdProcess(data, *SETTINGS).start()
    assert commit(lone.bootstrap, GROUPS[0], {0: 41}) == {0: ErrorCode.none}
    assert lone.stop() == 0
    lone_id = meta(data)["cluster.id"]
    node = cluster_node(data, etcd, 1, *SETTINGS).start()
    try:
        assert meta(data)["cluster.id"] == lone_id and meta(data)["cluster.etcd.prefix"] == "/groupd"
        wait_until(lambda: fetch(node.bootstrap, GROUPS[0]) == (ErrorCode.none, {0: 41}), 30, "the lone offsets")
        assert commit(node.bootstrap, GROUPS[0], {0: 42}) == {0: ErrorCode.none}
    finally:
        assert node.stop() == 0, node.log()

    async def forget_binding():
        host, _, port = etcd.endpoint.rpartition(":")
        async with aetcd.Client(host, int(port), timeout=5) as client:
            await client.delete(b"/groupd/data.dir.id")
    asyncio.run(forget_binding())
    os.remove(os.path.join(data, "meta.properties"))
    node = cluster_node(data, etcd, 1, *SETTINGS).start()
    try:
        assert meta(data)["cluster.id"] == lone_id
        wait_until(lambda: fetch(node.bootstrap, GROUPS[0]) == (ErrorCode.none, {0: 42}), 30, "the cluster's offsets")
    finally:
        assert node.stop() == 0, node.log()

def test_a_node_sums_up_its_start_up_claims_in_one_line(nodes):
    spread(nodes)
    for node in nodes:
        wait_until(lambda: "partitions claimed count=" in node.log(), 30, "the start-up claims summed up")
        log = node.log()
        assert log.count("partitions claimed count=") == 1, log
        assert "partition claimed partition=" not in log, log
    counts = [int(re.search(r"partitions claimed count=(\d+)", n.log()).group(1)) for n in nodes]
    assert counts[0] == PARTITIONS and 0 < counts[1] < PARTITIONS


async def test_a_partition_is_not_claimed_again_while_a_fences_release_overlaps_its_claim(tmp_path):
    """A fence releases every partition while a claim of one may still be in flight: two moves of one
    partition at once. It is reconciled (claimed again) only once both are over, never while the
    release still runs (its end would drop the state of the claim that followed it)."""
    import asyncio
    import types

    from groupd.coordinator.cluster.etcd.cluster import EtcdCluster, rendezvous
    from groupd.coordinator.cluster.view import Broker
    from groupd.coordinator.settings import Settings

    settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "node.id=1",
                                                      "cluster.etcd.endpoints=http://127.0.0.1:1"])
    cluster = EtcdCluster(settings)
    cluster.coordinator_runtime = types.SimpleNamespace(partitions=1)
    cluster.live = {1: Broker(1)}
    assert rendezvous(0, [1]) == 1
    claimed = []

    async def claim(p):
        claimed.append(p)
    cluster._claim = claim
    cluster._settling = None
    claim_done, release_done = asyncio.Event(), asyncio.Event()
    cluster._spawn(0, claim_done.wait())    # a claim in flight
    cluster._spawn(0, release_done.wait())  # the fence's release of the same partition
    claim_done.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    cluster._reconcile()
    await asyncio.sleep(0)
    assert claimed == []  # the release still runs
    release_done.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    cluster._reconcile()
    await asyncio.sleep(0)
    assert claimed == [0]


async def test_slow_reads_do_not_delay_the_lease_renewal(tmp_path):
    """A poll's reads take a second (a slow etcd): the lease is still renewed every tick, on its own,
    so the watchdog (half a lease without a renewal) never fences the node. Before, each renewal
    waited for the previous poll's reads and the node fenced itself again and again."""
    import asyncio
    import types

    from groupd.coordinator.cluster.etcd.cluster import EtcdCluster
    from groupd.coordinator.settings import Settings

    settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "node.id=1", "cluster.lease.ms=2000",
                                                      "cluster.etcd.endpoints=http://127.0.0.1:1"])
    cluster = EtcdCluster(settings)
    renewals = []

    class Lease:
        id = 1

        async def refresh(self):
            renewals.append(time.monotonic())
            return types.SimpleNamespace(TTL=2)

    class SlowClient:
        async def get_prefix(self, key):
            await asyncio.sleep(0.5)
            return []

    cluster.client, cluster.lease, cluster.renewed = SlowClient(), Lease(), time.monotonic()
    cluster.coordinator_runtime = types.SimpleNamespace(partitions=1)
    cluster.mine = {0: 1}  # a partition the watchdog would give up
    cluster._settling = None
    fenced = []
    cluster.fence = fenced.append
    cluster._task = asyncio.get_running_loop().create_task(cluster._run())
    cluster._arm_watchdog()
    try:
        await asyncio.sleep(3 * cluster.lease_s)
    finally:
        cluster._watchdog.cancel()
        cluster._task.cancel()
    assert fenced == []
    assert len(renewals) >= 3 * cluster.lease_s / cluster.tick / 2  # about every tick
