"""The SCRAM user APIs (DescribeUserScramCredentials, AlterUserScramCredentials) against the real
server with the authorizer on: Kafka's per-user errors, CLUSTER authorization, credentials kept in
the data dir across restarts, and a user created through confluent-kafka's AdminClient logging in
with SCRAM-SHA-512 (and not with PLAIN) and joining a group."""

from __future__ import annotations

import hashlib
import os
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.net.sasl.scram import ScramClient

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.authz import authorizer_settings
from tests.support.process import GroupdProcess, WireClient, free_port

SHA256, SHA512 = 1, 2
ADMIN = ("admin", "admin-secret")


class Ports:
    def __init__(self) -> None:
        self.sasl, self.plain = free_port(), free_port()


def settings(ports: Ports) -> list[str]:
    return [f"listeners=SASL_PLAINTEXT://127.0.0.1:{ports.sasl},PLAINTEXT://127.0.0.1:{ports.plain}",
            "sasl.users=admin:admin-secret,old:old-secret", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "topics=t:1", "group.initial.rebalance.delay.ms=0",
            *authorizer_settings(super_users=("User:admin",), allow_everyone=True)]


@pytest.fixture(scope="module")
def ports():
    return Ports()


@pytest.fixture(scope="module")
def server(tmp_path_factory, ports):
    s = GroupdProcess(str(tmp_path_factory.mktemp("scram-users")), *settings(ports), port=ports.sasl).start()
    # ACLs on the cluster: from now on only the super user may alter or describe it
    admin = AdminClient(librdkafka(ports, *ADMIN, "PLAIN"))
    for future in admin.create_acls([AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                                "User:admin", "*", AclOperation.ALL,
                                                AclPermissionType.ALLOW)]).values():
        future.result(30)
    yield s
    assert s.stop() == 0, s.log()


def librdkafka(ports: Ports, user: str, password: str, mechanism: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{ports.sasl}", "security.protocol": "sasl_plaintext",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def admin_client(ports: Ports) -> WireClient:
    c = WireClient(f"127.0.0.1:{ports.sasl}")
    assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code is ErrorCode.none
    assert c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0admin\0admin-secret"}).error_code \
        is ErrorCode.none
    return c


def upsertion(name: str, password: str, mechanism: int = SHA512, iterations: int = 4096) -> dict:
    salt = os.urandom(16)
    hash_name = "sha256" if mechanism == SHA256 else "sha512"
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)}


def alter(c: WireClient, deletions=(), upsertions=()) -> list[tuple[str, ErrorCode, str | None]]:
    response = c.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": list(deletions),
                                                                  "upsertions": list(upsertions)})
    return [(r.user, r.error_code, r.error_message) for r in response.results]


def describe(c: WireClient, *names: str):
    return c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                     {"users": [{"name": n} for n in names] if names else None})


def credentials(c: WireClient, *names: str) -> dict[str, object]:
    """user → sorted [(mechanism, iterations)] or its error code."""
    return {r.user: r.error_code if r.error_code else sorted((i.mechanism, i.iterations) for i in r.credential_infos)
            for r in describe(c, *names).results}


def scram_login(ports: Ports, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> ErrorCode:
    with WireClient(f"127.0.0.1:{ports.sasl}") as c:
        assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}).error_code is ErrorCode.none
        client = ScramClient(user, password, mechanism)
        first = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first_message()})
        if first.error_code:
            return first.error_code
        client.process_server_first_message(first.auth_bytes)
        final = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final_message()})
        if final.error_code is ErrorCode.none:
            client.process_server_final_message(final.auth_bytes)  # the server proved it holds the key
        return final.error_code


def test_errors_per_user_are_kafkas(server, ports):
    with admin_client(ports) as c:
        results = alter(c, deletions=[{"name": "nobody", "mechanism": SHA256}, {"name": "", "mechanism": SHA256}],
                        upsertions=[upsertion("few", "pw", iterations=4095), upsertion("many", "pw", iterations=16385),
                                    upsertion("bad-mech", "pw", mechanism=0), upsertion("twice", "pw"),
                                    upsertion("twice", "pw", mechanism=SHA256), upsertion("fine", "pw")])
        assert results == [
            ("fine", ErrorCode.none, None),
            ("nobody", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
            ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
            ("few", ErrorCode.unacceptable_credential, "Too few iterations"),
            ("many", ErrorCode.unacceptable_credential, "Too many iterations"),
            ("bad-mech", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            ("twice", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")]
        assert credentials(c, "fine", "twice", "fine") == {"fine": ErrorCode.duplicate_resource,
                                                           "twice": ErrorCode.resource_not_found}
        assert credentials(c, "fine") == {"fine": [(SHA512, 4096)]}


def test_cluster_authorization_is_needed(server, ports):
    with WireClient(f"127.0.0.1:{ports.plain}") as c:  # User:ANONYMOUS: no ACL on the cluster allows it
        assert alter(c, upsertions=[upsertion("z", "pw"), upsertion("y", "pw")]) == [
            ("y", ErrorCode.cluster_authorization_failed, None), ("z", ErrorCode.cluster_authorization_failed, None)]
        response = describe(c, "admin")
        assert response.error_code is ErrorCode.cluster_authorization_failed
        assert [(r.user, r.error_code) for r in response.results] == [("", ErrorCode.cluster_authorization_failed)]
    with admin_client(ports) as c:
        assert "z" not in credentials(c)


def test_new_user_logs_in_with_scram_at_once_and_not_with_plain(server, ports):
    with admin_client(ports) as c:
        assert alter(c, upsertions=[upsertion("dave", "dave-secret", SHA256, 8192)]) == [("dave", ErrorCode.none, None)]
        assert credentials(c, "dave") == {"dave": [(SHA256, 8192)]}
    assert scram_login(ports, "dave", "dave-secret", "SCRAM-SHA-256") is ErrorCode.none
    assert scram_login(ports, "dave", "wrong", "SCRAM-SHA-256") is ErrorCode.sasl_authentication_failed
    assert scram_login(ports, "dave", "dave-secret", "SCRAM-SHA-512") is ErrorCode.sasl_authentication_failed
    with WireClient(f"127.0.0.1:{ports.sasl}") as c:
        c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        plain = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0dave\0dave-secret"})
        assert plain.error_code is ErrorCode.sasl_authentication_failed


def test_confluent_admin_creates_a_user_who_joins_a_group(server, ports):
    admin = AdminClient(librdkafka(ports, *ADMIN, "PLAIN"))
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)]
    assert set(admin.describe_user_scram_credentials().result(30)) >= {"admin", "old", "carol"}

    assigned = []
    consumer = Consumer({**librdkafka(ports, "carol", "carol-secret", "SCRAM-SHA-512"), "group.id": "carol-group",
                         "session.timeout.ms": 6000})
    try:
        consumer.subscribe(["t"], on_assign=lambda _, partitions: assigned.extend(partitions))
        deadline = time.monotonic() + 60
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert [p.topic for p in assigned] == ["t"]
    finally:
        consumer.close()

    for future in admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            "carol", ScramMechanism.SCRAM_SHA_512)]).values():
        future.result(30)
    assert scram_login(ports, "carol", "carol-secret") is ErrorCode.sasl_authentication_failed


