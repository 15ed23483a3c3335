"""Real clients through TLS and SASL (issue 17): every stack forms a group through SASL_SSL with
SCRAM-SHA-512 and through SSL with a client certificate; PLAIN over SASL_PLAINTEXT; bad credentials
are refused and the client reports why. Each scenario runs its clients in parallel."""

from __future__ import annotations

import re
import subprocess
import threading
import urllib.request

import pytest

from tests.support import certs as test_certs
from tests.support.harness import ClientProcess, wait_until
from tests.support.process import GroupdProcess, free_port

pytestmark = pytest.mark.clients

STACKS = ["confluent", "kafka-python", "aiokafka", "java", "kafkajs"]
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return test_certs.make(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def server(tmp_path_factory, certs):
    sasl_ssl, ssl, sasl_plaintext = free_port(), free_port(), free_port()
    s = GroupdProcess(str(tmp_path_factory.mktemp("secure")),
                      f"listeners=SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{ssl},"
                      f"SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext}",
                      "sasl.users=alice:alice-secret", f"ssl.keystore.location={certs.server_keystore}",
                      f"ssl.truststore.location={certs.ca}", "ssl.client.auth=required", "topics=t:2",
                      "group.initial.rebalance.delay.ms=0", port=sasl_ssl).start()
    s.addresses = {"SASL_SSL": f"127.0.0.1:{sasl_ssl}", "SSL": f"127.0.0.1:{ssl}",
                   "SASL_PLAINTEXT": f"127.0.0.1:{sasl_plaintext}"}
    yield s
    assert s.stop() == 0, s.log()


# Each client's names for: protocol, mechanism, user, password, CA file, certificate file, key file
# (None: the client has no such setting). Java takes PEM keystores instead (below).
NAMES = {
    "librdkafka": ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
                   "ssl.certificate.location", "ssl.key.location"),
    "python": ("security.protocol", "sasl.mechanism", "sasl.plain.username", "sasl.plain.password", "ssl.cafile",
               "ssl.certfile", "ssl.keyfile"),
    "kafkajs": (None, "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
                "ssl.certificate.location", "ssl.key.location"),
}
FAMILY = {"confluent": "librdkafka", "kcat": "librdkafka", "kafka-python": "python", "aiokafka": "python",
          "kafkajs": "kafkajs"}


def security(stack: str, listener: str, certs, user: str = "alice", password: str = "alice-secret",
             mechanism: str = "SCRAM-SHA-512", client_cert: bool = True) -> dict:
    """The client settings of `stack` for `listener`, in that client's own names. SSL listeners
    get the trusted client certificate unless `client_cert` is False."""
    sasl, tls, mtls = listener.startswith("SASL_"), listener.endswith("SSL"), listener == "SSL" and client_cert
    if stack == "java":
        opts = {"security.protocol": listener}
        if sasl:
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            opts.update({"sasl.mechanism": mechanism, "sasl.jaas.config":
                         f'org.apache.kafka.common.security.{module} required username="{user}" password="{password}";'})
        if tls:
            opts.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca})
        if mtls:
            opts.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": certs.client_keystore})
        return opts
    protocol, mech, user_key, password_key, ca, cert, key = NAMES[FAMILY[stack]]
    opts = {protocol: listener.lower() if FAMILY[stack] == "librdkafka" else listener} if protocol else {}
    if sasl:
        opts.update({mech: mechanism, user_key: user, password_key: password})
    if tls:
        opts[ca] = certs.ca
    if mtls:
        opts.update({cert: certs.client_cert, key: certs.client_key})
    return opts


