"""`groupd serve --workers 2` over the wire: the real supervisor and its two worker processes on
127.0.0.1 (worker i: node.id 1 + i on port + i). Every worker lists both in Metadata and names the
owner in FindCoordinator; a group's requests to the other worker answer NOT_COORDINATOR; the catalog's
writer is worker 0 (the controller); a data partition has one leader; a killed worker comes back with
its offsets; a transactional id is served by one worker; SIGTERM drains both; the data dir refuses a
second server."""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest

from groupd.coordinator.core.partitioning import partition_for
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.harness import wait_until
from tests.support.process import ROOT, GroupdProcess, WireClient, commit_offsets, free_port, free_ports

PARTITIONS = 50


def group_on(worker: int, prefix: str = "g") -> str:
    """A group id whose offsets partition worker `worker` of 2 coordinates."""
    return next(g for g in (f"{prefix}{i}" for i in range(10_000)) if partition_for(g, PARTITIONS) % 2 == worker)


def start_workers(data_dir: str, *settings: str, metrics: int | None = None) -> GroupdProcess:
    return GroupdProcess(data_dir, "workers=2", "group.initial.rebalance.delay.ms=0", *settings,
                         *([f"metrics.listener=http://127.0.0.1:{metrics}/metrics"] if metrics else []),
                         port=free_ports(2), ready="workers ready").start(timeout=60)


@pytest.fixture(scope="module")
def metrics_port():
    return free_port()


@pytest.fixture(scope="module")
def server(tmp_path_factory, metrics_port):
    s = start_workers(str(tmp_path_factory.mktemp("workers")), "topics=t:2", metrics=metrics_port)
    yield s
    assert s.stop() == 0, s.log()


def at(server: GroupdProcess, worker: int) -> str:
    return f"127.0.0.1:{server.port + worker}"


def find(bootstrap: str, group: str):
    with WireClient(bootstrap) as w:
        return w.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]


def offset_fetch(bootstrap: str, group: str, topic: str = "t"):
    with WireClient(bootstrap) as w:
        return w.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0, 1]}], "require_stable": False})


def metadata(bootstrap: str, topics, allow_auto_topic_creation: bool = False):
    with WireClient(bootstrap) as w:
        return w.request(ApiKey.METADATA, 12, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": allow_auto_topic_creation, "include_topic_authorized_operations": False})


def worker_pid(server: GroupdProcess, worker: int) -> int:
    return int(re.findall(rf"worker started worker={worker} node\.id=\d+ pid=(\d+)", server.log())[-1])


@pytest.mark.parametrize("worker", [0, 1])
def test_metadata_on_every_worker_lists_both_and_the_owner_of_each_offsets_partition(server, worker):
    response = metadata(at(server, worker), None)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (1, "127.0.0.1", server.port), (2, "127.0.0.1", server.port + 1)]
    assert response.controller_id == 1
    topics = {t.name: t for t in response.topics}
    assert [p.leader_id for p in topics["__consumer_offsets"].partitions] == [1 + p % 2 for p in range(PARTITIONS)]
    assert [p.leader_id for p in topics["t"].partitions] == [1, 2]


@pytest.mark.parametrize("asked", [0, 1])
def test_find_coordinator_names_the_worker_that_owns_the_groups_partition(server, asked):
    for owner in (0, 1):
        answer = find(at(server, asked), group_on(owner))
        assert (answer.error_code, answer.node_id, answer.port) == (ErrorCode.none, 1 + owner, server.port + owner)


def test_a_group_asked_at_the_other_worker_answers_not_coordinator_and_is_served_by_its_owner(server):
    group = group_on(1, "nc")
    with WireClient(at(server, 0)) as w:
        reply = w.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert reply.topics[0].partitions[0].error_code is ErrorCode.not_coordinator
        assert w.request(ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "m",
                                               "group_instance_id": None}).error_code is ErrorCode.not_coordinator
    commit_offsets(at(server, 1), group, "t", {0: 5})
    assert offset_fetch(at(server, 1), group).topics[0].partitions[0].committed_offset == 5
    assert offset_fetch(at(server, 0), group).error_code is ErrorCode.not_coordinator


def test_topics_are_written_by_the_controller_and_seen_by_the_other_worker(server):
    body = {"topics": [{"name": "created", "num_partitions": 3, "replication_factor": -1, "assignments": [],
                        "configs": []}], "timeout_ms": 5000, "validate_only": False}
    with WireClient(at(server, 1)) as w:
        assert w.request(ApiKey.CREATE_TOPICS, 7, body).topics[0].error_code is ErrorCode.not_controller
    with WireClient(at(server, 0)) as w:
        assert w.request(ApiKey.CREATE_TOPICS, 7, body).topics[0].error_code is ErrorCode.none

    def partitions_seen():
        topic = metadata(at(server, 1), ["created"]).topics[0]
        return topic.error_code is ErrorCode.none and len(topic.partitions)

    assert wait_until(partitions_seen, timeout=10, what="the new topic on worker 1") == 3


def topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str, int]]:
    with WireClient(bootstrap) as w:
        r = w.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": 2, "resource_name": topic, "configuration_keys": ["cleanup.policy", "retention.ms"]}],
            "include_synonyms": False, "include_documentation": False}).results[0]
    assert r.error_code is ErrorCode.none, r.error_message
    return {c.name: (c.value, c.config_source) for c in r.configs}


def test_topic_configs_altered_at_the_other_worker_are_written_by_the_controller(server):
    body = {"topics": [{"name": "configured", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": "cleanup.policy", "value": "compact"}]}],
            "timeout_ms": 5000, "validate_only": False}
    with WireClient(at(server, 0)) as w:
        assert w.request(ApiKey.CREATE_TOPICS, 7, body).topics[0].error_code is ErrorCode.none
    wait_until(lambda: metadata(at(server, 1), ["configured"]).topics[0].error_code is ErrorCode.none, timeout=10,
               what="the new topic on worker 1")
    assert topic_configs(at(server, 1), "configured")["cleanup.policy"] == ("compact", 1)
    with WireClient(at(server, 1)) as w:
        altered = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": 2, "resource_name": "configured", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "60000"},
                {"name": "cleanup.policy", "config_operation": 2, "value": "delete"}]}], "validate_only": False})
    assert altered.responses[0].error_code is ErrorCode.none, altered.responses[0].error_message
    expected = {"cleanup.policy": ("compact,delete", 1), "retention.ms": ("60000", 1)}
    assert topic_configs(at(server, 1), "configured") == expected  # at once where it was asked
    wait_until(lambda: topic_configs(at(server, 0), "configured") == expected, timeout=10, what="worker 0's view")


def test_an_auto_create_on_the_other_worker_is_done_by_the_controller(server):
    first = metadata(at(server, 1), ["auto"], allow_auto_topic_creation=True).topics[0]
    assert first.error_code is ErrorCode.leader_not_available  # Kafka's answer while the controller creates it

    def created():
        return all(metadata(at(server, w), ["auto"]).topics[0].error_code is ErrorCode.none for w in (0, 1))

    wait_until(created, timeout=10, what="the auto-created topic on both workers")
    assert "topic created topic=auto partitions=1 reason=auto-create" in server.log()


def test_a_data_partition_is_served_by_its_leader_only(server):
    with WireClient(at(server, 0)) as w:
        reply = w.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1},
                                         {"partition_index": 1, "timestamp": -1, "current_leader_epoch": -1}]}]})
    assert [p.error_code for p in reply.topics[0].partitions] == [ErrorCode.none, ErrorCode.not_leader_or_follower]


def test_idempotent_producers_get_distinct_ids_from_either_worker(server):
    ids = []
    for worker in (0, 1, 0, 1):
        with WireClient(at(server, worker)) as w:
            reply = w.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": datetime.timedelta(milliseconds=-1),
                                                           "producer_id": -1, "producer_epoch": -1})
        assert reply.error_code is ErrorCode.none
        ids.append(reply.producer_id)
    assert len(set(ids)) == 4  # a batch's (producer id, sequence) is checked by whichever worker leads


def test_a_transactional_id_is_served_by_the_worker_owning_its_partition_only(server):
    """The worker owning the id's `__transaction_state` partition coordinates it (docs/transactions.md);
    the other answers NOT_COORDINATOR, and FindCoordinator on either names the owner."""
    owner = partition_for("tx", PARTITIONS) % 2
    for worker in (0, 1):
        with WireClient(at(server, worker)) as w:
            found = w.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]}).coordinators[0]
            assert (found.error_code, found.node_id) == (ErrorCode.none, 1 + owner)
            init = w.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx",
                                                          "transaction_timeout": datetime.timedelta(minutes=1),
                                                          "producer_id": -1, "producer_epoch": -1})
            assert init.error_code is (ErrorCode.none if worker == owner else ErrorCode.not_coordinator)
            if worker != owner:
                ended = w.request(ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": 1,
                                                      "producer_epoch": 0, "committed": True})
                assert ended.error_code is ErrorCode.not_coordinator


