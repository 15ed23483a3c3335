"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89) on the wire against the real server
(KIP-1071, Kafka 4.3): a member joins with its topology, the group is NotReady while groupd creates
the internal topics with the topology's partitions and configs, then tasks are assigned; two
processes split the tasks after a revocation; the classic admin APIs, offsets and group configs see
the streams group as Kafka's do; a restart (and a kill -9) keeps the group."""

from __future__ import annotations

import datetime
import json

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, free_ports, groupd_cli_output, groupd_fixture

# no assignment interval: these tests walk reconciliation one heartbeat at a time and expect each
# change assigned at once (the interval's batching is tested in tests/core and below)
SETTINGS = ("topics=words:2", "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
server = groupd_fixture(*SETTINGS)
DEADLINE_S = 20


def topology(app: str, epoch: int = 0) -> dict:
    """Word count's shape: 0 reads `words` and writes the repartition topic; 1 reads it into a store
    (Kafka Streams lists it among subtopology 1's repartition sources only, not its source topics)."""
    return {"epoch": epoch, "subtopologies": [
        {"subtopology_id": "0", "source_topics": ["words"], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [f"{app}-repartition"], "repartition_source_topics": [],
         "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [{"name": f"{app}-store-changelog", "partitions": 0, "replication_factor": 0,
                                     "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
         "repartition_sink_topics": [],
         "repartition_source_topics": [{"name": f"{app}-repartition", "partitions": 0, "replication_factor": 0,
                                        "topic_configs": [{"key": "cleanup.policy", "value": "delete"}]}],
         "copartition_groups": []}]}


def heartbeat(c: WireClient, group: str, member: str, epoch: int, *, join_topology=None, process="p1",
              owned=None, endpoint=None, **extra):
    values = {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
              "instance_id": None, "rack_id": None,
              "rebalance_timeout": datetime.timedelta(milliseconds=60000 if epoch == 0 else -1),
              "topology": join_topology, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
              "process_id": process if epoch == 0 else None, "user_endpoint": endpoint, "client_tags": None,
              "task_offsets": None, "task_end_offsets": None, "shutdown_application": False, **extra}
    if owned is not None:
        values.update({"active_tasks": [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in owned.items()],
                       "standby_tasks": [], "warmup_tasks": []})
    return c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, values)


def tasks(r) -> dict:
    return {t.subtopology_id: set(t.partitions) for t in r.active_tasks or ()}


def describe(c: WireClient, *groups: str):
    return c.request(ApiKey.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": list(groups),
                                                        "include_authorized_operations": False}).groups


