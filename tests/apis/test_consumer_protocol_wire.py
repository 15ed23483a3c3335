"""The consumer group protocol's APIs on the wire against the real server (spec §1, §7.2): a
member joins with ConsumerGroupHeartbeat v1, then the classic admin APIs see its group as Kafka's
do; with `consumer` left out of group.coordinator.rebalance.protocols, 68/69 are not advertised."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
import uuid

import pytest

from groupd.coordinator.apis.consumer_group_heartbeat import _answer, _response
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import Encoded, encode_response
from tests.support.process import ROOT, GroupdProcess, WireClient, groupd_fixture

server = groupd_fixture("topics=t3:3")


def join(c: WireClient, group: str, member_id: str, names=("t3",), regex: str | None = None):
    return c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout": datetime.timedelta(seconds=30), "subscribed_topic_names": list(names),
        "subscribed_topic_regex": regex, "server_assignor": None, "topic_partitions": []})


def test_a_join_gets_every_partition_by_topic_id(server):
    with WireClient(server.bootstrap) as c:
        r = join(c, "wire-join", "m-1")
        topic_id = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "t3", "topic_id": None}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}).topics[0].topic_id
    assert (r.error_code, r.member_id, r.member_epoch) == (ErrorCode.none, "m-1", 1)
    assert [(tp.topic_id, sorted(tp.partitions)) for tp in r.assignment.topic_partitions] == [(topic_id, [0, 1, 2])]
    assert r.heartbeat_interval == datetime.timedelta(milliseconds=5000)


def test_a_new_regex_is_resolved_after_the_join_and_its_topics_come_in_a_later_heartbeat(server):
    """Spec §6.2: the join that brings a regex is answered at once with nothing for it; the
    resolution runs after it, and a later heartbeat carries the matching topic's partitions."""
    with WireClient(server.bootstrap) as c:
        r = join(c, "wire-regex", "m-1", names=(), regex="t[0-9]")
        assert (r.error_code, [tp.partitions for tp in r.assignment.topic_partitions]) == (ErrorCode.none, [])
        epoch, deadline = r.member_epoch, time.monotonic() + 30
        while time.monotonic() < deadline:
            r = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                "group_id": "wire-regex", "member_id": "m-1", "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=-1),
                "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
                "topic_partitions": None})
            assert r.error_code == ErrorCode.none
            epoch = r.member_epoch
            if r.assignment is not None and r.assignment.topic_partitions:
                break
            time.sleep(0.05)  # a client's heartbeat interval, shortened
    assert [sorted(tp.partitions) for tp in r.assignment.topic_partitions] == [[0, 1, 2]]
    assert epoch == 2  # the resolution's result moved the group epoch


def test_a_regex_matching_the_offsets_topic_gets_its_partitions(server):
    """Kafka resolves a regex against every topic of its metadata image, `__consumer_offsets`
    included, and assigns what matches (franz-go's Test848RegexBrokerResolves relies on it)."""
    with WireClient(server.bootstrap) as c:
        offsets = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "__consumer_offsets", "topic_id": None}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False}).topics[0]
        r = join(c, "wire-regex-internal", "m-1", names=(), regex="__consumer_offsets")
        epoch, deadline = r.member_epoch, time.monotonic() + 30
        while not (r.assignment is not None and r.assignment.topic_partitions) and time.monotonic() < deadline:
            time.sleep(0.05)
            r = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                "group_id": "wire-regex-internal", "member_id": "m-1", "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=-1),
                "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
                "topic_partitions": None})
            assert r.error_code == ErrorCode.none
            epoch = r.member_epoch
    assert offsets.is_internal
    assert [(tp.topic_id, sorted(tp.partitions)) for tp in r.assignment.topic_partitions] == [
        (offsets.topic_id, [p.partition_index for p in offsets.partitions])]


