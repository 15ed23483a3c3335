"""Real clients log in with OAUTHBEARER — a JWT the test mints and publishes the key of in a JWKS —
and join a group: confluent-kafka (oauth_cb) over SASL_PLAINTEXT and SASL_SSL, kafka-python
(sasl_oauth_token_provider), aiokafka (the same, async), KafkaJS (oauthBearerProvider) and the Java
client (Kafka's KIP-768 client-credentials login against a token endpoint served here) over
SASL_PLAINTEXT. A token the server refuses reaches librdkafka as an authentication error."""

from __future__ import annotations

import asyncio
import base64
import glob
import os
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import Consumer
from kafka import KafkaConsumer
from kafka.net.sasl.oauth import AbstractTokenProvider

from tests.support import certs as test_certs
from tests.support import oauth
from tests.support.harness import CLIENTS_DIR
from tests.support.process import GroupdProcess, free_port

SIGNER = oauth.Signer("idp-1")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return test_certs.make(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def server(tmp_path_factory, certs):
    data_dir = tmp_path_factory.mktemp("oauth-clients")
    url = oauth.write_jwks(str(data_dir / "jwks.json"), SIGNER)
    plaintext, tls = free_port(), free_port()
    s = GroupdProcess(str(data_dir), f"listeners=SASL_PLAINTEXT://127.0.0.1:{plaintext},SASL_SSL://127.0.0.1:{tls}",
                      *oauth.settings(url), f"ssl.keystore.location={certs.server_keystore}", "topics=t:1",
                      "group.initial.rebalance.delay.ms=0",
                      "log.level=debug",  # successful authentications are logged at debug, with the principal
                      port=plaintext).start()
    s.addresses = {"SASL_PLAINTEXT": f"127.0.0.1:{plaintext}", "SASL_SSL": f"127.0.0.1:{tls}"}
    yield s
    assert s.stop() == 0, s.log()


def poll_until(poll, done, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        poll()
    assert done(), what


def confluent(server, certs, listener: str, group: str, token: str, errors: list) -> Consumer:
    config = {"bootstrap.servers": server.addresses[listener], "group.id": group, "session.timeout.ms": 6000,
              "security.protocol": listener.lower(), "sasl.mechanism": "OAUTHBEARER",
              "oauth_cb": lambda _config: (token, time.time() + 300), "error_cb": errors.append}
    if listener == "SASL_SSL":
        config["ssl.ca.location"] = certs.ca
    return Consumer(config)


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_confluent_joins_a_group_with_a_token(server, certs, listener):
    assigned, errors = [], []
    consumer = confluent(server, certs, listener, f"oauth-confluent-{listener}", SIGNER.token(sub="svc-confluent"),
                         errors)
    try:
        consumer.subscribe(["t"], on_assign=lambda _, partitions: assigned.extend(partitions))
        poll_until(lambda: consumer.poll(0.2), lambda: assigned, f"confluent never assigned: {errors}")
    finally:
        consumer.close()
    assert [p.topic for p in assigned] == ["t"] and errors == []
    assert "mechanism=OAUTHBEARER principal=User:svc-confluent" in server.log()


def test_a_refused_token_is_an_authentication_error_in_confluent(server, certs):
    errors = []
    consumer = confluent(server, certs, "SASL_PLAINTEXT", "oauth-refused", SIGNER.token(aud="elsewhere"), errors)
    try:
        consumer.subscribe(["t"])
        poll_until(lambda: consumer.poll(0.2), lambda: errors, "confluent reported no error")
    finally:
        consumer.close()
    assert "invalid_token" in str(errors[0]), errors


class Provider(AbstractTokenProvider):
    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def token(self) -> str:
        return self._token


def test_kafka_python_joins_a_group_with_a_token(server):
    consumer = KafkaConsumer(bootstrap_servers=server.addresses["SASL_PLAINTEXT"], group_id="oauth-kafka-python",
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=Provider(SIGNER.token(sub="svc-kafka-python")),
                             session_timeout_ms=6000)
    try:
        consumer.subscribe(["t"])
        poll_until(lambda: consumer.poll(200), lambda: consumer.assignment(), "kafka-python never assigned")
        assert {p.topic for p in consumer.assignment()} == {"t"}
    finally:
        consumer.close()
    assert "mechanism=OAUTHBEARER principal=User:svc-kafka-python" in server.log()


def test_kafkajs_joins_a_group_with_a_token(server, clients):
    member = clients("kafkajs", "subscribe", server.addresses["SASL_PLAINTEXT"], topic="t", group="oauth-kafkajs",
                     seconds=0, **{"sasl.mechanism": "OAUTHBEARER",
                                   "sasl.oauthbearer.token": SIGNER.token(sub="svc-kafkajs")})
    member.wait_for(lambda e: e["event"] == "assigned" and bool(e.get("member_id")), timeout=120)
    assert member.errors() == []
    assert "mechanism=OAUTHBEARER principal=User:svc-kafkajs" in server.log()


class TokenEndpoint:
    """A client-credentials token endpoint (RFC 6749 4.4) on 127.0.0.1: a POST with the right Basic
    credentials gets a token minted for `sub`."""

    def __init__(self, client_id: str, secret: str, sub: str) -> None:
        self.expected = "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
        self.sub = sub
        self.requests: list[str] = []
        self.endpoint = oauth.JsonEndpoint(self.answer)
        self.url = f"{self.endpoint.url}/token"

    def answer(self, method: str, headers, body: bytes) -> tuple[int, dict]:
        form = body.decode()
        self.requests.append(form)
        client_credentials = "grant_type=client_credentials" in form
        if (method, headers.get("Authorization")) != ("POST", self.expected) or not client_credentials:
            return 401, {"error": "invalid_client"}
        return 200, {"access_token": SIGNER.token(sub=self.sub, lifetime=3600), "token_type": "Bearer",
                     "expires_in": 3600}

    def close(self) -> None:
        self.endpoint.close()


def test_java_logs_in_with_client_credentials(server, clients, monkeypatch):
    """Kafka's own KIP-768 login: the Java client fetches a token from the endpoint and presents it."""
    if not glob.glob(os.path.join(CLIENTS_DIR, "java", "lib", "jose4j-*.jar")):
        pytest.fail(f"no jose4j under {CLIENTS_DIR}/java/lib: re-run .ci/install-clients")  # never a skip
    idp = TokenEndpoint("svc-java-client", "s3cret", sub="svc-java")
    # Kafka 4.x fetches only the OAuth URLs this system property lists (its SSRF guard)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.url}")
    try:
        member = clients("java", "subscribe", server.addresses["SASL_PLAINTEXT"], topic="t", group="oauth-java",
                         seconds=0, **{
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                             "sasl.login.callback.handler.class":
                                 "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                             "sasl.oauthbearer.token.endpoint.url": idp.url,
                             "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
                                                 ' required clientId="svc-java-client" clientSecret="s3cret";'})
        event = member.wait_for(lambda e: e["event"] == "assigned" and bool(e.get("member_id")), timeout=120)
        assert event["assignment"] == ["t-0"] and member.errors() == []
    finally:
        idp.close()
    assert idp.requests, "the Java client never asked the token endpoint"
    assert "mechanism=OAUTHBEARER principal=User:svc-java" in server.log()


def test_aiokafka_joins_a_group_with_a_token(server):
    class AioProvider(AioTokenProvider):
        async def token(self) -> str:
            return SIGNER.token(sub="svc-aiokafka")

    async def join() -> set[str]:
        consumer = AIOKafkaConsumer("t", bootstrap_servers=server.addresses["SASL_PLAINTEXT"],
                                    group_id="oauth-aiokafka", security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=AioProvider(),
                                    session_timeout_ms=6000)
        await consumer.start()
        try:
            deadline = time.monotonic() + 60
            while not consumer.assignment() and time.monotonic() < deadline:
                await consumer.getmany(timeout_ms=200)
            return {p.topic for p in consumer.assignment()}
        finally:
            await consumer.stop()

    assert asyncio.run(join()) == {"t"}
    assert "mechanism=OAUTHBEARER principal=User:svc-aiokafka" in server.log()
