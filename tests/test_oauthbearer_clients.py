"""Real clients log in with OAUTHBEARER — a JWT the test mints and publishes the key of in a JWKS —
and join a group: confluent-kafka (oauth_cb) over SASL_PLAINTEXT and SASL_SSL, kafka-python
(sasl_oauth_token_provider) and KafkaJS (oauthBearerProvider) over SASL_PLAINTEXT. A token the server
refuses reaches librdkafka as an authentication error. (Java needs a login callback handler class
for a token of its own: not covered.)"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from kafka import KafkaConsumer
from kafka.net.sasl.oauth import AbstractTokenProvider

from tests import certs as test_certs
from tests import oauth
from tests.support import GroupdProcess, free_port

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
