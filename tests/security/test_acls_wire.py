"""ACL enforcement on every API, over TCP, as `User:ANONYMOUS` from 127.0.0.1 (spec security §5.6,
§5.7). The ACLs are created through CreateAcls while ANONYMOUS is a super user; the server then
restarts without that, so they also prove that ACLs survive a restart."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.authz import (
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    ANONYMOUS,
    ANY,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    MATCH,
    PREFIXED,
    READ,
    TOPIC,
    WRITE,
    acl,
    connect,
    create_acls,
    start_secured,
)
from tests.support.process import ROOT, GroupdProcess, WireClient, free_port, join_and_sync

E = ErrorCode
MINUTE = datetime.timedelta(minutes=1)
ANY_FILTER = {"resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
              "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}

ACLS = [
    acl(GROUP, "a", READ),  # consumes in group a (DESCRIBE implied)
    acl(TOPIC, "t", READ),
    acl(TOPIC, "w", WRITE),
    acl(GROUP, "del-", DELETE, pattern=PREFIXED),
    acl(GROUP, "del-keep", DELETE, DENY),  # DENY wins over the prefixed ALLOW
    acl(GROUP, "h", READ, host="10.9.9.9"),  # another host only
    acl(GROUP, "h-local", READ, host="127.0.0.1"),
    acl(GROUP, "peek", DESCRIBE),  # may see, not join or commit
    acl(GROUP, "c848", READ, pattern=PREFIXED),
    acl(TOPIC, "auto-", DESCRIBE, pattern=PREFIXED),
    acl(TOPIC, "auto-ok-", CREATE, pattern=PREFIXED),
    acl(GROUP, "cfg", ALTER_CONFIGS),  # DESCRIBE_CONFIGS implied
    acl(TOPIC, "u", ALTER_CONFIGS),  # its configs only: DESCRIBE_CONFIGS implied, not DESCRIBE
    acl(GROUP, "share-", READ, pattern=PREFIXED),  # share groups (KIP-932)
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("acls"))
    metrics_port = free_port()
    seed = start_secured(data_dir, "topics=t:2,u:1,w:1,gone:1", super_users=(ANONYMOUS,))
    try:
        assert create_acls(seed.bootstrap, *ACLS) == [E.none] * len(ACLS)
        with connect(seed.bootstrap) as c:  # groups b and del-x exist, with offsets
            for group in ("b", "del-x", "del-keep", "peek"):
                member, generation = join_and_sync(c, group)
                assert commit(c, group, "t", member=member, generation=generation) == {("t", 0): E.none}
                assert leave(c, group, member).error_code is E.none
    finally:
        assert seed.stop() == 0, seed.log()
    s = start_secured(data_dir, f"metrics.listener=http://127.0.0.1:{metrics_port}/metrics", port=seed.port)
    s.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    yield s
    assert s.stop() == 0, s.log()


def commit(c: WireClient, group: str, *topics: str, version: int = 9, member: str = "", generation: int = -1):
    r = c.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "retention_time": datetime.timedelta(milliseconds=-1),
        "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                               "committed_leader_epoch": -1, "committed_metadata": ""}]}
                   for t in topics]})
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def leave(c: WireClient, group: str, member: str = "m"):
    return c.request(ApiKey.LEAVE_GROUP, 5, {"group_id": group, "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})


def join(c: WireClient, group: str, version: int = 9):
    return c.request(ApiKey.JOIN_GROUP, version, {
        "group_id": group, "session_timeout": MINUTE, "rebalance_timeout": MINUTE, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
        "reason": None})


def fetch_offsets(c: WireClient, group: str, topics, version: int = 8):
    wanted = None if topics is None else [{"name": t, "partition_indexes": [0]} for t in topics]
    if version >= 8:
        return c.request(ApiKey.OFFSET_FETCH, version, {"groups": [{"group_id": group, "topics": wanted}],
                                                         "require_stable": False}).groups[0]
    return c.request(ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": wanted, "require_stable": False})


# --- groups ---------------------------------------------------------------------------------------

def test_allowed_group_joins_and_syncs(server):
    with connect(server.bootstrap) as c:
        member, generation = join_and_sync(c, "a")
        hb = c.request(ApiKey.HEARTBEAT, 4, {"group_id": "a", "generation_id": generation, "member_id": member,
                                             "group_instance_id": None})
        assert hb.error_code is E.none
        assert commit(c, "a", "t", "u", member=member, generation=generation) == {
            ("t", 0): E.none, ("u", 0): E.topic_authorization_failed}
        assert leave(c, "a", member).error_code is E.none


@pytest.mark.parametrize("version", [0, 5, 9])
def test_join_without_read_on_the_group_is_refused(server, version):
    with connect(server.bootstrap) as c:
        assert join(c, "b", version).error_code is E.group_authorization_failed


def test_sync_heartbeat_leave_without_read_are_refused(server):
    with connect(server.bootstrap) as c:
        sync = c.request(ApiKey.SYNC_GROUP, 5, {"group_id": "b", "generation_id": 1, "member_id": "m",
                                                "group_instance_id": None, "protocol_type": "consumer",
                                                "protocol_name": "range", "assignments": []})
        hb = c.request(ApiKey.HEARTBEAT, 4, {"group_id": "b", "generation_id": 1, "member_id": "m",
                                             "group_instance_id": None})
        assert (sync.error_code, hb.error_code, leave(c, "b").error_code) == (E.group_authorization_failed,) * 3
        assert c.request(ApiKey.LEAVE_GROUP, 0, {"group_id": "b", "member_id": "m"}).error_code \
            is E.group_authorization_failed


def test_read_acl_for_another_host_does_not_apply(server):
    with connect(server.bootstrap) as c:
        assert join(c, "h").error_code is E.group_authorization_failed
        assert join(c, "h-local").error_code is E.member_id_required  # allowed: the join goes on


@pytest.mark.parametrize("version", [2, 9])
def test_commit_into_a_group_without_read_fails_on_every_partition_and_changes_nothing(server, version):
    with connect(server.bootstrap) as c:
        for group in ("b", "peek"):
            assert commit(c, group, "t", "nope", version=version) == {("t", 0): E.group_authorization_failed,
                                                                      ("nope", 0): E.group_authorization_failed}
        peek = fetch_offsets(c, "peek", ["t"])  # DESCRIBE on peek: its offsets are readable
    assert peek.topics[0].partitions[0].committed_offset == 5


def test_describe_without_read_finds_the_coordinator_but_cannot_join(server):
    with connect(server.bootstrap) as c:
        found = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "peek", "key_type": 0})
        assert (found.error_code, join(c, "peek").error_code) == (E.none, E.group_authorization_failed)


def test_commit_to_unknown_topic_without_read_hides_its_existence(server):
    with connect(server.bootstrap) as c:
        assert commit(c, "a", "no-such-topic") == {("no-such-topic", 0): E.topic_authorization_failed}


@pytest.mark.parametrize("version", [1, 7, 8])
def test_offset_fetch_of_another_group_is_refused_where_the_version_puts_group_errors(server, version):
    with connect(server.bootstrap) as c:
        r = fetch_offsets(c, "b", ["t"], version)
    if version == 1:
        assert [p.error_code for t in r.topics for p in t.partitions] == [E.group_authorization_failed]
    else:
        assert r.error_code is E.group_authorization_failed and not r.topics


def test_offset_fetch_answers_undescribable_topics_29_and_drops_them_from_all(server):
    with connect(server.bootstrap) as c:
        member, generation = join_and_sync(c, "a")
        commit(c, "a", "t", member=member, generation=generation)
        named = fetch_offsets(c, "a", ["t", "u"])
        every = fetch_offsets(c, "a", None)
        leave(c, "a", member)
    assert {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code) for t in named.topics} == {
        "t": (5, E.none), "u": (-1, E.topic_authorization_failed)}
    assert [t.name for t in every.topics] == ["t"]


def test_describe_groups_refuses_another_group_and_reports_operations(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["a", "b"], "include_authorized_operations": True})
    a, b = r.groups
    assert a.error_code is E.none and a.authorized_operations == (1 << READ) | (1 << DESCRIBE)
    assert (b.error_code, b.group_state, b.members, b.authorized_operations) == (
        E.group_authorization_failed, "", (), -(2**31))


def test_list_groups_lists_only_describable_groups(server):
    with connect(server.bootstrap) as c:
        member, _ = join_and_sync(c, "a")
        r = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        leave(c, "a", member)
    listed = {g.group_id for g in r.groups}
    # a (READ) and peek (DESCRIBE) are describable, b is not; DELETE on del-keep also implies DESCRIBE
    assert r.error_code is E.none and {"a", "peek", "del-keep"} <= listed and "b" not in listed


def test_delete_groups_needs_delete_and_deny_wins(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["b", "del-keep", "del-x"]})
    assert {x.group_id: x.error_code for x in r.results} == {
        "b": E.group_authorization_failed, "del-keep": E.group_authorization_failed, "del-x": E.none}


def test_offset_delete_needs_delete_on_the_group(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": "b", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert r.error_code is E.group_authorization_failed and not r.topics


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_needs_describe_on_the_group(server, version):
    with connect(server.bootstrap) as c:
        def find(key):
            r = c.request(ApiKey.FIND_COORDINATOR, version, {"key": key, "key_type": 0, "coordinator_keys": [key]})
            return (r.coordinators[0] if version >= 4 else r).error_code
        assert (find("a"), find("b")) == (E.none, E.group_authorization_failed)
        r = c.request(ApiKey.FIND_COORDINATOR, version, {"key": "tx", "key_type": 1, "coordinator_keys": ["tx"]})
        assert (r.coordinators[0] if version >= 4 else r).error_code is E.transactional_id_authorization_failed


# --- KIP-848 ---------------------------------------------------------------------------------------

def heartbeat848(c: WireClient, group: str, topics=None, regex=None, member: str | None = None, epoch: int = 0):
    return c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member or uuid.uuid4().hex[:22], "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout": MINUTE, "subscribed_topic_names": topics,
        "subscribed_topic_regex": regex, "server_assignor": None, "topic_partitions": []})


def test_consumer_group_heartbeat_checks_group_then_every_topic(server):
    with connect(server.bootstrap) as c:
        assert heartbeat848(c, "b", ["t"]).error_code is E.group_authorization_failed
        r = heartbeat848(c, "c848-names", ["t", "u"])
        assert r.error_code is E.topic_authorization_failed and r.member_id is None
        ok = heartbeat848(c, "c848-names", ["t"])
        assert ok.error_code is E.none and ok.member_epoch == 1


def share_heartbeat(c: WireClient, group: str, member: str, epoch: int, topics=None):
    return c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": epoch,
                                                       "rack_id": None, "subscribed_topic_names": topics})


def test_share_group_apis_check_the_group_then_every_topic(server):
    """Kafka's table: Read on the group, Describe on every subscribed topic (ShareGroupHeartbeat);
    Describe on the group (ShareGroupDescribe); Delete on the group (DeleteGroups)."""
    with connect(server.bootstrap) as c:
        assert share_heartbeat(c, "b", "m", 0, ["t"]).error_code is E.group_authorization_failed
        r = share_heartbeat(c, "share-x", "m", 0, ["t", "u"])
        assert r.error_code is E.topic_authorization_failed and r.member_id is None
        ok = share_heartbeat(c, "share-x", "m", 0, ["t"])
        assert (ok.error_code, ok.member_epoch) == (E.none, 1)
        described = c.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["share-x", "b"],
                                                               "include_authorized_operations": False}).groups
        assert [(g.group_id, g.error_code) for g in described] == [("share-x", E.none),
                                                                    ("b", E.group_authorization_failed)]
        assert share_heartbeat(c, "share-x", "m", -1).error_code is E.none
        deleted = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["share-x"]}).results
        assert [r.error_code for r in deleted] == [E.group_authorization_failed]


def test_share_group_offset_apis_check_the_group_then_every_topic(server):
    """Kafka's table: Describe on the group and on each topic (DescribeShareGroupOffsets), Read on the
    group and on each topic (AlterShareGroupOffsets), Delete on the group (DeleteShareGroupOffsets)."""
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
            {"group_id": g, "topics": [{"topic_name": t, "partitions": [0]} for t in ("t", "u")]}
            for g in ("share-y", "b")]})
        assert [(g.group_id, g.error_code) for g in r.groups] == [("share-y", E.none),
                                                                   ("b", E.group_authorization_failed)]
        assert [(t.topic_name, t.partitions[0].error_code) for t in r.groups[0].topics] == [
            ("t", E.none), ("u", E.topic_authorization_failed)]
        r = c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "share-y", "topics": [
            {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]} for t in ("t", "u")]})
        assert [(t.topic_name, t.partitions[0].error_code) for t in r.responses] == [
            ("t", E.none), ("u", E.topic_authorization_failed)]
        r = c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "peek", "topics": []})
        assert r.error_code is E.group_authorization_failed  # Describe only
        r = c.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "share-y", "topics": [{"topic_name": "t"}]})
        assert r.error_code is E.group_authorization_failed
        # what a group's coordinator sends a share-partition's leader: brokers only (CLUSTER_ACTION)
        tid = uuid.uuid4()
        for api, version, fields in ((ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {"state_epoch": 0, "start_offset": 0}),
                                     (ApiKey.DELETE_SHARE_GROUP_STATE, 0, {}),
                                     (ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {"leader_epoch": -1})):
            r = c.request(api, version, {"group_id": "share-y", "topics": [
                {"topic_id": tid, "partitions": [{"partition": 0, **fields}]}]})
            assert [(x.topic_id, [p.error_code for p in x.partitions]) for x in r.results] == [
                (tid, [E.cluster_authorization_failed])], api


def test_a_regex_resolves_to_the_topics_the_member_may_describe(server):
    with connect(server.bootstrap) as c:
        r = heartbeat848(c, "c848-regex", regex="t|u|w")
        member = r.member_id
        # the regex resolves after the heartbeat that brought it (spec kip848 §6.2): heartbeat on
        # until the assignment arrives
        deadline = time.monotonic() + 30
        while r.error_code is E.none and not r.assignment.topic_partitions and time.monotonic() < deadline:
            time.sleep(0.05)
            r = heartbeat848(c, "c848-regex", member=member, epoch=r.member_epoch)
        ids = {t.topic_id: t.name for t in metadata(c, ["t", "w"]).topics}
        described = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["c848-regex"],
                                                                  "include_authorized_operations": False})
    assert r.error_code is E.none
    assert {ids[tp.topic_id] for tp in r.assignment.topic_partitions} == {"t", "w"}  # u: not describable
    assert described.groups[0].error_code is E.none


def test_consumer_group_describe_refuses_another_group(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["b"], "include_authorized_operations": True})
    assert r.groups[0].error_code is E.group_authorization_failed and r.groups[0].authorized_operations == -(2**31)


# --- topics ----------------------------------------------------------------------------------------

def metadata(c: WireClient, names, version: int = 12, auto_create: bool = True):
    topics = None if names is None else [{"name": n, "topic_id": None} for n in names]
    return c.request(ApiKey.METADATA, version, {"topics": topics, "allow_auto_topic_creation": auto_create,
                                                "include_topic_authorized_operations": False})


def test_metadata_lists_only_describable_topics(server):
    with connect(server.bootstrap) as c:
        every = metadata(c, None)
        named = metadata(c, ["t", "u", "not-there"])
    assert {t.name for t in every.topics} == {"t", "w"}
    assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
        ("t", E.none, 2), ("u", E.topic_authorization_failed, 0), ("not-there", E.topic_authorization_failed, 0)]


def authorized_operations(bootstrap: str) -> tuple[int, int, int]:
    """(topic t, cluster, group a) authorized operations as Metadata v10 and DescribeGroups report them."""
    with connect(bootstrap) as c:
        m = c.request(ApiKey.METADATA, 10, {"topics": [{"name": "t", "topic_id": None}], "allow_auto_topic_creation": False,
                                            "include_cluster_authorized_operations": True,
                                            "include_topic_authorized_operations": True})
        g = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["a"], "include_authorized_operations": True})
    return m.topics[0].topic_authorized_operations, m.cluster_authorized_operations, g.groups[0].authorized_operations


def test_authorized_operations_are_what_the_principal_may_do(server):
    assert authorized_operations(server.bootstrap) == ((1 << READ) | (1 << DESCRIBE), 0, (1 << READ) | (1 << DESCRIBE))


def test_replica_fetch_needs_cluster_action(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.FETCH, 12, {
            "replica_id": 1, "max_wait": datetime.timedelta(0), "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "", "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    assert r.responses[0].partitions[0].error_code is E.topic_authorization_failed


def test_metadata_auto_create_needs_create(server):
    with connect(server.bootstrap) as c:
        r = metadata(c, ["auto-no", "auto-ok-1"])
        again = metadata(c, None)
    assert [(t.name, t.error_code) for t in r.topics] == [("auto-no", E.topic_authorization_failed),
                                                          ("auto-ok-1", E.none)]
    assert "auto-ok-1" in {t.name for t in again.topics} and "auto-no" not in {t.name for t in again.topics}


def test_create_delete_and_grow_topics_need_their_operations(server):
    with connect(server.bootstrap) as c:
        created = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": "new", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": MINUTE, "validate_only": False})
        deleted = c.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "t", "topic_id": uuid.UUID(int=0)},
                                                                  {"name": "gone", "topic_id": uuid.UUID(int=0)}],
                                                       "timeout": MINUTE})
        grown = c.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "t", "count": 4, "assignments": None}],
                                                        "timeout": MINUTE, "validate_only": False})
        after = metadata(c, ["t"])
    assert (created.topics[0].error_code, created.topics[0].error_message) == (E.topic_authorization_failed,
                                                                               "Authorization failed.")
    assert [(r.name, r.error_code) for r in deleted.responses] == [("t", E.topic_authorization_failed),
                                                                    ("gone", E.topic_authorization_failed)]
    assert grown.results[0].error_code is E.topic_authorization_failed
    assert len(after.topics[0].partitions) == 2  # nothing changed


def test_create_topics_with_create_only_hides_the_configs(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": "auto-ok-created", "num_partitions": 3, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout": MINUTE, "validate_only": False})
        after = metadata(c, ["auto-ok-created"])
    t = r.topics[0]
    assert (t.error_code, t.topic_config_error_code, t.num_partitions, t.configs) == (
        E.none, E.topic_authorization_failed, -1, None)
    assert len(after.topics[0].partitions) == 3


def test_produce_fetch_and_list_offsets_check_topics(server):
    with connect(server.bootstrap) as c:
        produced = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": 1, "timeout": MINUTE,
                                                 "topic_data": [{"name": n, "partition_data": [
                                                     {"index": 0, "records": None}]} for n in ("w", "t")]})
        fetched = c.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "", "topics": [{"topic": n, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]} for n in ("t", "w")]})
        listed = c.request(ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": n, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
            for n in ("t", "u")]})
        producer = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                          "transaction_timeout": MINUTE, "producer_id": -1,
                                                          "producer_epoch": -1})
    by = lambda topics, name, part: {getattr(t, name): getattr(t, part)[0].error_code for t in topics}  # noqa: E731
    assert by(produced.responses, "name", "partition_responses") == {
        "w": E.invalid_record, "t": E.topic_authorization_failed}  # w: allowed, then its null record set refused
    assert by(fetched.responses, "topic", "partitions") == {"t": E.none, "w": E.topic_authorization_failed}
    assert by(listed.topics, "name", "partitions") == {"t": E.none, "u": E.topic_authorization_failed}
    assert producer.error_code is E.none  # idempotent: WRITE on some topic (w) is enough


def test_describe_producers_needs_read_on_the_topic(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": n, "partition_indexes": [0]}
                                                                for n in ("t", "w")]})
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {
        "t": E.none, "w": E.topic_authorization_failed}


# --- the ACL APIs ------------------------------------------------------------------------------------

def describe_configs(c: WireClient, resource_type: int, name: str):
    r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": resource_type, "resource_name": name,
                                                              "configuration_keys": None}],
                                               "include_synonyms": False, "include_documentation": False})
    return r.results[0]


def test_config_apis_check_describe_and_alter_configs_on_their_resource(server):
    """DescribeConfigs needs DESCRIBE_CONFIGS, Incremental/AlterConfigs ALTER_CONFIGS, on the group,
    the topic, or (a broker's configs) the cluster, as Kafka's ConfigAdminManager."""
    config_group, config_topic, config_broker = 32, 2, 4
    with connect(server.bootstrap) as c:
        assert describe_configs(c, config_group, "cfg").error_code is E.none
        assert describe_configs(c, config_group, "a").error_code is E.group_authorization_failed  # READ is not enough
        assert describe_configs(c, config_topic, "t").error_code is E.topic_authorization_failed
        assert describe_configs(c, config_broker, "").error_code is E.cluster_authorization_failed

        def alter(group: str):
            r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": config_group, "resource_name": group, "configs": [
                    {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]}],
                "validate_only": True})
            return r.responses[0].error_code
        assert alter("cfg") is E.none
        assert alter("peek") is E.group_authorization_failed

        def alter_topic(topic: str):
            r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": config_topic, "resource_name": topic, "configs": [
                    {"name": "cleanup.policy", "config_operation": 0, "value": "compact"}]}], "validate_only": False})
            return r.responses[0].error_code
        assert alter_topic("u") is E.none
        assert alter_topic("t") is E.topic_authorization_failed  # READ is not enough
        described = describe_configs(c, config_topic, "u")
        assert described.error_code is E.none
        assert {x.name: x.value for x in described.configs}["cleanup.policy"] == "compact"


def test_the_acl_apis_need_describe_and_alter_on_the_cluster(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_ACLS, 3, ANY_FILTER)
    assert (r.error_code, r.resources) == (E.cluster_authorization_failed, ())


def test_create_and_delete_acls_need_alter_on_the_cluster(server):
    assert create_acls(server.bootstrap, acl(GROUP, "b", READ)) == [E.cluster_authorization_failed]
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.DELETE_ACLS, 3, {"filters": [ANY_FILTER]})
        assert join(c, "a").error_code is E.member_id_required  # every ACL still there
    assert r.filter_results[0].error_code is E.cluster_authorization_failed


# --- denials are counted and logged ---------------------------------------------------------------------

def test_denials_are_counted_by_api_and_resource_type_and_logged_once_per_kind(server):
    with connect(server.bootstrap) as c:
        for _ in range(20):
            assert join(c, "b").error_code is E.group_authorization_failed
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    count = re.search(r'groupd_authorization_denied_total\{api="join_group",resource_type="GROUP"\} (\S+)', text)
    assert count and float(count.group(1)) >= 20
    lines = [line for line in server.log().splitlines()
             if "authorization denied" in line and "api=JOIN_GROUP" in line and "resource=GROUP:b" in line]
    assert lines and len(lines) < 20 and "principal=User:ANONYMOUS host=127.0.0.1 operation=READ" in lines[0]


# --- the authorizer off ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp("no-acls")), "topics=t:1").start()
    yield s
    assert s.stop() == 0, s.log()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(open_server):
    assert create_acls(open_server.bootstrap, acl(GROUP, "g", READ)) == [E.security_disabled]
    with connect(open_server.bootstrap) as c:
        described = c.request(ApiKey.DESCRIBE_ACLS, 1, ANY_FILTER)
        deleted = c.request(ApiKey.DELETE_ACLS, 2, {"filters": [ANY_FILTER]})
        versions = {k.api_key: (k.min_version, k.max_version)
                    for k in c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                                "client_software_version": "1"}).api_keys}
    assert described.error_code is E.security_disabled and described.error_message == "No Authorizer is configured."
    assert deleted.filter_results[0].error_code is E.security_disabled
    assert {k: versions[k] for k in (29, 30, 31)} == {29: (1, 3), 30: (1, 3), 31: (1, 3)}
    assert authorized_operations(open_server.bootstrap)[:2] == (3576, 8096)  # everything (spec §5.8)


def test_create_acls_refuses_invalid_entries_alone_and_the_rest_survive_a_restart(tmp_path):
    s = start_secured(str(tmp_path), super_users=(ANONYMOUS,))
    try:
        errors = create_acls(s.bootstrap, acl(GROUP, "g", READ), acl(CLUSTER, "other", ALTER),
                             acl(GROUP, "g", READ, pattern=MATCH), acl(GROUP, "g", READ, principal="nocolon"),
                             acl(GROUP, "g", READ), acl(TOPIC, "p-", WRITE, DENY, PREFIXED, host="10.0.0.1"))
        with connect(s.bootstrap) as c:
            bad = c.request(ApiKey.DESCRIBE_ACLS, 2, {**ANY_FILTER, "resource_type_filter": 0})
        s.stop()
        s.start()
        with connect(s.bootstrap) as c:
            after = c.request(ApiKey.DESCRIBE_ACLS, 3, ANY_FILTER)
            deleted = c.request(ApiKey.DELETE_ACLS, 3, {"filters": [{**ANY_FILTER, "resource_type_filter": TOPIC}]})
        s.stop()
        s.start()
        with connect(s.bootstrap) as c:
            last = c.request(ApiKey.DESCRIBE_ACLS, 3, ANY_FILTER)
    finally:
        assert s.stop() == 0, s.log()
    assert errors == [E.none, E.invalid_request, E.invalid_request, E.invalid_request, E.none, E.none]
    assert bad.error_code is E.invalid_request
    assert {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in after.resources for a in r.acls} == {(GROUP, "g", LITERAL, ANONYMOUS, "*", READ, ALLOW),
                                                          (TOPIC, "p-", PREFIXED, ANONYMOUS, "10.0.0.1", WRITE, DENY)}
    assert [(m.resource_name, m.permission_type) for m in deleted.filter_results[0].matching_acls] == [("p-", DENY)]
    assert [(r.resource_type, r.resource_name) for r in last.resources] == [(GROUP, "g")]


# --- the CLI ---------------------------------------------------------------------------------------------

def test_cli_adds_lists_and_removes_acls(tmp_path):
    s = start_secured(str(tmp_path), super_users=(ANONYMOUS,))

    def groupd(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "groupd.coordinator", "acls", *args, "--bootstrap", s.bootstrap],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)

    try:
        added = groupd("add", "--group", "orders", "--principal", "User:alice", "--operation", "read",
                       "--operation", "DESCRIBE")
        denied = groupd("add", "--topic", "in-", "--prefixed", "--principal", "User:*", "--operation", "write",
                        "--deny", "--host", "10.0.0.1", "--json")
        listed = groupd("list", "--group", "orders", "--json")
        removed = groupd("remove", "--group", "orders", "--operation", "READ")
        left = groupd("list", "--json")
        bad = groupd("add", "--cluster", "--principal", "nocolon", "--operation", "alter")
    finally:
        assert s.stop() == 0, s.log()
    assert added.returncode == 0 and "2 ACLs created" in added.stdout, added.stderr
    assert json.loads(denied.stdout) == [{"resource_type": "TOPIC", "name": "in-", "pattern": "PREFIXED",
                                          "principal": "User:*", "host": "10.0.0.1", "operation": "WRITE",
                                          "permission": "DENY"}]
    assert [a["operation"] for a in json.loads(listed.stdout)] == ["READ", "DESCRIBE"]
    assert removed.returncode == 0 and "1 ACL deleted" in removed.stdout
    assert {(a["name"], a["operation"]) for a in json.loads(left.stdout)} == {("orders", "DESCRIBE"), ("in-", "WRITE")}
    assert bad.returncode == 1 and bad.stderr.startswith("groupd: CreateAcls: INVALID_REQUEST") and \
        len(bad.stderr.strip().splitlines()) == 1