def test_describe_groups_treats_a_consumer_group_as_not_found(server):
    with WireClient(server.bootstrap) as c:
        join(c, "wire-describe", "m-1")
        v6 = c.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["wire-describe"],
                                                    "include_authorized_operations": False}).groups[0]
        v5 = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["wire-describe"],
                                                    "include_authorized_operations": False}).groups[0]
        described = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["wire-describe", "missing"],
                                                                  "include_authorized_operations": False}).groups
    assert (v6.error_code, v6.group_state) == (ErrorCode.group_id_not_found, "Dead")
    assert v6.error_message == "Group wire-describe is not a classic group."
    assert (v5.error_code, v5.group_state) == (ErrorCode.none, "Dead")
    assert (described[0].error_code, described[0].group_state, described[0].group_epoch) == (ErrorCode.none,
                                                                                              "Stable", 1)
    assert [m.member_type for m in described[0].members] == [1]
    assert described[1].error_code == ErrorCode.group_id_not_found


def test_list_groups_v5_filters_by_type_case_insensitively(server):
    with WireClient(server.bootstrap) as c:
        join(c, "wire-list", "m-1")
        consumer = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["CONSUMER"]}).groups
        classic = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]}).groups
    listed = {g.group_id: (g.group_type, g.protocol_type, g.group_state) for g in consumer}
    assert listed["wire-list"] == ("consumer", "consumer", "Stable")
    assert "wire-list" not in {g.group_id for g in classic}


def test_the_consumer_protocol_is_off_without_consumer_in_the_rebalance_protocols(tmp_path):
    s = GroupdProcess(str(tmp_path), "topics=t3:3", "group.coordinator.rebalance.protocols=classic")
    s.start()
    try:
        with WireClient(s.bootstrap) as c:
            keys = {k.api_key for k in c.request(ApiKey.API_VERSIONS, 3, {
                "client_software_name": "wire", "client_software_version": "1"}).api_keys}
            r = join(c, "off", str(uuid.uuid4()))
        assert ApiKey.CONSUMER_GROUP_HEARTBEAT not in keys and ApiKey.JOIN_GROUP in keys
        assert r.error_code == ErrorCode.unsupported_version
    finally:
        s.stop()


def test_metadata_by_topic_id_with_an_empty_name_as_the_java_client_asks(server):
    with WireClient(server.bootstrap) as c:
        by_name = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "t3", "topic_id": None}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False}).topics[0]
        by_id = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "", "topic_id": by_name.topic_id}],
                                                "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False}).topics[0]
    assert (by_id.error_code, by_id.name, len(by_id.partitions)) == (ErrorCode.none, "t3", 3)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_below_v12_answers_by_name_whatever_topic_id_comes_with_it(server, version):
    # Kafka answers topic ids from v12; a v10/v11 response cannot carry the null name of an unknown id
    unknown = uuid.UUID(int=0xFFFF000000)
    with WireClient(server.bootstrap) as c:
        topics = c.request(ApiKey.METADATA, version, {
            "topics": [{"name": "t3", "topic_id": unknown}, {"name": "no-such-topic", "topic_id": unknown}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
            **({"include_cluster_authorized_operations": False} if version == 10 else {})}).topics
    assert [(t.name, t.error_code, len(t.partitions)) for t in topics] == [
        ("t3", ErrorCode.none, 3), ("no-such-topic", ErrorCode.unknown_topic_or_partition, 0)]


def test_groupd_groups_describe_prints_epochs_and_current_and_target_assignments(server):
    with WireClient(server.bootstrap) as c:
        join(c, "wire-cli", "m-1")
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "groups", "describe", "wire-cli",
                          "--bootstrap", server.bootstrap], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ("group wire-cli: consumer group Stable, group epoch 1, assignment epoch 1, "
                        "assignor uniform, 1 member")
    assert lines[2].split() == ["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "EPOCH", "ASSIGNMENT", "TARGET"]
    assert lines[3].split() == ["m-1", "wire-test", "/127.0.0.1", "-", "1", "t3:0,1,2", "t3:0,1,2"]


@pytest.mark.parametrize("version", [0, 1])
def test_a_steady_answer_sent_from_its_cached_bytes_is_the_one_encoded_afresh(version):
    reply = {"error_code": ErrorCode.none, "error_message": None, "member_id": "m-steady", "member_epoch": 7,
             "heartbeat_interval_ms": 5000, "assignment": None}
    cached = _answer(version, reply)
    assert isinstance(cached, Encoded) and _answer(version, dict(reply)) is cached
    assert encode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 42, cached) == \
        encode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 42, _response(version, reply))
    assert not isinstance(_answer(version, {**reply, "assignment": {"topic_partitions": []}}), Encoded)
