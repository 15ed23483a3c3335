"""Regenerate the golden fixtures of tests/golden/test_golden.py:

    cd /work/main && .venv/bin/python tests/golden/capture.py

Rewrites tests/golden/requests.json, quirks.json and responses.json in about a minute. Needs kcat
on PATH, the venv's confluent-kafka and kafka-python, and free loopback ports. Re-run it whenever
SUPPORTED_VERSIONS changes (a new API also needs entries in test_golden.key_fields and
response_values, and in kafka_python_request_values below).

Requests. A real groupd is started behind a recording proxy on 127.0.0.1 (groupd advertises the
proxy's port, so every connection of a client goes through it) and driven by:

* librdkafka, through confluent-kafka: AdminClient (list_topics, create_topics, create_partitions,
  delete_topics, delete_records (offset 0: nothing goes), create/describe/delete_acls (answered
  SECURITY_DISABLED),
  alter/describe_user_scram_credentials, and the consumer-group
  calls), a Consumer on a manual assignment (FindCoordinator,
  delete_topics, a group's configs, and the consumer-group calls), a Consumer on a manual assignment (FindCoordinator,
  ListOffsets, Fetch), a Producer (Produce) and a subscribed Consumer (JoinGroup, SyncGroup,
  Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup). To capture every version librdkafka knows,
  not only its newest, the scenario runs once per step of "caps": the proxy lowers the max
  versions in groupd's ApiVersions answer, so librdkafka uses min(its max, cap). One more run
  refuses ApiVersions v3 as an old broker does (error 35, ApiVersions 0-0), so librdkafka retries
  with ApiVersions v0;
* kcat (librdkafka 2.0.2): -L, -C from the end of a partition, and -C -G (a group member).

Each (api, version, client library) keeps its largest frame. A frame that kafka-python does not
encode back to the same bytes (unknown tagged fields, trailing bytes) goes to quirks.json instead
of requests.json. Versions no librdkafka sends are built with kafka-python's message classes and
sent to the same groupd (the capture fails if groupd does not answer them). Each case records the
key fields kafka-python decodes from the frame (test_golden.key_fields); the capture checks that
the librdkafka ones carry what the scenario asked for.

Responses. For every (api, version), the bytes kafka-python encodes for test_golden's
`response_values` with response header v0/v1; the capture stops if groupd's encoder disagrees.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402
from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    ConsumerGroupTopicPartitions,  # noqa: E402
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from groupd.coordinator.apis import SUPPORTED_VERSIONS  # noqa: E402
from groupd.protocol import ErrorCode  # noqa: E402
from groupd.protocol.apis import ApiKey  # noqa: E402
from groupd.protocol.codec import build_response, decode_response, encode_response  # noqa: E402
from tests.support.process import GroupdProcess  # noqa: E402

from .test_golden import (  # noqa: E402
    ASSIGNMENT,
    GROUP,
    MEMBER,
    RESPONSE_CORRELATION_ID,
    SUBSCRIPTION,
    case_id,
    check_against_kafka_python,
    encoded_response,
    kafka_python_class,
    kafka_python_message,
    kafka_python_plain,
    key_fields,
    plain,
    supported,
)

GOLDEN = Path(__file__).resolve().parent
LIBRDKAFKA = (f"librdkafka {confluent_kafka.libversion()[0]} "
              f"(confluent-kafka {confluent_kafka.__version__})")
KCAT = "kcat 1.7.1 (librdkafka 2.0.2)"
KAFKA_PYTHON = "kafka-python 3.0.12 (message classes)"
SOURCE_BY_CLIENT = {"golden-admin": LIBRDKAFKA, "golden-consumer": LIBRDKAFKA,
                    "golden-subscriber": LIBRDKAFKA, "golden-producer": LIBRDKAFKA, "golden-kcat": KCAT}
EXISTING = "golden-existing"  # declared at start-up, 2 partitions


# ---------------------------------------------------------------------------------------------
# The recording proxy


class RecordingProxy:
    """Forwards 127.0.0.1:port to groupd and records every request frame (without its size).
    `caps` lowers max versions in ApiVersions answers; `refuse_api_versions_v3` answers an
    ApiVersions ≥ 3 itself as an old broker would (v0, UNSUPPORTED_VERSION, ApiVersions 0–0)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.frames: list[tuple[int, int, bytes]] = []
        self.caps: dict[int, int] = {}
        self.refuse_api_versions_v3 = False
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            inflight: dict[int, tuple[int, int]] = {}
            to_client = threading.Lock()
            threading.Thread(target=self._requests, args=(client, upstream, inflight, to_client),
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, inflight, to_client),
                             daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _requests(self, client, upstream, inflight, to_client) -> None:
        try:
            self._forward_requests(client, upstream, inflight, to_client)
        except OSError:  # either side went away: _frames shuts both down
            pass

    def _responses(self, upstream, client, inflight, to_client) -> None:
        try:
            self._forward_responses(upstream, client, inflight, to_client)
        except OSError:
            pass

    def _forward_requests(self, client, upstream, inflight, to_client) -> None:
        for frame in _frames(client, upstream):
            api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
            with self._lock:
                self.frames.append((api_key, version, frame))
            if api_key == ApiKey.API_VERSIONS and version >= 3 and self.refuse_api_versions_v3:
                refusal = build_response(ApiKey.API_VERSIONS, 0, {
                    "error_code": ErrorCode.unsupported_version,
                    "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 0}]})
                with to_client:
                    client.sendall(encode_response(ApiKey.API_VERSIONS, correlation_id, refusal))
                continue
            inflight[correlation_id] = (api_key, version)
            upstream.sendall(struct.pack(">i", len(frame)) + frame)

    def _forward_responses(self, upstream, client, inflight, to_client) -> None:
        for frame in _frames(upstream, client):
            (correlation_id,) = struct.unpack_from(">i", frame)
            api_key, version = inflight.pop(correlation_id, (None, None))
            if api_key == ApiKey.API_VERSIONS and self.caps:
                frame = self._capped(version, correlation_id, frame)
            with to_client:
                client.sendall(struct.pack(">i", len(frame)) + frame)

    def _capped(self, version: int, correlation_id: int, frame: bytes) -> bytes:
        _, response = decode_response(ApiKey.API_VERSIONS, version, frame)
        if response.error_code != ErrorCode.none:
            return frame
        table = [{"api_key": k.api_key, "min_version": k.min_version,
                  "max_version": max(k.min_version, min(k.max_version, self.caps.get(k.api_key, k.max_version)))}
                 for k in response.api_keys]
        capped = build_response(ApiKey.API_VERSIONS, version, {"error_code": ErrorCode.none, "api_keys": table})
        return encode_response(ApiKey.API_VERSIONS, correlation_id, capped)[4:]


def _frames(src: socket.socket, dst: socket.socket):
    """Complete frames read from `src` until it closes; both sockets are shut down at the end."""
    buf = b""
    try:
        while chunk := src.recv(65536):
            buf += chunk
            while len(buf) >= 4 and len(buf) >= 4 + (size := struct.unpack_from(">i", buf)[0]):
                yield buf[4:4 + size]
                buf = buf[4 + size:]
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------
# Clients


def attempt(what: str, action) -> None:
    """Run one client call; a failure is reported and the capture goes on (a server that
    closes the connection on some frame must not stop the frames of the other calls)."""
    try:
        action()
    except Exception as e:  # noqa: BLE001
        print(f"  {what} failed: {e}", flush=True)


def librdkafka_scenario(proxy: RecordingProxy, round_no: int) -> None:
    """Admin calls, a consumer on a manual assignment, a producer and a consumer group, on fresh
    topic names."""
    bootstrap = f"127.0.0.1:{proxy.port}"
    created, doomed = f"golden-a{round_no}", f"golden-b{round_no}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "golden-admin"})
    attempt("list_topics()", lambda: admin.list_topics(timeout=5))
    attempt("list_topics(EXISTING)", lambda: admin.list_topics(EXISTING, timeout=5))
    del admin

    def results(futures: dict) -> None:
        for future in futures.values():
            future.result(10)

    caps = proxy.caps
    if caps.get(ApiKey.METADATA) == 0:  # admin requests go to the controller: Metadata v0 names none
        proxy.caps = {**caps, ApiKey.METADATA: 1}
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "golden-admin"})
    attempt("create_topics", lambda: results(admin.create_topics(
        [NewTopic(created, 2, 1, config={"cleanup.policy": "compact"}), NewTopic(doomed, 1, 1)])))
    attempt("create_partitions", lambda: results(admin.create_partitions([NewPartitions(created, 3)])))
    attempt("delete_topics", lambda: results(admin.delete_topics([doomed])))
    attempt("delete_records", lambda: results(admin.delete_records([TopicPartition(EXISTING, 1, 0)])))
    binding = AclBinding(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    acl_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    attempt("create_acls", lambda: results(admin.create_acls([binding])))
    attempt("describe_acls", lambda: admin.describe_acls(acl_filter).result(10))
    attempt("delete_acls", lambda: results(admin.delete_acls([acl_filter])))
    attempt("alter_user_scram_credentials", lambda: results(admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("golden-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     b"golden-secret", b"golden-salt")])))
    attempt("describe_user_scram_credentials", lambda: results(admin.describe_user_scram_credentials(
        ["golden-user"])))
    attempt("incremental_alter_configs", lambda: results(admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, GROUP, incremental_configs=[ConfigEntry(
            "consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])])))
    attempt("alter_configs", lambda: results(admin.alter_configs([ConfigResource(
        ResourceType.GROUP, GROUP, set_config={"consumer.session.timeout.ms": "50000"})])))
    attempt("describe_configs", lambda: results(admin.describe_configs([ConfigResource(ResourceType.GROUP, GROUP)])))
    del admin
    proxy.caps = caps

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "golden-consumer",
                         "group.id": GROUP, "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "isolation.level": "read_committed"})
    start = {(created, 0): OFFSET_END, (created, 1): OFFSET_BEGINNING, (EXISTING, 1): 5}
    consumer.assign([TopicPartition(topic, p, offset) for (topic, p), offset in start.items()])
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        consumer.poll(0.1)
    consumer.close()

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "golden-producer",
                         "message.timeout.ms": 3000, "retries": 0})
    producer.produce(EXISTING, b"golden-value", b"golden-key", partition=0)
    producer.flush(5)

    group_scenario(bootstrap, created)


def group_scenario(bootstrap: str, topic: str) -> None:
    """A subscribed consumer (join, sync, heartbeats, commit, committed, leave), then the admin
    group calls on the group it left."""
    subscriber = Consumer({"bootstrap.servers": bootstrap, "client.id": "golden-subscriber",
                           "group.id": GROUP, "enable.auto.commit": False, "session.timeout.ms": 6000,
                           "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"})
    subscriber.subscribe([topic])
    deadline = time.monotonic() + 15
    while not subscriber.assignment() and time.monotonic() < deadline:
        subscriber.poll(0.1)
    if not subscriber.assignment():
        print("  subscriber got no assignment", flush=True)
    for _ in range(8):  # a few heartbeats
        subscriber.poll(0.1)
    attempt("commit", lambda: subscriber.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False))
    attempt("committed", lambda: subscriber.committed([TopicPartition(topic, 0)], timeout=5))
    subscriber.close()

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "golden-admin"})
    partitions = [ConsumerGroupTopicPartitions(GROUP, [TopicPartition(topic, 0, 7)])]
    attempt("list_consumer_groups", lambda: admin.list_consumer_groups().result(10))
    attempt("describe_consumer_groups", lambda: admin.describe_consumer_groups([GROUP])[GROUP].result(10))
    attempt("list_consumer_group_offsets", lambda: admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(GROUP, [TopicPartition(topic, 0)])])[GROUP].result(10))
    attempt("alter_consumer_group_offsets",
            lambda: admin.alter_consumer_group_offsets(partitions)[GROUP].result(10))
    attempt("delete_consumer_groups", lambda: admin.delete_consumer_groups([GROUP])[GROUP].result(10))
    del admin


def kcat_scenario(bootstrap: str) -> None:
    common = ["kcat", "-b", bootstrap, "-X", "client.id=golden-kcat"]
    subprocess.run(common + ["-L"], check=True, capture_output=True, timeout=30)
    subprocess.run(common + ["-C", "-t", EXISTING, "-p", "0", "-o", "end", "-e"],
                   check=True, capture_output=True, timeout=30)
    attempt("kcat -G", lambda: subprocess.run(
        common + ["-C", "-G", "golden-kcat-group", EXISTING, "-e", "-X", "auto.offset.reset=earliest"],
        check=True, capture_output=True, timeout=30))


def capture_clients(proxy: RecordingProxy) -> list[tuple[int, int, bytes]]:
    bootstrap = f"127.0.0.1:{proxy.port}"
    spans = [hi - lo for lo, hi in SUPPORTED_VERSIONS.values()]
    for step in range(max(spans) + 1):  # cap every API at min + step, then lift the caps
        proxy.caps = {api: lo + step for api, (lo, hi) in SUPPORTED_VERSIONS.items()
                      if api != ApiKey.API_VERSIONS and lo + step < hi}
        caps = ", ".join(f"{api.name} v{v}" for api, v in proxy.caps.items())
        print(f"librdkafka, max versions capped at: {caps or 'none'}", flush=True)
        librdkafka_scenario(proxy, step)
    proxy.caps = {}
    proxy.refuse_api_versions_v3 = True
    print("librdkafka, ApiVersions v3 refused", flush=True)
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "golden-admin"})
    attempt("list_topics(EXISTING)", lambda: admin.list_topics(EXISTING, timeout=10))
    del admin
    proxy.refuse_api_versions_v3 = False
    print("kcat", flush=True)
    kcat_scenario(bootstrap)
    time.sleep(0.5)
    return list(proxy.frames)


