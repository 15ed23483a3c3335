"""The cluster-facing APIs of the real server process, spoken to over TCP at every version."""

import datetime
import signal
import socket
import time
import uuid

import pytest

from groupd.coordinator.apis import SUPPORTED_VERSIONS
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.process import WireClient, groupd_fixture

E = ErrorCode
WAIT_100MS = datetime.timedelta(milliseconds=100)


def versions(api: ApiKey):
    lo, hi = SUPPORTED_VERSIONS[api]
    return range(lo, hi + 1)


def metadata_request(version: int, names=None, auto_create=True) -> dict:
    topics = None if names is None else [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
    if version == 0 and topics is None:
        topics = []
    return {"topics": topics, "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


# --- ApiVersions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.API_VERSIONS))
def test_api_versions_advertises_exactly_the_table(groupd, version):
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.API_VERSIONS, version, {"client_software_name": "groupd-tests",
                                                     "client_software_version": "1.0"})
    assert r.error_code is E.none
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys} == SUPPORTED_VERSIONS


def test_api_versions_newer_than_ours_gets_v0_error_35_and_the_table(groupd):
    with WireClient(groupd.bootstrap) as c:
        cid, frame = c.frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "x",
                                                      "client_software_version": "1"})
        frame = frame[:6] + (99).to_bytes(2, "big") + frame[8:]  # claim ApiVersions v99
        c.send_raw(frame)
        from groupd.protocol.codec import decode_response
        got, r = decode_response(ApiKey.API_VERSIONS, 0, c.read_frame())
    assert got == cid and r.error_code is E.unsupported_version
    assert {k.api_key for k in r.api_keys} == set(SUPPORTED_VERSIONS)


def test_api_versions_v3_refuses_invalid_software_name(groupd):
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "bad name!",
                                               "client_software_version": "1"})
    assert r.error_code is E.invalid_request


def test_api_versions_v3_response_carries_the_features_as_tagged_fields(groupd):
    """Header v0 (correlation id only) whatever the version (KIP-511); the body's tagged fields carry
    the finalized transaction.version feature (Kafka sends its features to every client; librdkafka
    2.0.2, kcat's, skips them: tests/clients/test_groups_clients.py)."""
    with WireClient(groupd.bootstrap) as c:
        cid, frame = c.frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "x",
                                                      "client_software_version": "1"})
        c.send_raw(frame)
        raw = c.read_frame()
        r = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    assert raw[:4] == cid.to_bytes(4, "big")
    assert not raw.endswith(b"\x00\x00\x00\x00\x00")  # no longer an empty tag buffer after the throttle time
    assert [(f.name, f.max_version_level) for f in r.finalized_features] == [("transaction.version", 2)]
    assert r.finalized_features_epoch >= 0 and r.supported_features == ()  # v3 leaves out minimum-0 features


# --- Metadata ------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_lists_this_node_as_broker_controller_and_leader(groupd, version):
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.METADATA, version, metadata_request(version, ["t3"]))
    assert [(b.node_id, b.host, b.port) for b in r.brokers] == [(1, "127.0.0.1", groupd.port)]
    if version >= 1:
        assert r.controller_id == 1
    if version >= 2:
        assert r.cluster_id and len(r.cluster_id) == 22
    (topic,) = r.topics
    assert (topic.error_code, topic.name, len(topic.partitions)) == (E.none, "t3", 3)
    for i, p in enumerate(topic.partitions):
        assert (p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) == (i, 1, (1,), (1,))
        if version >= 7:
            assert p.leader_epoch == 0  # a fresh Kafka topic's
    if version >= 10:
        assert topic.topic_id != uuid.UUID(int=0)


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_metadata_auto_creates_requested_topics_without_errors(groupd, version):
    name = f"auto-{version}"
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.METADATA, version, metadata_request(version, [name]))
        all_topics = c.request(ApiKey.METADATA, version, metadata_request(version, None))
    assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [(name, E.none, 1)]
    assert name in {t.name for t in all_topics.topics}


