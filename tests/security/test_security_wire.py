"""Listeners, TLS and SASL on the wire, against the real server: each listener advertises its own
address; a SASL listener serves nothing before authentication; SASL failures are answered and
closed; a TLS listener never speaks plaintext; an expired SASL session is closed."""

from __future__ import annotations

import socket
import ssl
import struct
import urllib.request

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support import certs as test_certs
from tests.support.process import GroupdProcess, WireClient, free_port


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return test_certs.make(str(tmp_path_factory.mktemp("certs")))


class Ports:
    def __init__(self) -> None:
        self.internal, self.external, self.secure, self.metrics = (free_port() for _ in range(4))


@pytest.fixture(scope="module")
def ports():
    return Ports()


@pytest.fixture(scope="module")
def server(tmp_path_factory, certs, ports):
    s = GroupdProcess(str(tmp_path_factory.mktemp("security")),
                      f"listeners=INTERNAL://127.0.0.1:{ports.internal},EXTERNAL://127.0.0.1:{ports.external},"
                      f"SECURE://127.0.0.1:{ports.secure}",
                      "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,SECURE:SSL",
                      f"advertised.listeners=INTERNAL://groupd-internal:{ports.internal},EXTERNAL://localhost:19093",
                      "sasl.users=alice:alice-secret", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
                      f"ssl.keystore.location={certs.server_keystore}", f"ssl.truststore.location={certs.ca}",
                      "ssl.client.auth=requested", f"metrics.listener=http://127.0.0.1:{ports.metrics}/metrics",
                      "log.level=debug",  # successful authentications are logged at debug, with the principal
                      port=ports.internal).start()
    yield s
    assert s.stop() == 0, s.log()


def addresses(c: WireClient) -> tuple[tuple[str, int], tuple[str, int], tuple[str, int]]:
    """(Metadata's broker, FindCoordinator v3's node, FindCoordinator v4's node)."""
    broker = c.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False}).brokers[0]
    v3 = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    v4 = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]}).coordinators[0]
    return (broker.host, broker.port), (v3.host, v3.port), (v4.host, v4.port)


def plain_login(c: WireClient, user: str = "alice", password: str = "alice-secret"):
    handshake = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert handshake.error_code is ErrorCode.none, handshake
    return c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})


def tls_client(bootstrap: str, certs, client_cert: bool = True) -> WireClient:
    ctx = ssl.create_default_context(cafile=certs.ca)
    if client_cert:
        ctx.load_cert_chain(certs.client_cert, certs.client_key)
    c = WireClient(bootstrap)
    c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
    return c


def test_each_listener_advertises_its_own_address(server, ports, certs):
    with WireClient(f"127.0.0.1:{ports.internal}") as c:
        assert addresses(c) == (("groupd-internal", ports.internal),) * 3
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        assert plain_login(c).error_code is ErrorCode.none
        assert addresses(c) == (("localhost", 19093),) * 3
    with tls_client(f"127.0.0.1:{ports.secure}", certs) as c:  # no advertised entry: its listeners entry
        assert addresses(c) == (("127.0.0.1", ports.secure),) * 3


def test_nothing_but_api_versions_and_sasl_before_authentication(server, ports):
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        versions = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[ApiKey.SASL_HANDSHAKE] == (0, 1) and advertised[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        _, data = c.frame(ApiKey.METADATA, 1, {"topics": []})
        c.send_raw(data)
        assert c.closed_by_server()


def test_plain_over_v0_handshake_uses_bare_frames(server, ports):
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        assert c.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code is ErrorCode.none
        token = b"alice\0alice\0alice-secret"  # kafka-python 2.0's PLAIN, without SaslAuthenticate
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.read_frame() == b""  # PLAIN's empty challenge
        assert addresses(c)[0] == ("localhost", 19093)


def test_wrong_password_is_answered_58_then_closed(server, ports):
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        response = plain_login(c, password="guess")
        assert response.error_code is ErrorCode.sasl_authentication_failed
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert c.closed_by_server()
    assert "guess" not in server.log()
    assert "authentication failed peer=127.0.0.1:" in server.log()


def test_unsupported_mechanism_gets_33_with_the_enabled_ones(server, ports):
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        response = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
        assert response.error_code is ErrorCode.unsupported_sasl_mechanism
        assert response.mechanisms == ("PLAIN", "SCRAM-SHA-512")
        assert c.closed_by_server()


def test_sasl_on_a_plaintext_listener_is_illegal_state_and_keeps_the_connection(server, ports):
    with WireClient(f"127.0.0.1:{ports.internal}") as c:
        response = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert (response.error_code, response.mechanisms) == (ErrorCode.illegal_sasl_state, ())
        assert c.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b""}).error_code is ErrorCode.illegal_sasl_state
        assert addresses(c)[0][0] == "groupd-internal"


