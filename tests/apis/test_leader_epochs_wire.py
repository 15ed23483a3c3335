"""Leader epochs over the wire against the real server, on both records planes: every data partition
is at epoch 0 (as a fresh Kafka topic) in Metadata, DescribeTopicPartitions and ListOffsets; Produce
stamps its batches with it; Fetch and ListOffsets check the client's current leader epoch
(FENCED_LEADER_EPOCH older, UNKNOWN_LEADER_EPOCH newer, -1 no check; Fetch: no negative one is
checked); OffsetForLeaderEpoch (23)
v2–v4 answers the epoch's end offset as Kafka does; on disk the history is the partition's
leader-epoch-checkpoint and outlives a restart."""

from __future__ import annotations

import os
import struct
import uuid

import pytest

from groupd.coordinator.apis import SUPPORTED_VERSIONS
from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from tests.storage.test_records_plane import MS, batch, fetch_request, list_offset, produce
from tests.support.process import GroupdProcess, WireClient

EARLIEST, LATEST = -2, -1


def create_topic(c: WireClient, partitions: int = 2) -> str:
    name = f"le-{uuid.uuid4().hex[:10]}"
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout": 5000 * MS, "validate_only": False})
    assert r.topics[0].error_code is E.none
    return name


def end_offsets(c: WireClient, topic: str, asks: list[tuple[int, int, int]], version: int = 4,
                replica_id: int = -1) -> list[tuple[int, E, int, int]]:
    """OffsetForLeaderEpoch for (partition, current leader epoch, leader epoch) →
    [(partition, error, leader epoch, end offset)]."""
    r = c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, {"replica_id": replica_id, "topics": [
        {"topic": topic, "partitions": [{"partition": p, "current_leader_epoch": cur, "leader_epoch": e}
                                        for p, cur, e in asks]}]})
    (t,) = r.topics
    assert t.topic == topic
    return [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions]


def fetch_at(c: WireClient, topic: str, offset: int, current_epoch: int, version: int = 12):
    request = fetch_request([(topic, 0, offset)])
    request["topics"][0]["partitions"][0]["current_leader_epoch"] = current_epoch
    return c.request(ApiKey.FETCH, version, request).responses[0].partitions[0]


def list_offset_at(c: WireClient, topic: str, timestamp: int, current_epoch: int):
    r = c.request(ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": current_epoch,
                                        "timestamp": timestamp}]}]})
    return r.topics[0].partitions[0]


@pytest.fixture(scope="module", params=["disk", "memory"])
def server(request, tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp(f"le-{request.param}")), f"records.plane={request.param}").start()
    yield s
    assert s.stop() == 0, s.log()


def test_api_versions_advertises_offset_for_leader_epoch_v2_to_v4():
    assert SUPPORTED_VERSIONS[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (2, 4)


def test_metadata_and_describe_topic_partitions_report_epoch_0(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c, 3)
        r = c.request(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
        assert [p.leader_epoch for p in r.topics[0].partitions] == [0, 0, 0]
        r = c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": topic}],
                                                             "response_partition_limit": 100, "cursor": None})
        assert [p.leader_epoch for p in r.topics[0].partitions] == [0, 0, 0]