def topics(c: WireClient, *names: str) -> dict:
    r = c.request(ApiKey.METADATA, 12, {"topics": [{"name": n, "topic_id": None} for n in names],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    return {t.name: len(t.partitions) for t in r.topics if t.error_code == ErrorCode.none}


def until(condition, what: str):
    return wait_until(condition, DEADLINE_S, what)


def ready_member(c: WireClient, group: str, member: str, app: str):
    """Join, then heartbeat until the internal topics exist and the member holds tasks."""
    r = heartbeat(c, group, member, 0, join_topology=topology(app))
    assert r.error_code == ErrorCode.none, r
    return until(lambda: (lambda h: h if h.active_tasks else None)(
        heartbeat(c, group, member, 0, join_topology=topology(app))), "assignment")


def test_join_creates_the_internal_topics_then_assigns_every_task(server):
    with WireClient(server.bootstrap) as c:
        first = heartbeat(c, "sg-wc", "m-1", 0, join_topology=topology("wc"))
        assert (first.error_code, first.member_id, first.member_epoch) == (ErrorCode.none, "m-1", 1)
        assert [(s.status_code, s.status_detail) for s in first.status] == [
            (3, "Internal topics are missing: [wc-repartition, wc-store-changelog]")]
        assert first.heartbeat_interval.total_seconds() == 5 and first.acceptable_recovery_lag == 10000
        until(lambda: topics(c, "wc-repartition", "wc-store-changelog") == {"wc-repartition": 2,
                                                                            "wc-store-changelog": 2}, "topics")
        configs = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": "wc-store-changelog", "configuration_keys": ["cleanup.policy"]}],
            "include_synonyms": False, "include_documentation": False}).results[0].configs
        assert [(e.name, e.value) for e in configs] == [("cleanup.policy", "compact")]
        r = until(lambda: (lambda h: h if h.active_tasks else None)(heartbeat(c, "sg-wc", "m-1", 1)), "tasks")
        assert r.status == () and tasks(r) == {"0": {0, 1}, "1": {0, 1}}
        [g] = describe(c, "sg-wc")
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (ErrorCode.none, "Stable", 2, 2)
    assert g.topology.epoch == 0
    subs = {s.subtopology_id: s for s in g.topology.subtopologies}
    assert [(t.name, t.partitions) for t in subs["1"].state_changelog_topics] == [("wc-store-changelog", 2)]
    assert (subs["0"].source_topics, subs["1"].source_topics) == (("words",), ())  # as the member sent them
    assert [(t.name, t.partitions) for t in subs["1"].repartition_source_topics] == [("wc-repartition", 2)]
    [m] = g.members
    assert (m.member_id, m.process_id, m.client_id, m.is_classic) == ("m-1", "p1", "wire-test", False)
    assert {t.subtopology_id: sorted(t.partitions) for t in m.assignment.active_tasks} == {"0": [0, 1], "1": [0, 1]}


def test_a_second_process_takes_half_after_the_first_revokes(server):
    with WireClient(server.bootstrap) as c:
        a = ready_member(c, "sg-two", "a", "two")
        held = tasks(a)
        b = heartbeat(c, "sg-two", "b", 0, join_topology=topology("two"), process="p2")
        assert b.error_code == ErrorCode.none and tasks(b) == {}
        r = heartbeat(c, "sg-two", "a", a.member_epoch, owned=held)
        kept = tasks(r)
        assert r.member_epoch == a.member_epoch and sum(map(len, kept.values())) == 2  # revoke first
        r = heartbeat(c, "sg-two", "a", a.member_epoch, owned=kept)
        assert r.member_epoch == b.member_epoch
        rb = heartbeat(c, "sg-two", "b", b.member_epoch)
        assert sum(map(len, tasks(rb).values())) == 2
        assert not any(tasks(rb).get(s, set()) & ps for s, ps in kept.items())
        [g] = describe(c, "sg-two")
        assert g.group_state == "Stable"