def test_metadata_without_auto_create_reports_unknown_topic(groupd):
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.METADATA, 12, metadata_request(12, ["never-made"], auto_create=False))
        illegal = c.request(ApiKey.METADATA, 12, metadata_request(12, ["bad/name"]))
    assert r.topics[0].error_code is E.unknown_topic_or_partition
    assert illegal.topics[0].error_code is E.invalid_topic_exception


def test_metadata_by_topic_id(groupd):
    with WireClient(groupd.bootstrap) as c:
        t3 = c.request(ApiKey.METADATA, 12, metadata_request(12, ["t3"])).topics[0]
        r = c.request(ApiKey.METADATA, 12, {**metadata_request(12),
                                            "topics": [{"name": None, "topic_id": t3.topic_id}]})
        unknown = c.request(ApiKey.METADATA, 12, {**metadata_request(12),
                                                  "topics": [{"name": None, "topic_id": uuid.uuid4()}]})
    assert (r.topics[0].name, len(r.topics[0].partitions)) == ("t3", 3)
    assert unknown.topics[0].error_code is E.unknown_topic_id


def test_catalog_topic_ids_and_cluster_id_survive_a_restart(start_groupd, tmp_path):
    server = start_groupd("topics=kept:2", data_dir=tmp_path / "d")
    with WireClient(server.bootstrap) as c:
        c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "made", "num_partitions": 5, "replication_factor": 1,
                                                        "assignments": [], "configs": []}],
                                            "timeout": datetime.timedelta(seconds=5), "validate_only": False})
        before = c.request(ApiKey.METADATA, 12, metadata_request(12, None))
    server.stop()
    server.start()
    with WireClient(server.bootstrap) as c:
        after = c.request(ApiKey.METADATA, 12, metadata_request(12, None))
    assert after.cluster_id == before.cluster_id
    assert {(t.name, t.topic_id, len(t.partitions)) for t in after.topics} == \
        {(t.name, t.topic_id, len(t.partitions)) for t in before.topics}
    assert {t.name for t in after.topics} == {"kept", "made", "__consumer_offsets"}


@pytest.mark.parametrize("version", [0, 1, 9, 12])
def test_all_topics_metadata_lists_consumer_offsets_as_internal(groupd, version):
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.METADATA, version, metadata_request(version, None))
        again = c.request(ApiKey.METADATA, version, metadata_request(version, None))
    topics = {t.name: t for t in r.topics}
    internal = topics["__consumer_offsets"]
    assert internal.error_code is E.none and len(internal.partitions) == 50
    assert all((p.partition_index, p.leader_id, p.replica_nodes) == (i, 1, (1,))
               for i, p in enumerate(internal.partitions))
    if version >= 1:
        assert internal.is_internal and not any(t.is_internal for n, t in topics.items() if n != internal.name)
    if version >= 10:
        assert internal.topic_id != uuid.UUID(int=0)
        assert {t.name: t.topic_id for t in again.topics}["__consumer_offsets"] == internal.topic_id


def test_consumer_offsets_by_name_and_id_is_never_auto_created_as_a_topic(groupd):
    with WireClient(groupd.bootstrap) as c:
        (by_name,) = c.request(ApiKey.METADATA, 12, metadata_request(12, ["__consumer_offsets"])).topics
        (by_id,) = c.request(ApiKey.METADATA, 12, {**metadata_request(12), "topics": [
            {"name": None, "topic_id": by_name.topic_id}]}).topics
        created = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": "__consumer_offsets", "num_partitions": 3, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout": datetime.timedelta(seconds=5), "validate_only": False})
        listed = c.request(ApiKey.METADATA, 12, metadata_request(12, None)).topics
    assert (by_name.error_code, by_name.is_internal, len(by_name.partitions)) == (E.none, True, 50)
    assert (by_id.name, by_id.is_internal, len(by_id.partitions)) == ("__consumer_offsets", True, 50)
    assert created.topics[0].error_code is E.topic_already_exists
    assert [t.name for t in listed].count("__consumer_offsets") == 1


