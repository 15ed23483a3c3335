"""ACLs through real clients: confluent-kafka's and kafka-python's admin clients create, describe
and delete them; then, with the server restarted without super users, a confluent-kafka consumer
allowed on one group consumes there and is refused on another (spec security §5.5, §5.6)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.support.authz import ANONYMOUS, client_config, start_secured

WAIT_S = 60  # generous: two cores shared by many test runs


def binding(resource_type, name, operation, pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW):
    return AclBinding(resource_type, name, pattern, ANONYMOUS, "*", operation, permission)


CONSUMER_ACLS = [binding(ResourceType.GROUP, "allowed", AclOperation.READ),
                 binding(ResourceType.TOPIC, "orders", AclOperation.READ),
                 binding(ResourceType.TOPIC, "orders", AclOperation.WRITE)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("acl-clients"))


@pytest.fixture(scope="module")
def admin_server(data_dir):
    s = start_secured(data_dir, "topics=orders:2", "records.plane=memory", super_users=(ANONYMOUS,))
    yield s
    assert s.stop() == 0, s.log()


def test_confluent_admin_creates_describes_and_deletes_acls(admin_server):
    admin = AdminClient(client_config(admin_server.bootstrap))
    extra = [binding(ResourceType.TOPIC, "tmp-", AclOperation.DESCRIBE, ResourcePatternType.PREFIXED),
             binding(ResourceType.GROUP, "tmp", AclOperation.DELETE, permission=AclPermissionType.DENY)]
    for future in admin.create_acls(CONSUMER_ACLS + extra).values():
        future.result(WAIT_S)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    assert set(admin.describe_acls(everything).result(WAIT_S)) == set(CONSUMER_ACLS + extra)
    matching = AclBindingFilter(ResourceType.TOPIC, "tmp-x", ResourcePatternType.MATCH, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(matching).result(WAIT_S) == [extra[0]]
    tmp = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    deleted = {f: fut.result(WAIT_S) for f, fut in admin.delete_acls([
        AclBindingFilter(ResourceType.TOPIC, "tmp-", ResourcePatternType.PREFIXED, None, None, AclOperation.ANY,
                         AclPermissionType.ANY),
        AclBindingFilter(ResourceType.GROUP, "tmp", ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)]).items()}
    assert sorted(map(len, deleted.values())) == [1, 1]
    assert set(admin.describe_acls(tmp).result(WAIT_S)) == set(CONSUMER_ACLS)


def test_kafka_python_admin_creates_describes_and_deletes_acls(admin_server):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    admin = KafkaAdminClient(bootstrap_servers=admin_server.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        created = ACL(ANONYMOUS, "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                      ResourcePattern(KpResourceType.GROUP, "kp-group", ACLResourcePatternType.LITERAL))
        result = admin.create_acls([created])
        assert result["succeeded"] == [created] and not result["failed"]
        kp_filter = ACLFilter(ANONYMOUS, None, ACLOperation.ANY, ACLPermissionType.ANY,
                              ResourcePatternFilter(KpResourceType.GROUP, "kp-group", ACLResourcePatternType.LITERAL))
        found, error = admin.describe_acls(kp_filter)
        assert found == [created]
        deleted = admin.delete_acls([kp_filter])
        assert [(acls, error.errno) for _, acls, error in deleted] == [([created], 0)]
        assert admin.describe_acls(kp_filter)[0] == []
    finally:
        admin.close()


def _consume(group: str, bootstrap: str, want: int) -> tuple[list[bytes], list[KafkaError]]:
    consumer = Consumer({**client_config(bootstrap), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    values, errors = [], []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and len(values) < want and not errors:
            try:
                msg = consumer.poll(0.5)
            except KafkaException as e:
                errors.append(e.args[0])
                continue
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(msg.error())
                continue
            values.append(msg.value())
        if values:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values, errors


def test_a_consumer_allowed_on_one_group_consumes_and_is_refused_on_another(admin_server, data_dir):
    admin = AdminClient(client_config(admin_server.bootstrap))
    for future in admin.create_acls(CONSUMER_ACLS).values():
        future.result(WAIT_S)  # they may exist already: creating them again changes nothing
    admin_server.stop()
    server = start_secured(data_dir, "topics=orders:2", "records.plane=memory", port=admin_server.port)
    try:
        producer = Producer(client_config(server.bootstrap))
        for i in range(10):
            producer.produce("orders", f"order-{i}".encode(), partition=i % 2)
        assert producer.flush(WAIT_S) == 0
        values, errors = _consume("allowed", server.bootstrap, want=10)
        assert sorted(values) == sorted(f"order-{i}".encode() for i in range(10)) and not errors
        values, errors = _consume("refused", server.bootstrap, want=1)
        assert not values and errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, errors
    finally:
        assert server.stop() == 0, server.log()
        admin_server.start()  # the module fixture stops it