def test_one_metrics_endpoint_for_both_workers(server, metrics_port):
    base = f"http://127.0.0.1:{metrics_port}"
    with urllib.request.urlopen(f"{base}/ready", timeout=10) as r:
        assert json.load(r) == {"status": "ready", "workers": 2, "ready": 2}
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as r:
        text = r.read().decode()
    active = re.findall(r'^groupd_partition_state\{offsets_partition="(\d+)",state="active"\} 1\.0$', text, re.M)
    assert sorted(map(int, active)) == list(range(PARTITIONS))  # each partition once, by its owner
    assert re.search(r'^process_start_time_seconds\{worker="0"\}', text, re.M)
    assert re.search(r'^process_start_time_seconds\{worker="1"\}', text, re.M)


def test_lag_of_a_group_on_one_worker_reading_a_partition_another_worker_leads(server, metrics_port):
    from confluent_kafka import Producer

    group = group_on(0, "lag")
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(7):
        producer.produce("t", b"x", partition=1)  # t-1: led by worker 1
    assert producer.flush(30) == 0
    commit_offsets(at(server, 0), group, "t", {1: 2})
    series = (f'groupd_consumergroup_group_lag{{client_id="unknown",consumer_id="unknown",group="{group}",'
              'member_host="unknown",partition="1",topic="t"}')

    def lag() -> float | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            found = [line.rsplit(" ", 1)[1] for line in r.read().decode().splitlines() if line.startswith(series)]
        return float(found[0]) if found else None

    assert wait_until(lambda: lag() == 5.0, timeout=30, what="the lag from worker 1's log end")


def test_a_killed_worker_is_restarted_and_its_offsets_are_intact(server, metrics_port):
    group = group_on(1, "kill")
    commit_offsets(at(server, 1), group, "t", {0: 42, 1: 7})
    seen = server.log().count("worker ready worker=1 ")
    os.kill(worker_pid(server, 1), signal.SIGKILL)
    wait_until(lambda: server.log().count("worker ready worker=1 ") > seen, timeout=60, what="worker 1 again")
    assert "worker exited worker=1 node.id=2 code=-9" in server.log()
    partitions = offset_fetch(at(server, 1), group).topics[0].partitions
    assert [(p.partition_index, p.committed_offset) for p in partitions] == [(0, 42), (1, 7)]
    assert find(at(server, 0), group).error_code is ErrorCode.none


def test_the_data_dir_refuses_a_second_supervisor_and_a_lone_server(server):
    for extra in (["--set", "workers=2"], []):
        done = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--set", f"data.dir={server.data_dir}",
                               "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_ports(2)}", "--set",
                               "metrics.listener=", *extra], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        assert "is in use" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_busy_port_ends_in_its_one_line_without_a_pending_task_or_a_started_supervisor(tmp_path):
    import socket

    port = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        done = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--workers", "2", "--set",
                               f"data.dir={tmp_path}", "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--set",
                               "metrics.listener="], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("groupd: ")]
    assert len(errors) == 1 and "already in use" in errors[0], done.stderr
    assert "Task was destroyed but it is pending" not in done.stderr, done.stderr  # the worker's link, left running
    assert "Traceback" not in done.stderr and "supervisor started" not in done.stderr, done.stderr
    assert "shutdown requested signal=worker-failed" in done.stderr


def test_sigterm_drains_every_worker_and_exits_zero_with_their_commits_kept(tmp_path):
    s = start_workers(str(tmp_path), "topics=t:2")
    for worker in (0, 1):
        commit_offsets(at(s, worker), group_on(worker, "drain"), "t", {0: 10 + worker})
    assert s.stop(signal.SIGTERM, timeout=60) == 0, s.log()
    log = s.log()
    for worker in (0, 1):
        assert f"worker stopped worker={worker} node.id={1 + worker} code=0" in log
    assert "supervisor stopped workers=2" in log
    s.start(timeout=60)
    try:
        for worker in (0, 1):
            partitions = offset_fetch(at(s, worker), group_on(worker, "drain")).topics[0].partitions
            assert partitions[0].committed_offset == 10 + worker
    finally:
        assert s.stop() == 0, s.log()


def test_the_admin_commands_find_each_groups_coordinator_and_each_partitions_leader(server):
    from groupd.coordinator.tools import groups as admin

    groups = [group_on(0, "adm"), group_on(1, "adm")]
    for g in groups:
        commit_offsets(at(server, 0 if g == groups[0] else 1), g, "t", {0: 3, 1: 4})
    listed = {g["group"] for g in admin.list_groups(server.bootstrap)}
    assert set(groups) <= listed  # one group from each worker
    for g in groups:
        described = admin.describe_group(server.bootstrap, g)
        # log ends from each partition's leader: t-1 kept the 7 records of the lag test through worker
        # 1's kill -9 (the disk plane; run alone, this test sees 0)
        ends = [(o["partition"], o["offset"], o["log_end_offset"]) for o in described["offsets"]]
        assert ends in ([(0, 3, 0), (1, 4, 7)], [(0, 3, 0), (1, 4, 0)]), ends
    ok, line = admin.health(server.bootstrap, timeout=10, ready=True)
    assert ok, line
    assert line.startswith(f"ready: {server.bootstrap}: 50 of 50")
    assert admin.delete_groups(server.bootstrap, groups) == {g: None for g in groups}