def test_consumer_offsets_refuses_produce_and_lists_its_log_offsets(start_groupd):
    server = start_groupd("offsets.topic.num.partitions=3", "topics=t:1")
    with WireClient(server.bootstrap) as c:
        commit = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                  "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
        for _ in range(3):
            assert c.request(ApiKey.OFFSET_COMMIT, 8, commit).topics[0].partitions[0].error_code is E.none
        p = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=1),
                                          "topic_data": [{"name": "__consumer_offsets", "partition_data": [
                                              {"index": 0, "records": None}]}]}).responses[0].partition_responses[0]
        r = c.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "__consumer_offsets", "partitions": [
                {"partition_index": i, "timestamp": ts, "current_leader_epoch": -1}
                for i in range(3) for ts in (-2, -1)] + [
                {"partition_index": 3, "timestamp": -1, "current_leader_epoch": -1}]}]})
    assert (p.error_code, p.error_message) == (E.invalid_topic_exception, "Cannot append to internal topic "
                                                                           "__consumer_offsets")
    from groupd.coordinator.core.partitioning import partition_for
    answers = [(q.partition_index, q.error_code, q.offset) for q in r.topics[0].partitions]
    expected = [(i, E.none, 0 if ts == -2 else 3 if i == partition_for("g", 3) else 0)
                for i in range(3) for ts in (-2, -1)]
    assert answers == expected + [(3, E.unknown_topic_or_partition, -1)]


@pytest.mark.parametrize("plane", ["memory", "none"])
def test_consumer_offsets_fetch_serves_the_offsets_log_batches(start_groupd, plane):
    from groupd.coordinator.core.partitioning import partition_for
    from groupd.storage.log import records_of
    from groupd.storage.records_plane.batches import iter_batches

    server = start_groupd("offsets.topic.num.partitions=3", "topics=t:1", f"records.plane={plane}")
    p = partition_for("g", 3)
    with WireClient(server.bootstrap) as c:
        for offset in (5, 6, 7):
            commit = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                      "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
            assert c.request(ApiKey.OFFSET_COMMIT, 8, commit).topics[0].partitions[0].error_code is E.none
        whole = c.request(ApiKey.FETCH, 12, fetch_request("__consumer_offsets", p, 0)).responses[0].partitions[0]
        inside = c.request(ApiKey.FETCH, 12, fetch_request("__consumer_offsets", p, 2)).responses[0].partitions[0]
        started = time.monotonic()
        at_end = c.request(ApiKey.FETCH, 12, fetch_request("__consumer_offsets", p, 3, wait=WAIT_100MS * 3))
        held = time.monotonic() - started
        beyond = c.request(ApiKey.FETCH, 12, fetch_request("__consumer_offsets", p, 4)).responses[0].partitions[0]
    assert (whole.error_code, whole.log_start_offset, whole.high_watermark) == (E.none, 0, 3)
    batches = list(iter_batches(whole.records))
    assert [b.base_offset for b in batches] == [0, 1, 2] and all(b.validate_crc() for b in batches)
    values = [record.value.offset for b in batches for _, record, _ in records_of(b)]
    assert values == [5, 6, 7]  # the stored OffsetCommitValue records, as Kafka's log holds them
    assert [b.base_offset for b in iter_batches(inside.records)] == [2]
    assert at_end.responses[0].partitions[0].records in (b"", None) and held >= 0.25  # waited, no busy loop
    assert beyond.error_code is E.offset_out_of_range


# --- FindCoordinator -----------------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator_answers_this_node_for_groups(groupd, version):
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.FIND_COORDINATOR, version, {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]})
    entries = r.coordinators if version >= 4 else [r]
    assert len(entries) == (2 if version >= 4 else 1)
    for e in entries:
        assert (e.error_code, e.node_id, e.host, e.port) == (E.none, 1, "127.0.0.1", groupd.port)