def test_errors_as_kafka(server):
    with WireClient(server.bootstrap) as c:
        assert heartbeat(c, "sg-err", "m", 3).error_code == ErrorCode.group_id_not_found
        r = heartbeat(c, "sg-err", "m", 0)
        assert (r.error_code, r.error_message) == (ErrorCode.invalid_request,
                                                   "Topology must be non-null when (re-)joining.")
        r = heartbeat(c, "sg-err", "m", 0, join_topology=topology("err"), instance_id="i")
        assert (r.error_code, r.error_message) == (ErrorCode.invalid_request, "Static membership is not yet supported.")
        bad = topology("err")
        bad["subtopologies"][1]["state_changelog_topics"][0]["partitions"] = 3
        r = heartbeat(c, "sg-err", "m", 0, join_topology=bad)
        assert r.error_code == ErrorCode.streams_invalid_topology
        assert heartbeat(c, "sg-err", "m", 0, join_topology=topology("err")).error_code == ErrorCode.none
        assert heartbeat(c, "sg-err", "m", 9).error_code == ErrorCode.fenced_member_epoch
        assert heartbeat(c, "sg-err", "x", 1).error_code == ErrorCode.unknown_member_id
        changed = topology("err")
        changed["subtopologies"] = changed["subtopologies"][:1]
        r = heartbeat(c, "sg-err", "y", 0, join_topology=changed)
        assert (r.error_code, r.error_message) == (ErrorCode.invalid_request, "Topology updates are not supported yet.")
        # another type's group id
        c.request(ApiKey.OFFSET_COMMIT, 8, {"group_id": "classic-g", "generation_id_or_member_epoch": -1,
                                            "member_id": "", "group_instance_id": None, "retention_time_ms": -1,
                                            "topics": [{"name": "words", "partitions": [
                                                {"partition_index": 0, "committed_offset": 1,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        r = heartbeat(c, "classic-g", "m", 0, join_topology=topology("cg"))
        assert r.error_code == ErrorCode.none  # an empty classic group becomes a streams group (Kafka 4.3)
        [d] = describe(c, "sg-none")  # Kafka's describe says "Group", its heartbeat "Streams group"
        assert (d.error_code, d.error_message) == (ErrorCode.group_id_not_found, "Group sg-none not found.")
        heartbeat(c, "sg-cons", "m", 0, join_topology=topology("cons"))
        cons = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": "sg-cons", "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": datetime.timedelta(seconds=30), "subscribed_topic_names": ["words"],
            "server_assignor": None,
            "topic_partitions": []})
        assert cons.error_code == ErrorCode.group_id_not_found


def test_admin_apis_offsets_and_group_configs_see_a_streams_group(server):
    with WireClient(server.bootstrap) as c:
        r = ready_member(c, "sg-admin", "m", "adm")
        listed = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["streams"]}).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed
                if g.group_id == "sg-admin"] == [("sg-admin", "streams", "Stable", "streams")]
        [d] = c.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["sg-admin"],
                                                    "include_authorized_operations": False}).groups
        assert d.error_code == ErrorCode.group_id_not_found
        commit = {"group_id": "sg-admin", "generation_id_or_member_epoch": r.member_epoch, "member_id": "m",
                  "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": "words", "partitions": [
                      {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                       "committed_metadata": ""}]}]}
        result = c.request(ApiKey.OFFSET_COMMIT, 9, commit)
        assert result.topics[0].partitions[0].error_code == ErrorCode.none
        stale = c.request(ApiKey.OFFSET_COMMIT, 9, {**commit, "generation_id_or_member_epoch": r.member_epoch + 5})
        assert stale.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
        fetched = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "sg-admin", "topics": None}],
                                                     "require_stable": False}).groups[0]
        assert [(t.name, p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions] == [
            ("words", 0, 42)]
        altered = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 32, "resource_name": "sg-admin", "configs": [
                {"name": "streams.num.standby.replicas", "config_operation": 0, "value": "1"}]}],
            "validate_only": False}).responses[0]
        assert altered.error_code == ErrorCode.none
        described = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 32, "resource_name": "sg-admin",
             "configuration_keys": ["streams.num.standby.replicas", "streams.session.timeout.ms"]}],
            "include_synonyms": False, "include_documentation": False}).results[0].configs
        assert {(e.name, e.value) for e in described} == {("streams.num.standby.replicas", "1"),
                                                          ("streams.session.timeout.ms", "45000")}
        too_many = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 32, "resource_name": "sg-admin", "configs": [
                {"name": "streams.num.standby.replicas", "config_operation": 0, "value": "3"}]}],
            "validate_only": False}).responses[0]
        assert too_many.error_code == ErrorCode.invalid_config
        deleted = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg-admin"]}).results
        assert [r.error_code for r in deleted] == [ErrorCode.non_empty_group]
        offset_delete = {"group_id": "sg-admin", "topics": [{"name": "words", "partitions": [{"partition_index": 0}]}]}
        r = c.request(ApiKey.OFFSET_DELETE, 0, offset_delete)
        assert r.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic  # a source topic
        assert heartbeat(c, "sg-admin", "m", -1).member_epoch == -1
        r = c.request(ApiKey.OFFSET_DELETE, 0, offset_delete)
        assert (r.error_code, r.topics[0].partitions[0].error_code) == (ErrorCode.none, ErrorCode.none)
        deleted = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg-admin"]}).results
        assert [r.error_code for r in deleted] == [ErrorCode.none]
        assert describe(c, "sg-admin")[0].error_code == ErrorCode.group_id_not_found