class Kcat:
    """kcat (librdkafka 2.0.2) as a balanced consumer; its group events are read from stderr."""

    def __init__(self, bootstrap: str, group: str, opts: dict) -> None:
        args = ["kcat", "-b", bootstrap, "-G", group, "t", "-o", "end"]
        for k, v in opts.items():
            args += ["-X", f"{k}={v}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True).start()

    def assigned(self) -> bool:
        return any(re.search(r"rebalanced .*: assigned: t \[", line) for line in self.lines)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


def is_assigned(event: dict) -> bool:
    return event["event"] == "assigned" and bool(event.get("member_id"))


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_every_stack_forms_a_group(server, certs, clients, listener):
    """SASL_SSL with SCRAM-SHA-512, and SSL with a client certificate (ssl.client.auth=required)."""
    bootstrap = server.addresses[listener]
    members = {stack: clients(stack, "subscribe", bootstrap, topic="t", group=f"{listener}-{stack}", seconds=0,
                              **security(stack, listener, certs)) for stack in STACKS}
    kcat = Kcat(bootstrap, f"{listener}-kcat", security("kcat", listener, certs))
    try:
        for stack, member in members.items():
            member.wait_for(is_assigned, timeout=120)
            assert member.errors() == [], (stack, member.errors())
        wait_until(kcat.assigned, 120, f"kcat joins through {listener}: {kcat.lines[-5:]}")
    finally:
        kcat.close()


def test_plain_over_sasl_plaintext(server, certs, clients):
    bootstrap = server.addresses["SASL_PLAINTEXT"]
    members = {stack: clients(stack, "subscribe", bootstrap, topic="t", group=f"plain-{stack}", seconds=0,
                              **security(stack, "SASL_PLAINTEXT", certs, mechanism="PLAIN"))
               for stack in ("confluent", "kafka-python", "java")}
    for stack, member in members.items():
        member.wait_for(is_assigned, timeout=120)
        assert member.errors() == [], (stack, member.errors())


def test_bad_credentials_are_refused_and_the_client_says_so(server, certs, clients):
    sasl_ssl = server.addresses["SASL_SSL"]
    cases = {
        "wrong password (confluent)": (clients("confluent", "subscribe", sasl_ssl, topic="t", group="bad-1", seconds=0,
                                               **security("confluent", "SASL_SSL", certs, password="guess")),
                                       SCRAM_FAILED),
        "unknown user (Java)": (clients("java", "subscribe", sasl_ssl, topic="t", group="bad-2", seconds=0,
                                        **security("java", "SASL_SSL", certs, user="mallory")), SCRAM_FAILED),
        "wrong PLAIN password (kafkajs)": (
            clients("kafkajs", "subscribe", server.addresses["SASL_PLAINTEXT"], topic="t", group="bad-3", seconds=0,
                    **security("kafkajs", "SASL_PLAINTEXT", certs, mechanism="PLAIN", password="guess")),
            "Invalid username or password"),
    }
    for what, (client, message) in cases.items():
        error = client.wait_for(lambda e: e["event"] == "error" and message in e["message"], timeout=120)
        assert not client.assignment(), (what, error)
    assert "guess" not in server.log()


def test_certificates_are_refused_and_the_client_says_so(server, certs, clients):
    """ssl.client.auth=required: the TLS alert reaches the client before the connection closes."""
    ssl_listener = server.addresses["SSL"]
    untrusted = clients("confluent", "subscribe", ssl_listener, topic="t", group="cert-1", seconds=0,
                        **security("confluent", "SSL", certs, client_cert=False),
                        **{"ssl.certificate.location": certs.untrusted_cert, "ssl.key.location": certs.untrusted_key})
    missing = clients("java", "subscribe", ssl_listener, topic="t", group="cert-2", seconds=0,
                      **security("java", "SSL", certs, client_cert=False))
    untrusted.wait_for(lambda e: e["event"] == "error" and "alert unknown ca" in e["message"], timeout=120)
    missing.wait_for(lambda e: e["event"] == "error" and e["type"] == "SslAuthenticationException", timeout=120)
    assert not untrusted.assignment() and not missing.assignment()


def test_clients_reauthenticate_before_their_session_expires(tmp_path, certs, clients):
    """connections.max.reauth.ms (KIP-368): Java and librdkafka re-authenticate on the same
    connection at ~90 % of the session lifetime, and stay in their group. (A client that a loaded
    machine delays past the expiry is disconnected and reconnects, as with Kafka: librdkafka then
    reports a transport error, so only authentication failures are ruled out here.)"""
    port, metrics_port = free_port(), free_port()
    s = GroupdProcess(str(tmp_path), f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.users=alice:alice-secret",
                      "connections.max.reauth.ms=4000", "topics=t:2", "group.initial.rebalance.delay.ms=0",
                      f"metrics.listener=http://127.0.0.1:{metrics_port}/metrics", port=port).start()
    try:
        members = {stack: clients(stack, "subscribe", s.bootstrap, topic="t", group=f"reauth-{stack}", seconds=10,
                                  **security(stack, "SASL_PLAINTEXT", certs, mechanism=mechanism))
                   for stack, mechanism in (("java", "SCRAM-SHA-512"), ("confluent", "SCRAM-SHA-256"))}
        for stack, member in members.items():
            member.wait_for(lambda e: e["event"] == "summary", timeout=120)
            assert member.wait_for(is_assigned, timeout=1), (stack, member.events)
            assert not [e for e in member.errors() if "Authentication failed" in e["message"]], (stack, member.events)
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            assert re.search(rf'groupd_authentications_total{{listener="SASL_PLAINTEXT",mechanism="{mechanism}",'
                             rf'result="reauthenticated"}} [1-9]', text), text
    finally:
        assert s.stop() == 0, s.log()