@pytest.mark.parametrize("version", [1, 3, 4, 6])
def test_find_coordinator_names_this_node_the_transaction_coordinator(groupd, version):
    """A one-process server coordinates transactions (under --workers and in cluster mode it does
    not yet: tests/cluster/test_workers.py)."""
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.FIND_COORDINATOR, version, {"key": "tx", "key_type": 1, "coordinator_keys": ["tx"]})
    e = r.coordinators[0] if version >= 4 else r
    assert (e.error_code, e.node_id, e.host, e.port) == (E.none, 1, "127.0.0.1", groupd.port)


# --- The empty data plane (records.plane=none, the pure coordinator) -------------------------------

pure = groupd_fixture("records.plane=none", "topics=t3:3", name="pure")


def fetch_request(topic: str, partition: int, offset: int, wait=WAIT_100MS) -> dict:
    return {"replica_id": -1, "max_wait": wait, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                         "partition_max_bytes": 1 << 20}]}]}


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_fetch_is_empty_with_high_watermark_at_the_fetch_offset(pure, version):
    with WireClient(pure.bootstrap) as c:
        r = c.request(ApiKey.FETCH, version, fetch_request("t3", 2, 17))
    assert r.error_code is E.none if version >= 7 else True
    p = r.responses[0].partitions[0]
    assert (p.partition_index, p.error_code, p.high_watermark) == (2, E.none, 17)
    assert not p.records
    if version >= 5:
        assert p.log_start_offset == 0


def test_fetch_is_held_for_max_wait(pure):
    with WireClient(pure.bootstrap) as c:
        started = time.monotonic()
        c.request(ApiKey.FETCH, 12, fetch_request("t3", 0, 0, wait=datetime.timedelta(milliseconds=600)))
        held = time.monotonic() - started
    assert held >= 0.55  # behaviour, not speed: the reply must not come before max wait


def test_fetch_by_topic_id_string_in_the_name_field(groupd):
    """@platformatic/kafka's Fetch v12 writes the topic id into the topic name."""
    with WireClient(groupd.bootstrap) as c:
        t3 = c.request(ApiKey.METADATA, 12, metadata_request(12, ["t3"])).topics[0]
        r = c.request(ApiKey.FETCH, 12, fetch_request(str(t3.topic_id), 1, 0))
    assert r.responses[0].topic == str(t3.topic_id)
    assert r.responses[0].partitions[0].error_code is E.none


def test_fetch_of_unknown_partition_is_an_error(groupd):
    with WireClient(groupd.bootstrap) as c:
        r = c.request(ApiKey.FETCH, 12, fetch_request("t3", 9, 0))
    assert r.responses[0].partitions[0].error_code is E.unknown_topic_or_partition


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_list_offsets_answers_zero_for_earliest_and_latest(pure, version):
    with WireClient(pure.bootstrap) as c:
        r = c.request(ApiKey.LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t3", "partitions": [{"partition_index": 0, "timestamp": -2, "current_leader_epoch": -1},
                                          {"partition_index": 1, "timestamp": -1, "current_leader_epoch": -1},
                                          {"partition_index": 2, "timestamp": 1_700_000_000_000,
                                           "current_leader_epoch": -1}]}]})
    parts = r.topics[0].partitions
    assert [(p.error_code, p.offset) for p in parts] == [(E.none, 0), (E.none, 0), (E.none, -1)]


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
def test_produce_is_refused_per_partition_naming_the_setting(pure, version):
    with WireClient(pure.bootstrap, client_id=f"refused-{version}") as c:
        for _ in range(2):
            r = c.request(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": -1,
                                                    "timeout": datetime.timedelta(seconds=1),
                                                    "topic_data": [{"name": "t3", "partition_data": [
                                                        {"index": 0, "records": None}]}]})
            p = r.responses[0].partition_responses[0]
            assert p.error_code is E.invalid_request
            if version >= 8:
                assert "records.plane" in p.error_message
    # the server says why once per client, not once per request
    assert pure.log().count(f"produce refused client=refused-{version} ") == 1