def test_groups_cli_lists_and_describes_a_streams_group(server):
    with WireClient(server.bootstrap) as c:
        ready_member(c, "sg-cli", "m-1", "cli")
    b = ["--bootstrap", server.bootstrap]
    listed = json.loads(groupd_cli_output("groups", "list", "--type", "streams", "--json", *b))
    assert {"group": "sg-cli", "state": "Stable", "protocol_type": "streams", "type": "streams"} in listed
    d = json.loads(groupd_cli_output("groups", "describe", "sg-cli", "--json", *b))
    assert (d["type"], d["state"], d["topology_epoch"], d["subtopologies"]) == ("streams", "Stable", 0, 2)
    [m] = d["members"]
    assert (m["member_id"], m["process_id"], m["active_tasks"]) == ("m-1", "p1", {"0": [0, 1], "1": [0, 1]})
    text = groupd_cli_output("groups", "describe", "sg-cli", *b)
    assert "streams group Stable" in text and "0_0 0_1 1_0 1_1" in text


def test_api_versions_lists_the_streams_apis(server):
    with WireClient(server.bootstrap) as c:
        keys = {k.api_key: (k.min_version, k.max_version)
                for k in c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                            "client_software_version": "1"}).api_keys}
    assert keys[88] == keys[89] == (0, 1)  # v1: Kafka 4.4 (protocol/newer_versions.py)


@pytest.fixture
def own_server(tmp_path):
    s = GroupdProcess(str(tmp_path), *SETTINGS).start()
    yield s
    assert s.stop() == 0, s.log()


@pytest.mark.parametrize("crash", [False, True], ids=["restart", "kill-9"])
def test_a_restart_keeps_the_group_its_topology_and_assignment(own_server, crash):
    with WireClient(own_server.bootstrap) as c:
        r = ready_member(c, "sg-restart", "m", "rs")
        before = describe(c, "sg-restart")[0]
    if crash:
        own_server.kill()
    else:
        own_server.stop()
    own_server.start()
    with WireClient(own_server.bootstrap) as c:
        after = until(lambda: (lambda g: g if g.error_code == ErrorCode.none else None)(
            describe(c, "sg-restart")[0]), "the loaded group")
        assert (after.group_epoch, after.assignment_epoch, after.topology.epoch) == (
            before.group_epoch, before.assignment_epoch, 0)
        assert [(m.member_id, m.member_epoch) for m in after.members] == [("m", r.member_epoch)]
        again = heartbeat(c, "sg-restart", "m", r.member_epoch)
        assert (again.error_code, again.member_epoch) == (ErrorCode.none, r.member_epoch)
        assert describe(c, "sg-restart")[0].group_state == "Stable"


def test_under_workers_each_worker_gets_its_groups_internal_topics_created(tmp_path):
    """`--workers 2`: worker 0 writes the catalog; a streams group coordinated by worker 1 has its
    internal topics created through it (coordinator/cluster/controller_writes.py)."""
    s = GroupdProcess(str(tmp_path), "workers=2", *SETTINGS, port=free_ports(2),
                      ready="workers ready").start(timeout=60)
    try:
        seen = set()
        for group in ("wk-a", "wk-b", "wk-c", "wk-d"):
            with WireClient(s.bootstrap) as c:
                coordinator = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0,
                                                                     "coordinator_keys": [group]}).coordinators[0]
            seen.add(coordinator.port)
            with WireClient(f"{coordinator.host}:{coordinator.port}") as c:
                r = ready_member(c, group, "m", group)
                assert sum(map(len, tasks(r).values())) == 4
        assert len(seen) == 2  # both workers coordinated some of them
    finally:
        assert s.stop() == 0, s.log()