def test_credentials_survive_a_restart_and_a_torn_write(tmp_path):
    ports = Ports()
    s = GroupdProcess(str(tmp_path), *settings(ports), port=ports.sasl).start()
    try:
        with admin_client(ports) as c:
            assert alter(c, deletions=[{"name": "old", "mechanism": SHA512}],
                         upsertions=[upsertion("erin", "erin-secret")]) == [("old", ErrorCode.none, None),
                                                                           ("erin", ErrorCode.none, None)]
        assert s.stop() == 0, s.log()
        stored = (tmp_path / "scram-credentials.json").read_text()
        assert "erin-secret" not in stored and '"stored_key"' in stored
        (tmp_path / "scram-credentials.json.tmp").write_text('{"users": {"mallory"')  # a write cut short
        s.start()
        with admin_client(ports) as c:
            # the deleted sasl.users credential stays deleted; the other mechanism of that user stays
            assert credentials(c, "erin", "old", "mallory") == {"erin": [(SHA512, 4096)], "old": [(SHA256, 4096)],
                                                                "mallory": ErrorCode.resource_not_found}
        assert scram_login(ports, "erin", "erin-secret") is ErrorCode.none
        assert scram_login(ports, "old", "old-secret") is ErrorCode.sasl_authentication_failed
    finally:
        assert s.stop() == 0, s.log()


def test_a_damaged_credential_file_stops_start_up_with_one_line(tmp_path):
    (tmp_path / "scram-credentials.json").write_text('{"users": {"erin": {"SCRAM-SHA-512": {"salt": 1}}}}')
    ports = Ports()
    s = GroupdProcess(str(tmp_path), *settings(ports), port=ports.sasl)
    with pytest.raises(RuntimeError, match="the SCRAM credential file .* is damaged"):
        s.start()
    assert "Traceback" not in s.log()


def quotas(c: WireClient, *components: tuple[str, int, str | None], version: int = 1):
    return c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, {
        "components": [{"entity_type": t, "match_type": m, "match": s} for t, m, s in components], "strict": False})


@pytest.mark.parametrize("components,error,message", [
    ([("user", 0, "alice")], ErrorCode.none, None),
    ([("user", 2, None), ("client-id", 1, None)], ErrorCode.none, None),
    ([("", 0, "x")], ErrorCode.invalid_request, "Invalid empty entity type."),
    ([("user", 0, "a"), ("user", 2, None)], ErrorCode.invalid_request,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", 0, "g")], ErrorCode.unsupported_version, "Unsupported entity type group"),
    ([("user", 0, None)], ErrorCode.invalid_request,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", 1, "a")], ErrorCode.invalid_request,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 7, None)], ErrorCode.invalid_request, "Unknown match type 7"),
    ([("ip", 2, None), ("client-id", 2, None)], ErrorCode.invalid_request,
     "Invalid entity filter component combination. IP filter component should not be used with user or "
     "clientId filter component."),
])
def test_client_quotas_none_kept_and_filters_checked_as_kafka(server, ports, components, error, message):
    """groupd keeps no client quotas: a valid filter matches nothing; a bad one gets Kafka's error and
    message, with entries null."""
    with admin_client(ports) as c:
        for version in (0, 1):
            r = quotas(c, *components, version=version)
            assert (r.error_code, r.error_message) == (error, message)
            assert r.entries == (() if error is ErrorCode.none else None)


def test_client_quotas_need_describe_configs_on_the_cluster(server, ports):
    with WireClient(f"127.0.0.1:{ports.sasl}") as c:  # old: a PLAIN user without ACLs on the cluster
        assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code is ErrorCode.none
        assert c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0old\0old-secret"}).error_code \
            is ErrorCode.none
        r = quotas(c, ("user", 0, "old"))
    assert (r.error_code, r.entries) == (ErrorCode.cluster_authorization_failed, None)