def test_produce_with_acks_0_gets_no_reply_and_later_replies_keep_order(groupd):
    with WireClient(groupd.bootstrap) as c:
        _, produce = c.frame(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": 0,
                                                 "timeout": datetime.timedelta(seconds=1), "topic_data": []})
        cid, versions_req = c.frame(ApiKey.API_VERSIONS, 2, {})
        c.send_raw(produce + versions_req)
        assert int.from_bytes(c.read_frame()[:4], "big") == cid


# --- Admin ---------------------------------------------------------------------------------------

def create(c, version, *topics, validate_only=False):
    return c.request(ApiKey.CREATE_TOPICS, version, {"topics": [
        {"name": n, "num_partitions": p, "replication_factor": rf, "assignments": [], "configs": []}
        for n, p, rf in topics], "timeout": datetime.timedelta(seconds=5), "validate_only": validate_only})


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
def test_create_topics(groupd, version):
    name = f"created-{version}"
    with WireClient(groupd.bootstrap) as c:
        r = create(c, version, (name, 4, 1), ("bad name", 1, 1), (f"{name}-rf3", 1, 3), (f"{name}-zero", 0, 1))
        again = create(c, version, (name, 4, 1))
        meta = c.request(ApiKey.METADATA, 12, metadata_request(12, [name], auto_create=False))
    codes = [t.error_code for t in r.topics]
    assert codes == [E.none, E.invalid_topic_exception, E.invalid_replication_factor, E.invalid_partitions]
    assert again.topics[0].error_code is E.topic_already_exists
    assert len(meta.topics[0].partitions) == 4
    if version >= 5:
        assert (r.topics[0].num_partitions, r.topics[0].replication_factor) == (4, 1)
    if version >= 7:
        assert r.topics[0].topic_id == meta.topics[0].topic_id


def test_create_topics_validate_only_and_default_partitions(groupd):
    with WireClient(groupd.bootstrap) as c:
        create(c, 7, ("dry-run", 3, 1), validate_only=True)
        r = create(c, 7, ("defaults", -1, -1))
        meta = c.request(ApiKey.METADATA, 12, metadata_request(12, ["dry-run"], auto_create=False))
    assert meta.topics[0].error_code is E.unknown_topic_or_partition
    assert (r.topics[0].error_code, r.topics[0].num_partitions) == (E.none, 1)


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_TOPICS))
def test_delete_topics(groupd, version):
    name = f"doomed-{version}"
    with WireClient(groupd.bootstrap) as c:
        created = create(c, 7, (name, 1, 1)).topics[0]
        if version >= 6:
            req = {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)},
                              {"name": None, "topic_id": uuid.uuid4()}], "timeout": datetime.timedelta(seconds=5)}
        else:
            req = {"topic_names": [name, "no-such-topic"], "timeout": datetime.timedelta(seconds=5)}
        r = c.request(ApiKey.DELETE_TOPICS, version, req)
        meta = c.request(ApiKey.METADATA, 12, metadata_request(12, [name], auto_create=False))
    assert r.responses[0].error_code is E.none
    assert r.responses[1].error_code in (E.unknown_topic_or_partition, E.unknown_topic_id)
    if version >= 6:
        assert r.responses[0].topic_id == created.topic_id
    assert meta.topics[0].error_code is E.unknown_topic_or_partition


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_PARTITIONS))
def test_create_partitions(groupd, version):
    name = f"growing-{version}"
    with WireClient(groupd.bootstrap) as c:
        create(c, 7, (name, 2, 1))
        r = c.request(ApiKey.CREATE_PARTITIONS, version, {"topics": [
            {"name": name, "count": 5, "assignments": None},
            {"name": "no-such-topic", "count": 5, "assignments": None}],
            "timeout": datetime.timedelta(seconds=5), "validate_only": False})
        shrink = c.request(ApiKey.CREATE_PARTITIONS, version, {"topics": [
            {"name": name, "count": 3, "assignments": None}],
            "timeout": datetime.timedelta(seconds=5), "validate_only": False})
        meta = c.request(ApiKey.METADATA, 12, metadata_request(12, [name]))
    assert [x.error_code for x in r.results] == [E.none, E.unknown_topic_or_partition]
    assert shrink.results[0].error_code is E.invalid_partitions
    assert len(meta.topics[0].partitions) == 5