def test_produced_batches_are_stamped_with_the_epoch_and_list_offsets_reports_it(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        assert list_offset(c, topic, 0, LATEST).leader_epoch == 0  # empty: epoch 0 from offset 0
        for _ in range(2):
            assert produce(c, topic, 0, batch(3)).error_code is E.none
        records = fetch_at(c, topic, 0, -1).records
        assert [struct.unpack_from(">i", records, at + 12)[0] for at in (0, len(records) // 2)] == [0, 0]
        for timestamp in (EARLIEST, LATEST):
            found = list_offset(c, topic, 0, timestamp)
            assert (found.error_code, found.leader_epoch) == (E.none, 0)
        assert list_offset(c, topic, 0, 0).leader_epoch == 0  # by time: the found record's epoch
        missing = list_offset(c, topic, 0, 2**62)
        assert (missing.offset, missing.leader_epoch) == (-1, -1)  # nothing found: no epoch


def test_fetch_and_list_offsets_check_the_current_leader_epoch(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        assert produce(c, topic, 0, batch(2)).error_code is E.none
        assert fetch_at(c, topic, 0, 0).error_code is E.none
        assert fetch_at(c, topic, 0, -1).error_code is E.none  # -1: no check
        newer = fetch_at(c, topic, 0, 1)
        assert (newer.error_code, newer.high_watermark, newer.records) == (E.unknown_leader_epoch, -1, b"")
        assert fetch_at(c, topic, 0, -2).error_code is E.none  # Fetch reads any negative epoch as none
        assert fetch_at(c, topic, 0, 5, version=8).error_code is E.none  # before v9 no epoch is sent
        assert list_offset_at(c, topic, LATEST, 0).offset == 2
        assert list_offset_at(c, topic, LATEST, 1).error_code is E.unknown_leader_epoch
        assert list_offset_at(c, topic, LATEST, -2).error_code is E.fenced_leader_epoch


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_answers_as_kafka(server, version):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        assert produce(c, topic, 0, batch(5)).error_code is E.none
        assert end_offsets(c, topic, [(0, -1, 0), (0, 0, 0), (1, -1, 0)], version) == [
            (0, E.none, 0, 5), (0, E.none, 0, 5), (1, E.none, 0, 0)]  # the current epoch ends at the log end
        assert end_offsets(c, topic, [(0, -1, 1), (0, -1, -1)], version) == [
            (0, E.none, -1, -1), (0, E.none, -1, -1)]  # an epoch beyond the latest, or none: undefined
        assert end_offsets(c, topic, [(0, 1, 0), (0, -2, 0)], version) == [
            (0, E.unknown_leader_epoch, -1, -1), (0, E.fenced_leader_epoch, -1, -1)]
        assert end_offsets(c, topic, [(2, -1, 0)], version) == [(2, E.unknown_topic_or_partition, -1, -1)]
        assert end_offsets(c, "le-missing", [(0, -1, 0)], version) == [(0, E.unknown_topic_or_partition, -1, -1)]


def test_a_replica_id_is_answered_as_a_consumer(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        assert end_offsets(c, topic, [(0, -1, 0)], 3, replica_id=1) == [(0, E.none, 0, 0)]


def test_the_disk_history_is_kafkas_file_and_outlives_a_restart(tmp_path):
    s = GroupdProcess(str(tmp_path), "records.plane=disk").start()
    try:
        with WireClient(s.bootstrap) as c:
            topic = create_topic(c, 1)
            assert produce(c, topic, 0, batch(4)).error_code is E.none
        assert s.stop() == 0, s.log()
        checkpoint = os.path.join(str(tmp_path), f"{topic}-0", "leader-epoch-checkpoint")
        with open(checkpoint) as f:
            assert f.read() == "0\n1\n0 0\n"
        s.start()
        with WireClient(s.bootstrap) as c:
            assert end_offsets(c, topic, [(0, 0, 0)]) == [(0, E.none, 0, 4)]
            assert produce(c, topic, 0, batch(1)).error_code is E.none
            assert end_offsets(c, topic, [(0, 0, 0)]) == [(0, E.none, 0, 5)]
        with open(checkpoint) as f:
            assert f.read() == "0\n1\n0 0\n"
    finally:
        assert s.stop() == 0, s.log()


def test_a_damaged_history_keeps_the_partition_closed_with_one_log_line(tmp_path):
    s = GroupdProcess(str(tmp_path), "records.plane=disk").start()
    try:
        with WireClient(s.bootstrap) as c:
            topic = create_topic(c, 1)
            assert produce(c, topic, 0, batch(1)).error_code is E.none
        assert s.stop() == 0, s.log()
        with open(os.path.join(str(tmp_path), f"{topic}-0", "leader-epoch-checkpoint"), "w") as f:
            f.write("0\n2\n0 0\n")
        s.start()
        with WireClient(s.bootstrap) as c:
            assert end_offsets(c, topic, [(0, -1, 0)]) == [(0, E.kafka_storage_error, -1, -1)]
            assert produce(c, topic, 0, batch(1)).error_code is E.kafka_storage_error
        assert s.log().count("leader-epoch-checkpoint is damaged") == 1
        assert "Traceback" not in s.log()
    finally:
        assert s.stop() == 0, s.log()



def test_offset_for_leader_epoch_needs_describe_on_the_topic_or_cluster_action(tmp_path):
    from groupd.coordinator.security.acls import AclOperation
    from tests.support.authz import ANONYMOUS, CLUSTER, DESCRIBE, TOPIC, acl, create_acls, start_secured

    def secured(*creations) -> GroupdProcess:
        """The server with `creations` added by a super user, restarted with ANONYMOUS held to its ACLs."""
        seed = start_secured(str(tmp_path), "topics=allowed:1,denied:1", super_users=(ANONYMOUS,))
        try:
            assert create_acls(seed.bootstrap, *creations) == [E.none] * len(creations)
        finally:
            assert seed.stop() == 0, seed.log()
        return start_secured(str(tmp_path), port=seed.port)

    s = secured(acl(TOPIC, "allowed", DESCRIBE))
    try:
        with WireClient(s.bootstrap) as c:
            assert end_offsets(c, "allowed", [(0, -1, 0)]) == [(0, E.none, 0, 0)]
            assert end_offsets(c, "denied", [(0, -1, 0)]) == [(0, E.topic_authorization_failed, -1, -1)]
    finally:
        assert s.stop() == 0, s.log()
    s = secured(acl(CLUSTER, "kafka-cluster", int(AclOperation.CLUSTER_ACTION)))
    try:
        with WireClient(s.bootstrap) as c:  # a replica's right answers every topic
            assert end_offsets(c, "denied", [(0, -1, 0)], 3, replica_id=1) == [(0, E.none, 0, 0)]
    finally:
        assert s.stop() == 0, s.log()


def test_workers_report_epoch_0_and_only_the_leading_worker_answers(tmp_path):
    """Under --workers a partition's worker never changes (p mod N): epoch 0 everywhere, and the other
    worker answers OffsetForLeaderEpoch NOT_LEADER_OR_FOLLOWER, as a broker without the replica."""
    from tests.support.process import free_ports

    s = GroupdProcess(str(tmp_path), "workers=2", "topics=t:2", port=free_ports(2), ready="workers ready").start(60)
    try:
        for port in (s.port, s.port + 1):
            with WireClient(f"127.0.0.1:{port}") as c:
                r = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "t", "topic_id": None}],
                                                     "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False})
                assert [(p.leader_id, p.leader_epoch) for p in r.topics[0].partitions] == [(1, 0), (2, 0)]
                mine = port - s.port
                assert end_offsets(c, "t", [(mine, -1, 0), (1 - mine, -1, 0)]) == [
                    (mine, E.none, 0, 0), (1 - mine, E.not_leader_or_follower, -1, -1)]
    finally:
        assert s.stop() == 0, s.log()
