"""OAUTHBEARER on the wire against the real server: a signed JWT checked with the keys of a JWKS
(file: and http:) gives User:<sub> and a session that ends at the token's exp; every refused token
(expired, wrong audience or issuer, bad signature, unknown kid, alg none, ...) is answered with
Kafka's JSON error challenge, and the client's %x01 then gets SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations

import time

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support import oauth
from tests.support.process import GroupdProcess, WireClient, free_port

INVALID_TOKEN = b'{"status":"invalid_token"}'
K1, K2 = oauth.Signer("k1"), oauth.Signer("k2", kind="EC")
STRANGER = oauth.Signer("k1")  # another key under a published kid: its signatures do not verify


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("oauth")
    url = oauth.write_jwks(str(data_dir / "jwks.json"), K1, K2)
    port = free_port()
    s = GroupdProcess(str(data_dir), f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", *oauth.settings(url),
                      "log.level=debug", port=port).start()
    yield s
    assert s.stop() == 0, s.log()


def login(c: WireClient, token: str, authzid: str = ""):
    assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code is ErrorCode.none
    return c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": oauth.initial_response(token, authzid)})


@pytest.mark.parametrize("signer", [K1, K2], ids=["RS256", "ES256"])
def test_a_valid_token_authenticates_as_its_subject_until_it_expires(server, signer):
    with WireClient(server.bootstrap) as c:
        response = login(c, signer.token(sub=f"svc-{signer.alg}", lifetime=300))
        assert (response.error_code, response.auth_bytes) == (ErrorCode.none, b"")
        assert 200 <= response.session_lifetime.total_seconds() <= 300  # the token's exp, not "never"
        assert c.request(ApiKey.METADATA, 1, {"topics": []}).brokers  # served: authenticated
        port = c.sock.getsockname()[1]
    assert f"peer=127.0.0.1:{port} listener=SASL_PLAINTEXT mechanism=OAUTHBEARER principal=User:svc-{signer.alg}" \
        in server.log()


REFUSED = {
    "expired": lambda: K1.token(lifetime=-60),  # beyond the 5 s of skew
    "wrong audience": lambda: K1.token(aud="someone-else"),
    "wrong issuer": lambda: K1.token(iss="https://evil.test"),
    "bad signature": lambda: STRANGER.token(),
    "unknown kid": lambda: K1.token(kid="k9"),
    "alg none": lambda: oauth.unsigned(),
    "no exp": lambda: K1.token(exp=None),
    "no iat": lambda: K1.token(iat=None),
    "blank subject": lambda: K1.token(sub=" "),
    "issued in the future": lambda: K1.token(iat=int(time.time()) + 3600),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_refused_token_gets_the_error_challenge_then_58(server, case):
    with WireClient(server.bootstrap) as c:
        first = login(c, REFUSED[case]())
        assert (first.error_code, first.auth_bytes) == (ErrorCode.none, INVALID_TOKEN)
        second = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert (second.error_code, second.error_message) == (ErrorCode.sasl_authentication_failed,
                                                             INVALID_TOKEN.decode())
        assert c.closed_by_server()
    assert "mechanism=OAUTHBEARER reason=invalid_token" in server.log()


def test_an_authorization_id_must_be_the_subject(server):
    with WireClient(server.bootstrap) as c:
        assert login(c, K1.token(sub="alice"), authzid="alice").error_code is ErrorCode.none
    with WireClient(server.bootstrap) as c:
        assert login(c, K1.token(sub="alice"), authzid="admin").auth_bytes == INVALID_TOKEN


def test_a_malformed_client_message_fails_at_once(server):
    with WireClient(server.bootstrap) as c:
        assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code is ErrorCode.none
        response = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,\x01auth=Basic abc\x01\x01"})
        assert response.error_code is ErrorCode.sasl_authentication_failed
        assert c.closed_by_server()


def test_the_session_ends_at_the_tokens_exp(server):
    with WireClient(server.bootstrap) as c:
        response = login(c, K1.token(lifetime=2))
        assert 0 < response.session_lifetime.total_seconds() <= 2
        assert c.closed_at_a_request(), "the connection outlived its token"


class JwksServer:
    """The JWKS over HTTP on 127.0.0.1, from whichever signers `keys` holds now."""

    def __init__(self, *signers: oauth.Signer) -> None:
        self.keys = list(signers)
        self.fetches = 0
        self.endpoint = oauth.JsonEndpoint(self.answer)
        self.url = f"{self.endpoint.url}/jwks.json"

    def answer(self, _method: str, _headers, _body: bytes) -> tuple[int, dict]:
        self.fetches += 1
        return 200, {"keys": [s.jwk for s in self.keys]}

    def close(self) -> None:
        self.endpoint.close()


def test_an_http_jwks_is_refreshed_and_a_new_key_is_accepted(tmp_path):
    jwks = JwksServer(K1)
    port = free_port()
    s = GroupdProcess(str(tmp_path), f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                      *oauth.settings(jwks.url, "sasl.oauthbearer.jwks.endpoint.refresh.ms=200"), port=port).start()
    try:
        with WireClient(s.bootstrap) as c:
            assert login(c, K2.token()).auth_bytes == INVALID_TOKEN  # not published yet
        jwks.keys.append(K2)
        accepted = False
        deadline = time.monotonic() + 30
        while not accepted and time.monotonic() < deadline:
            with WireClient(s.bootstrap) as c:
                accepted = login(c, K2.token()).auth_bytes == b""
        assert accepted, "the key published later was never accepted"
        with WireClient(s.bootstrap) as c:
            assert login(c, K1.token()).auth_bytes == b""
    finally:
        jwks.close()
        assert s.stop() == 0, s.log()


def test_a_jwks_that_cannot_be_read_stops_start_up(tmp_path):
    port = free_port()
    s = GroupdProcess(str(tmp_path), f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                      *oauth.settings(f"file://{tmp_path}/missing.json"), port=port)
    with pytest.raises(RuntimeError, match="cannot load the JWKS"):
        s.start()
    assert "Traceback" not in s.log()


def test_reauthentication_with_a_fresh_token_extends_the_session(server):
    with WireClient(server.bootstrap) as c:
        first = login(c, K1.token(sub="carol", lifetime=60))
        assert first.error_code is ErrorCode.none
        renewed = None
        deadline = time.monotonic() + 30
        while renewed is None and time.monotonic() < deadline:  # KIP-368: not within 1 s of the last start
            handshake = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})
            if handshake.error_code is ErrorCode.none:
                renewed = c.request(ApiKey.SASL_AUTHENTICATE, 2,
                                    {"auth_bytes": oauth.initial_response(K1.token(sub="carol", lifetime=240))})
            else:
                assert handshake.error_code is ErrorCode.illegal_sasl_state
                time.sleep(0.2)
        assert renewed is not None and renewed.error_code is ErrorCode.none
        assert renewed.session_lifetime > first.session_lifetime
        assert c.request(ApiKey.METADATA, 1, {"topics": []}).brokers


def test_a_v0_handshake_carries_the_token_in_a_bare_frame(server):
    with WireClient(server.bootstrap) as c:  # kafka-python <= 2.0: no SaslAuthenticate
        assert c.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "OAUTHBEARER"}).error_code is ErrorCode.none
        token = oauth.initial_response(K1.token(sub="old-client"))
        c.send_raw(len(token).to_bytes(4, "big") + token)
        assert c.read_frame() == b""
        assert c.request(ApiKey.METADATA, 1, {"topics": []}).brokers