def test_workers_stop_when_their_supervisor_is_killed(tmp_path):
    s = start_workers(str(tmp_path))
    pids = [worker_pid(s, w) for w in (0, 1)]
    s.kill()  # kill -9 of the supervisor: nobody drains the workers but themselves

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as f:  # exited, not yet reaped by init
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"

    wait_until(lambda: all(gone(p) for p in pids), timeout=30, what="the workers to exit")
    s.start(timeout=60)  # their locks went with them
    assert s.stop() == 0, s.log()


def test_acls_scram_users_and_group_configs_sent_to_any_worker_are_written_by_the_controller(tmp_path):
    """Kafka's brokers forward these writes to their controller; a worker hands them to worker 0 and
    answers once it wrote them, and then serves them itself."""
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePattern, ResourceType

    from tests.security.test_acls_wire import ANY_FILTER
    from tests.security.test_scram_users import credentials, upsertion
    from tests.support.authz import LITERAL, READ, TOPIC, acl, create_acls

    s = start_workers(str(tmp_path), "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "allow.everyone.if.no.acl.found=true")
    try:
        assert create_acls(at(s, 1), acl(TOPIC, "read-me", READ)) == [ErrorCode.none]
        admin = KafkaAdminClient(bootstrap_servers=s.bootstrap)  # sends to the least loaded broker
        try:
            created = admin.create_acls([ACL("User:k", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                                             ResourcePattern(ResourceType.TOPIC, "kafka-python"))])
        finally:
            admin.close()
        assert not created["failed"], created

        def described(worker: int) -> set[str]:
            with WireClient(at(s, worker)) as w:
                return {r.resource_name for r in w.request(ApiKey.DESCRIBE_ACLS, 3, ANY_FILTER).resources}

        for worker in (0, 1):  # each follows the controller's file (kafka-python may have asked either)
            wait_until(lambda: described(worker) == {"read-me", "kafka-python"}, timeout=10, what="both ACLs")
        with WireClient(at(s, 1)) as w:
            assert create_acls(at(s, 1), acl(TOPIC, "mine", READ)) == [ErrorCode.none]
            assert "mine" in described(1)  # served at once by the worker that handed it over
            deleted = w.request(ApiKey.DELETE_ACLS, 3, {"filters": [
                {**ANY_FILTER, "resource_type_filter": TOPIC, "resource_name_filter": "kafka-python"}]})
            assert [a.resource_name for a in deleted.filter_results[0].matching_acls] == ["kafka-python"]
            altered = w.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [],
                                                                         "upsertions": [upsertion("alice", "pw")]})
            assert [(r.user, r.error_code) for r in altered.results] == [("alice", ErrorCode.none)]
            configs = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": 32, "resource_name": "cfg", "configs": [
                    {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]}],
                "validate_only": False})
            assert configs.responses[0].error_code is ErrorCode.none
        # a write whose forwarded form and answer are each far over a stream reader's default 64 KiB line
        many = [acl(TOPIC, f"bulk-{i:04d}-" + "x" * 100, READ) for i in range(1000)]
        assert create_acls(at(s, 1), *many) == [ErrorCode.none] * 1000
        with WireClient(at(s, 1)) as w:
            deleted = w.request(ApiKey.DELETE_ACLS, 3, {"filters": [
                {**ANY_FILTER, "resource_type_filter": TOPIC, "resource_name_filter": c["resource_name"],
                 "pattern_type_filter": LITERAL} for c in many]})
            assert [len(r.matching_acls) for r in deleted.filter_results] == [1] * 1000
        assert create_acls(at(s, 1), acl(TOPIC, "after-bulk", READ)) == [ErrorCode.none]  # the link still works
        with WireClient(at(s, 0)) as w:
            assert credentials(w, "alice") == {"alice": [(2, 4096)]}
            assert described(0) == {"read-me", "mine", "after-bulk"}
            group_configs = w.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
                "resource_type": 32, "resource_name": "cfg", "configuration_keys": ["consumer.heartbeat.interval.ms"]}],
                "include_synonyms": False, "include_documentation": False}).results[0]
            assert [(c.name, c.value) for c in group_configs.configs] == [("consumer.heartbeat.interval.ms", "6000")]
        assert "groupd.authorizer[1] acl created" in s.log()  # logged where the request came in
    finally:
        assert s.stop() == 0, s.log()