# --- Connections: pipelining, bad input, idle, shutdown ------------------------------------------

def test_pipelined_requests_are_answered_in_order(groupd):
    with WireClient(groupd.bootstrap) as c:
        frames, ids = [], []
        for i in range(50):
            if i % 10 == 0:  # a held Fetch in the middle must not let later replies overtake it
                cid, f = c.frame(ApiKey.FETCH, 12, fetch_request("t3", 0, 0))
            else:
                cid, f = c.frame(ApiKey.API_VERSIONS, 2, {})
            frames.append(f)
            ids.append(cid)
        c.send_raw(b"".join(frames))
        got = [int.from_bytes(c.read_frame()[:4], "big") for _ in ids]
    assert got == ids


def assert_still_serving(groupd):
    with WireClient(groupd.bootstrap) as c:
        assert c.request(ApiKey.API_VERSIONS, 2, {}).error_code is E.none


@pytest.mark.parametrize("bad", [
    pytest.param((200 * 1024 * 1024).to_bytes(4, "big"), id="oversized"),
    pytest.param((12).to_bytes(4, "big") + b"\x03\xe7\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00", id="unknown-api-key"),
    pytest.param((10).to_bytes(4, "big") + b"\x00\x03\x00\x0d\x00\x00\x00\x01\x00\x00", id="unsupported-version"),
    pytest.param((14).to_bytes(4, "big") + b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x00" + b"\x00\x00\x00\x05",
                 id="truncated-body"),
    pytest.param((30).to_bytes(4, "big") + bytes(range(200, 230)), id="garbage"),
])
def test_bad_input_closes_only_that_connection(groupd, bad):
    with WireClient(groupd.bootstrap) as other, WireClient(groupd.bootstrap) as c:
        c.send_raw(bad)
        assert c.closed_by_server()
        assert other.request(ApiKey.API_VERSIONS, 2, {}).error_code is E.none
    assert_still_serving(groupd)


def test_truncated_frame_then_disconnect_leaves_the_server_serving(groupd):
    c = WireClient(groupd.bootstrap)
    c.send_raw((100).to_bytes(4, "big") + b"\x00\x12\x00")
    c.sock.shutdown(socket.SHUT_WR)
    assert c.closed_by_server()
    c.close()
    assert_still_serving(groupd)


def test_idle_connections_are_closed(start_groupd):
    server = start_groupd("connections.max.idle.ms=300")
    with WireClient(server.bootstrap) as c:
        c.request(ApiKey.API_VERSIONS, 2, {})
        assert c.closed_by_server(timeout=5)
    assert "reason=idle" in server.log()


def test_sigterm_answers_held_requests_and_exits_cleanly(start_groupd):
    server = start_groupd()
    with WireClient(server.bootstrap) as c:
        cid, frame = c.frame(ApiKey.FETCH, 12, fetch_request("t", 0, 0, wait=datetime.timedelta(seconds=30)))
        c.send_raw(frame)
        time.sleep(0.3)
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert int.from_bytes(c.read_frame()[:4], "big") == cid
        assert time.monotonic() - started < 10
    assert server.stop() == 0
    assert "groupd stopped" in server.log()