def test_v1_heartbeat_and_describe_answer_as_kafka_4_4_without_a_topology_description_plugin(server):
    """Kafka 4.4's v1 (KIP-1331): no description is stored (groupd has no plugin), so none is asked of
    the member and a describe that wants it says NOT_STORED; the recovery lag is an int64."""
    with WireClient(server.bootstrap) as c:
        ready = ready_member(c, "sg-v1", "m-1", "v1")
        r = c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, _heartbeat_values("sg-v1", "m-1", ready.member_epoch))
        assert (r.error_code, r.acceptable_recovery_lag, r.topology_description_required) == (ErrorCode.none, 10000,
                                                                                               False)
        offsets = {"task_offsets": [{"subtopology_id": "1", "partition": 0, "offset": 5}], "task_end_offsets": []}
        r = c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, {**_heartbeat_values("sg-v1", "m-1", r.member_epoch),
                                                          **offsets})
        assert r.error_code == ErrorCode.none  # Kafka Streams 4.4 reports them over v1; taken, not used
        r0 = c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, {**_heartbeat_values("sg-v1", "m-1", r.member_epoch),
                                                           **offsets})
        assert (r0.error_code, r0.error_message) == (ErrorCode.invalid_request, "TaskOffsets are not supported yet.")
        fenced = c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, _heartbeat_values("sg-v1", "m-1", 99))
        assert (fenced.error_code, fenced.acceptable_recovery_lag) == (ErrorCode.fenced_member_epoch, -1)
        for include, status in ((True, 1), (False, 0)):
            found, missing = c.request(ApiKey.STREAMS_GROUP_DESCRIBE, 1, {
                "group_ids": ["sg-v1", "sg-v1-none"], "include_authorized_operations": False,
                "include_topology_description": include}).groups
            assert (found.error_code, found.topology_description, found.topology_description_status,
                    found.assignor_name) == (ErrorCode.none, None, status, "sticky")
            assert (missing.error_code, missing.topology_description_status, missing.assignor_name) == (
                ErrorCode.group_id_not_found, 0, None)
        assert found.topology.epoch == 0 and len(found.members) == 1


def _heartbeat_values(group: str, member: str, epoch: int) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=-1),
            "topology": None, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None, "process_id": None,
            "user_endpoint": None, "client_tags": None, "task_offsets": None, "task_end_offsets": None,
            "shutdown_application": False}


def test_a_groups_assignment_interval_batches_a_join_until_it_is_lifted(server):
    """streams.assignment.interval.ms (Kafka 4.3) over the wire: within the group's interval a join is
    answered ASSIGNMENT_DELAYED at the old assignment epoch; with the config deleted (the broker's 0
    here) the next heartbeat computes the target."""
    def set_interval(c: WireClient, operation: int, value: str | None):
        r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 32, "resource_name": "sg-interval", "configs": [
                {"name": "streams.assignment.interval.ms", "config_operation": operation, "value": value}]}],
            "validate_only": False}).responses[0]
        assert r.error_code == ErrorCode.none, r

    with WireClient(server.bootstrap) as c:
        set_interval(c, 0, "15000")
        described = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 32, "resource_name": "sg-interval", "configuration_keys": [
                "streams.assignment.interval.ms"]}], "include_synonyms": False,
            "include_documentation": False}).results[0].configs
        assert [(e.name, e.value) for e in described] == [("streams.assignment.interval.ms", "15000")]
        a = ready_member(c, "sg-interval", "a", "iv")  # a new group's first target is never held
        b = heartbeat(c, "sg-interval", "b", 0, join_topology=topology("iv"), process="p2")
        assert (b.error_code, b.member_epoch, tasks(b)) == (ErrorCode.none, a.member_epoch, {})
        assert [(s.status_code, s.status_detail) for s in b.status] == [
            (5, "Assignment delayed due to the configured assignment interval.")]
        [g] = describe(c, "sg-interval")
        assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Assigning", a.member_epoch + 1, a.member_epoch)
        set_interval(c, 1, None)
        r = heartbeat(c, "sg-interval", "a", a.member_epoch, owned=tasks(a))
        assert r.status == () and describe(c, "sg-interval")[0].assignment_epoch == a.member_epoch + 1