# ---------------------------------------------------------------------------------------------
# kafka-python, for the versions no librdkafka sends


def record_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1024 * 1024)
    builder.append(0, timestamp=1_700_000_000_000, key=b"golden-key", value=b"golden-value", headers=[])
    return bytes(builder.build())


ACL_FILTER = {"resource_type_filter": 2, "resource_name_filter": "golden-", "pattern_type_filter": 2,
              "principal_filter": "User:alice", "host_filter": None, "operation": 1, "permission_type": 1}


def kafka_python_request_values(api: int, version: int) -> dict:
    """What kafka-python sends, under its field names; fields a version lacks are ignored."""
    match api:
        case ApiKey.PRODUCE:
            return {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
                {"name": EXISTING, "partition_data": [{"index": 0, "records": record_batch()}]}]}
        case ApiKey.FETCH:
            return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
                    "isolation_level": 1, "session_id": 0, "session_epoch": -1, "topics": [
                        {"topic": EXISTING, "partitions": [
                            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 5,
                             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1048576},
                            {"partition": 1, "current_leader_epoch": -1, "fetch_offset": 0,
                             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1048576}]}],
                    "forgotten_topics_data": [], "rack_id": ""}
        case ApiKey.LIST_OFFSETS:
            # latest, earliest, and the spec a version ≥ 7 adds: max timestamp (v7), earliest
            # local (v8), latest tiered (v9)
            specs = [-1, -2] + ([{7: -3, 8: -4}.get(version, -5)] if version >= 7 else [])
            return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": EXISTING, "partitions": [
                {"partition_index": i % 2, "current_leader_epoch": -1, "timestamp": ts}
                for i, ts in enumerate(specs)]}]}
        case ApiKey.METADATA:
            return {"topics": [{"name": EXISTING, "topic_id": None}], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False}
        case ApiKey.FIND_COORDINATOR:
            if version >= 4:
                return {"key_type": 0, "coordinator_keys": [GROUP]}
            return {"key": GROUP, "key_type": 0}
        case ApiKey.API_VERSIONS:
            return {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}
        case ApiKey.CREATE_TOPICS:
            return {"topics": [{"name": f"golden-kp{version}", "num_partitions": 3, "replication_factor": 1,
                                "assignments": [], "configs": [{"name": "cleanup.policy", "value": "compact"}]}],
                    "timeout_ms": 30000, "validate_only": True}
        case ApiKey.DELETE_TOPICS:
            if version >= 6:
                return {"topics": [{"name": "golden-kp-missing", "topic_id": None}], "timeout_ms": 30000}
            return {"topic_names": ["golden-kp-missing"], "timeout_ms": 30000}
        case ApiKey.DELETE_RECORDS:  # offset 0: nothing goes
            return {"topics": [{"name": EXISTING, "partitions": [{"partition_index": 0, "offset": 0}]}],
                    "timeout_ms": 30000}
        case ApiKey.CREATE_PARTITIONS:
            return {"topics": [{"name": EXISTING, "count": 4, "assignments": None}],
                    "timeout_ms": 30000, "validate_only": True}
        case ApiKey.OFFSET_COMMIT:  # an admin-style commit: no generation, no member
            return {"group_id": "golden-kp-group", "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None, "retention_time_ms": -1, "topics": [
                        {"name": EXISTING, "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                           "committed_leader_epoch": -1,
                                                           "committed_metadata": "golden"}]}]}
        case ApiKey.OFFSET_FETCH:
            topics = [{"name": EXISTING, "partition_indexes": [0, 1]}]
            if version >= 8:
                return {"groups": [{"group_id": "golden-kp-group", "member_id": None, "member_epoch": -1,
                                    "topics": topics}], "require_stable": True}
            return {"group_id": "golden-kp-group", "topics": topics, "require_stable": True}
        case ApiKey.JOIN_GROUP:
            return {"group_id": f"golden-kp-join{version}", "session_timeout_ms": 6000,
                    "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                    "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
                    "reason": "golden"}
        case ApiKey.HEARTBEAT:
            return {"group_id": GROUP, "generation_id": 1, "member_id": MEMBER, "group_instance_id": None}
        case ApiKey.LEAVE_GROUP:
            if version >= 3:
                return {"group_id": GROUP, "members": [
                    {"member_id": MEMBER, "group_instance_id": None, "reason": "golden"}]}
            return {"group_id": GROUP, "member_id": MEMBER}
        case ApiKey.SYNC_GROUP:
            return {"group_id": GROUP, "generation_id": 1, "member_id": MEMBER, "group_instance_id": None,
                    "protocol_type": "consumer", "protocol_name": "range",
                    "assignments": [{"member_id": MEMBER, "assignment": ASSIGNMENT}]}
        case ApiKey.DESCRIBE_GROUPS:
            return {"groups": [GROUP, "golden-kp-missing"], "include_authorized_operations": True}
        case ApiKey.LIST_GROUPS:
            return {"states_filter": ["Stable", "Empty"], "types_filter": ["classic"]}
        case ApiKey.DELETE_GROUPS:
            return {"groups_names": ["golden-kp-missing"]}
        case ApiKey.TXN_OFFSET_COMMIT:  # a transactional producer's offsets (KIP-447 membership from v3)
            return {"transactional_id": "golden-txn", "group_id": "golden-kp-txn-group", "producer_id": 4242,
                    "producer_epoch": 0, "generation_id": -1, "member_id": "", "group_instance_id": None,
                    "topics": [{"name": EXISTING, "partitions": [
                        {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                         "committed_metadata": "golden"}]}]}
        case ApiKey.OFFSET_DELETE:
            return {"group_id": "golden-kp-group", "topics": [{"name": EXISTING, "partitions": [
                {"partition_index": 0}, {"partition_index": 1}]}]}
        case ApiKey.OFFSET_FOR_LEADER_EPOCH:  # a consumer validating its position (KIP-320)
            return {"replica_id": -1, "topics": [{"topic": EXISTING, "partitions": [
                {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
                {"partition": 1, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
        case ApiKey.INIT_PRODUCER_ID:  # an idempotent producer (no transactional id)
            return {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                    "producer_epoch": -1}
        # transactions: a transactional id the coordinator has not seen (INVALID_PRODUCER_ID_MAPPING)
        case ApiKey.ADD_PARTITIONS_TO_TXN:
            return {"v3_and_below_transactional_id": "golden-kp-tx", "v3_and_below_producer_id": 4242,
                    "v3_and_below_producer_epoch": 0,
                    "v3_and_below_topics": [{"name": EXISTING, "partitions": [0, 1]}]}
        case ApiKey.ADD_OFFSETS_TO_TXN:
            return {"transactional_id": "golden-kp-tx", "producer_id": 4242, "producer_epoch": 0,
                    "group_id": "golden-kp-group"}
        case ApiKey.END_TXN:
            return {"transactional_id": "golden-kp-tx", "producer_id": 4242, "producer_epoch": 0, "committed": True}
        case ApiKey.WRITE_TXN_MARKERS:  # an ABORT for a producer with nothing open
            return {"markers": [{"producer_id": 4242, "producer_epoch": 0, "transaction_result": False,
                                 "topics": [{"name": EXISTING, "partition_indexes": [0]}], "coordinator_epoch": 0}]}
        case ApiKey.LIST_TRANSACTIONS:
            return {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [], "duration_filter": 1000}
        case ApiKey.DESCRIBE_TRANSACTIONS:
            return {"transactional_ids": ["golden-kp-tx"]}
        case ApiKey.SASL_HANDSHAKE:  # on this PLAINTEXT listener: ILLEGAL_SASL_STATE, connection open
            return {"mechanism": "SCRAM-SHA-512"}
        case ApiKey.SASL_AUTHENTICATE:
            return {"auth_bytes": b"n,,n=alice,r=golden-nonce"}
        case ApiKey.CREATE_ACLS:
            return {"creations": [{"resource_type": 3, "resource_name": "golden-kp-group", "resource_pattern_type": 3,
                                   "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]}
        case ApiKey.DESCRIBE_ACLS:
            return ACL_FILTER
        case ApiKey.DELETE_ACLS:
            return {"filters": [ACL_FILTER]}
        case ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
            return {"users": [{"name": "golden-kp-user"}]}
        case ApiKey.DESCRIBE_CLIENT_QUOTAS:  # kafka-configs --entity-type users --describe's filter
            return {"components": [{"entity_type": "user", "match_type": 0, "match": "golden-kp-user"}],
                    "strict": False}
        case ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
            return {"deletions": [{"name": "golden-kp-user", "mechanism": 1}],
                    "upsertions": [{"name": "golden-kp-other", "mechanism": 2, "iterations": 4096,
                                    "salt": b"golden-salt", "salted_password": bytes(64)}]}
        case ApiKey.DESCRIBE_CONFIGS:
            return {"resources": [{"resource_type": 32, "resource_name": GROUP,
                                   "configuration_keys": ["consumer.session.timeout.ms"]}],
                    "include_synonyms": False, "include_documentation": True}
        case ApiKey.ALTER_CONFIGS:
            return {"resources": [{"resource_type": 32, "resource_name": GROUP, "configs": [
                {"name": "consumer.session.timeout.ms", "value": "50000"}]}], "validate_only": True}
        case ApiKey.INCREMENTAL_ALTER_CONFIGS:
            return {"resources": [{"resource_type": 32, "resource_name": GROUP, "configs": [
                {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]}],
                    "validate_only": True}
        case ApiKey.DESCRIBE_LOG_DIRS:
            return {"topics": [{"topic": "golden-a", "partitions": [0, 1]}]}
        case ApiKey.DESCRIBE_TOPIC_PARTITIONS:
            return {"topics": [{"name": "golden-a"}, {"name": "golden-x"}], "response_partition_limit": 1,
                    "cursor": {"topic_name": "golden-a", "partition_index": 0}}
        case ApiKey.DESCRIBE_PRODUCERS:
            return {"topics": [{"name": "golden-a", "partition_indexes": [0, 1]}]}
    raise KeyError(f"no kafka-python request values for API key {api}: add them here")


def kafka_python_frame(api: int, version: int, correlation_id: int) -> bytes:
    request = kafka_python_message(kafka_python_class(api, "request"), version,
                                   kafka_python_request_values(api, version))
    request.with_header(correlation_id=correlation_id, client_id="golden-kafka-python")
    return bytes(request.encode(header=True))


def answered_by(groupd: GroupdProcess, api: int, version: int, frame: bytes) -> None:
    """groupd answers `frame` with a response kafka-python can decode."""
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(s, 4))[0]
        reply = _read(s, size)
    response = kafka_python_class(api, "response")[version].decode(reply, header=True)
    assert response.header.correlation_id == struct.unpack_from(">i", frame, 4)[0]


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"groupd closed the connection: {s.getpeername()}")
        data += chunk
    return data


# ---------------------------------------------------------------------------------------------
# Cases


def request_case(api: int, version: int, frame: bytes, source: str) -> dict:
    decoded = kafka_python_class(api, "request")[version].decode(frame, header=True)
    return {"api": ApiKey(api).name, "api_key": api, "version": version, "source": source,
            "client_id": decoded.header.client_id, "correlation_id": decoded.header.correlation_id,
            "expect": json.loads(json.dumps(key_fields(api, kafka_python_plain(decoded)))),
            "frame": frame.hex()}


def canonical(api: int, version: int, frame: bytes) -> bool:
    """kafka-python encodes what it decodes from `frame` back to the same bytes: no unknown
    tagged field, no trailing byte, nothing a codec may read two ways."""
    cls = kafka_python_class(api, "request")[version]
    return bytes(cls.decode(frame, header=True).encode(header=True)) == frame


def choose(frames: list[tuple[int, int, bytes]]) -> tuple[dict, dict]:
    """The largest frame per (api, version, client library) among the supported versions:
    canonical frames for the golden set, the others ("quirks") apart."""
    golden: dict[tuple[int, int, str], bytes] = {}
    quirks: dict[tuple[int, int, str], bytes] = {}
    for api, version, frame in frames:
        if (api, version) not in set(supported()):
            continue
        (n,) = struct.unpack_from(">h", frame, 8)
        key = (api, version, SOURCE_BY_CLIENT[frame[10:10 + n].decode()])
        chosen = golden if canonical(api, version, frame) else quirks
        if len(frame) > len(chosen.get(key, b"")):
            chosen[key] = frame
    return golden, quirks


def check_scenario(cases: list[dict]) -> None:
    """Every librdkafka capture carries what the scenario asked for (golden-aN was created with
    2 partitions then grown to 3, golden-bN created then deleted, EXISTING has 2 partitions)."""
    def expects(api: ApiKey) -> list[dict]:
        found = [c["expect"] for c in cases if c["api_key"] == api and c["source"] == LIBRDKAFKA]
        assert found, f"librdkafka sent no {api.name}"
        return found

    def created(name: str) -> bool:
        return name.startswith("golden-a")

    for e in expects(ApiKey.CREATE_TOPICS):
        (a,) = [t for t in e["topics"] if created(t[0])]
        assert a[1:] == [2, 1, {"cleanup.policy": "compact"}], e
    for e in expects(ApiKey.CREATE_PARTITIONS):
        assert [count for name, count in e["topics"] if created(name)] == [3], e
    for e in expects(ApiKey.DELETE_TOPICS):
        assert len(e["topics"]) == 1 and e["topics"][0].startswith("golden-b"), e
    for e in expects(ApiKey.DELETE_RECORDS):
        assert e["topics"] == [[EXISTING, [[1, 0]]]], e
    for e in expects(ApiKey.FIND_COORDINATOR):
        assert e["keys"] == [GROUP], e
    for e in expects(ApiKey.PRODUCE):
        assert e["topics"] == [[EXISTING, [0]]], e
    for e in expects(ApiKey.FETCH):
        assert e["isolation_level"] == 1, e  # librdkafka's default, read_committed
        assert all(created(name) or name == EXISTING for name, _ in e["topics"]), e
    assert any([1, 5] in dict(e["topics"]).get(EXISTING, ()) for e in expects(ApiKey.FETCH))
    for e in expects(ApiKey.LIST_OFFSETS):
        assert all(created(name) or name == EXISTING for name, _ in e["topics"]), e
        assert {ts for _, parts in e["topics"] for _, ts in parts} <= {-1, -2}, e
    assert any(EXISTING in (e["topics"] or ()) for e in expects(ApiKey.METADATA))
    for api in (ApiKey.HEARTBEAT, ApiKey.SYNC_GROUP, ApiKey.JOIN_GROUP):
        for e in expects(api):
            assert e["group"][0] == GROUP, e
    for e in expects(ApiKey.JOIN_GROUP):
        assert e["protocol_type"] == "consumer" and "range" in e["protocols"], e
    for e in expects(ApiKey.SYNC_GROUP):  # the leader of a group of one
        assert e["assignments"] in ([], [e["group"][2]]), e
    for e in expects(ApiKey.LEAVE_GROUP):
        assert e["group_id"] == GROUP, e
    for e in expects(ApiKey.OFFSET_COMMIT):  # the subscriber's commit or the admin's
        committed = [p for _, parts in e["topics"] for p in parts]
        assert e["group"][0] == GROUP and committed in ([[0, 3]], [[0, 7]]), e
    for e in expects(ApiKey.OFFSET_FETCH):
        assert [g[0] for g in e["groups"]] == [GROUP], e
    for api in (ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS):
        for e in expects(api):
            assert e["groups"] == [GROUP], e
    expects(ApiKey.LIST_GROUPS)
    for api in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        for e in expects(api):
            assert [r[:2] for r in e["resources"]] == [[32, GROUP]], e


def main() -> None:
    data_dir = tempfile.mkdtemp(prefix="groupd-golden-")
    # the empty data plane: the scenario fetches from offsets no producer wrote
    groupd = GroupdProcess(data_dir, f"topics={EXISTING}:2", "group.initial.rebalance.delay.ms=0", "records.plane=none")
    proxy = RecordingProxy(groupd.port)
    groupd.settings.append(f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}")
    groupd.start()
    try:
        best, quirks = choose(capture_clients(proxy))
        cases = [request_case(api, v, frame, source) for (api, v, source), frame in best.items()]
        check_scenario(cases)
        quirk_cases = [request_case(api, v, frame, source) for (api, v, source), frame in quirks.items()]
        captured = {(api, v) for api, v, _ in best}
        for n, (api, version) in enumerate(supported()):
            if (api, version) not in captured:
                frame = kafka_python_frame(api, version, correlation_id=1000 + n)
                answered_by(groupd, api, version, frame)
                cases.append(request_case(api, version, frame, KAFKA_PYTHON))
    except BaseException:
        print(groupd.log()[-5000:], file=sys.stderr)
        raise
    finally:
        proxy.close()
        rc = groupd.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    assert rc == 0, f"groupd exited with {rc}"
    for found in (cases, quirk_cases):
        found.sort(key=lambda c: (c["api_key"], c["version"], c["source"]))
    write("requests.json", cases)
    write("quirks.json", quirk_cases)
    write("responses.json", [response_case(api, v) for api, v in supported()])
    for api, version in supported():
        sources = [c["source"] for c in cases if (c["api_key"], c["version"]) == (api, version)]
        print(f"{case_id(api, version):22} {'; '.join(sources)}")
    for c in quirk_cases:
        print(f"quirk: {c['api']}-v{c['version']} from {c['source']}: {c['frame']}")


def response_case(api: int, version: int) -> dict:
    """kafka-python's bytes for the test's response values; groupd's must be the same."""
    cls = kafka_python_class(api, "response")
    response, ours = encoded_response(api, version)
    theirs = kafka_python_message(cls, version, plain(response))
    theirs.with_header(correlation_id=RESPONSE_CORRELATION_ID)
    frame = bytes(theirs.encode(header=True, framed=True))
    if frame != ours:
        raise SystemExit(f"{case_id(api, version)}: groupd encodes {ours.hex()}\n"
                         f"{' ' * len(case_id(api, version))}  kafka-python   {frame.hex()}")
    check_against_kafka_python(api, version, frame, plain(response))
    return {"api": ApiKey(api).name, "api_key": api, "version": version,
            "correlation_id": RESPONSE_CORRELATION_ID, "frame": frame.hex()}


def write(name: str, cases: list[dict]) -> None:
    path = GOLDEN / name
    path.write_text("[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]\n")  # a case per line
    print(f"wrote {len(cases)} cases to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