def test_a_tls_listener_does_not_speak_plaintext(server, ports):
    with WireClient(f"127.0.0.1:{ports.secure}") as c:
        _, data = c.frame(ApiKey.API_VERSIONS, 0, {})
        c.send_raw(data)
        c.sock.settimeout(10)
        received = b""
        try:
            while chunk := c.sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
        assert received == b"" or received[0] == 0x15, received  # nothing, or a TLS alert record


def test_requested_client_certificate_may_be_left_out(server, ports, certs):
    with tls_client(f"127.0.0.1:{ports.secure}", certs, client_cert=False) as c:
        assert addresses(c)[0] == ("127.0.0.1", ports.secure)
        port = c.sock.getsockname()[1]
    assert f"peer=127.0.0.1:{port} listener=SECURE mechanism=TLS principal=User:ANONYMOUS" in server.log()


def test_the_principal_of_a_client_certificate_is_its_subject(server, ports, certs):
    with tls_client(f"127.0.0.1:{ports.secure}", certs) as c:
        assert addresses(c)[0] == ("127.0.0.1", ports.secure)
        port = c.sock.getsockname()[1]
    assert f"peer=127.0.0.1:{port} listener=SECURE mechanism=TLS principal={test_certs.CLIENT_PRINCIPAL}" in server.log()


def test_the_principal_after_sasl_is_the_user(server, ports):
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        assert plain_login(c).error_code is ErrorCode.none
        port = c.sock.getsockname()[1]
    assert f"peer=127.0.0.1:{port} listener=EXTERNAL mechanism=PLAIN principal=User:alice" in server.log()


def test_untrusted_client_certificate_is_refused(server, ports, certs):
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.load_cert_chain(certs.untrusted_cert, certs.untrusted_key)
    with socket.create_connection(("127.0.0.1", ports.secure), timeout=10) as raw:
        with pytest.raises(ssl.SSLError, match="ALERT_UNKNOWN_CA"):  # the alert, not just a closed socket
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.recv(1)  # TLS 1.3: the client learns of the refusal (the alert) on its first read
    assert "listener=SECURE mechanism=TLS reason=tls_handshake" in server.log()


def test_authentications_are_counted_by_listener_and_result(server, ports):
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        plain_login(c, password="wrong-again")
        assert c.closed_by_server()
    with WireClient(f"127.0.0.1:{ports.external}") as c:
        assert plain_login(c).error_code is ErrorCode.none
    text = urllib.request.urlopen(f"http://127.0.0.1:{ports.metrics}/metrics", timeout=10).read().decode()
    counted = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
               if line.startswith("groupd_authentications_total")}
    assert counted['groupd_authentications_total{listener="EXTERNAL",mechanism="PLAIN",result="bad_credentials"}'] >= 1
    assert counted['groupd_authentications_total{listener="EXTERNAL",mechanism="PLAIN",result="success"}'] >= 1


def test_an_expired_session_is_closed_at_its_next_request(tmp_path):
    port = free_port()
    s = GroupdProcess(str(tmp_path), f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.users=alice:pw",
                      "connections.max.reauth.ms=1000", port=port).start()
    try:
        with WireClient(s.bootstrap) as c:
            response = plain_login(c, password="pw")
            assert response.session_lifetime.total_seconds() == 1.0
            assert c.closed_at_a_request()  # the session lasts 1 s
        assert "reason=session-expired principal=User:alice" in s.log()
    finally:
        assert s.stop() == 0, s.log()
