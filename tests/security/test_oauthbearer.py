"""OAUTHBEARER without sockets: the client's RFC 7628 message as Kafka parses it, and the token's
checks against a fixed clock (the exchange reads no clock of its own)."""

import jwt
import pytest

from groupd.coordinator.apis import SUPPORTED_VERSIONS
from groupd.coordinator.security.authenticator import Action, Authenticator
from groupd.coordinator.security.oauthbearer import (
    INVALID_TOKEN,
    InvalidToken,
    OAuthBearerServer,
    OAuthConfig,
    validate,
)
from groupd.coordinator.security.sasl import AuthenticationFailed
from groupd.protocol.apis import ApiKey
from tests.support import oauth

from .test_sasl import frame

SIGNER = oauth.Signer("k1")
NOW = 1_900_000_000.0


def config(**kw) -> OAuthConfig:
    key = jwt.PyJWK(SIGNER.jwk)
    return OAuthConfig(lambda kid: key if kid in ("k1", None) else None, lambda: NOW, (oauth.AUDIENCE,),
                       oauth.ISSUER, **kw)


def token(**claims) -> str:
    body = {"sub": "alice", "iss": oauth.ISSUER, "aud": oauth.AUDIENCE, "iat": NOW - 10, "exp": NOW + 60, **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, SIGNER.key, algorithm="RS256",
                      headers={"kid": "k1"})


@pytest.mark.parametrize("message", [
    b"n,,\x01auth=Bearer %s\x01\x01",
    b"n,,\x01traceId=abc 123\x01auth=bearer   %s\x01\x01",  # extensions before auth; the scheme in any case
    b"n,a=alice,\x01auth=Bearer %s\x01logicalCluster=lkc-1\x01\x01",
])
def test_the_client_message_forms_kafka_accepts(message):
    server = OAuthBearerServer(config())
    assert server.respond(message.replace(b"%s", token().encode())) == (b"", True)
    assert server.user == "alice" and server.lifetime_ms == 60_000


@pytest.mark.parametrize("message", [
    b"n,,auth=Bearer t\x01\x01", b"y,,\x01auth=Bearer t\x01\x01", b"n,,\x01auth=Bearer t\x01",
    b"n,,\x01auth=Bearer t t\x01\x01", b"n,,\x01key=v\x01\x01", b"n,,\x01a-b=v\x01auth=Bearer t\x01\x01", b"\x01",
])
def test_malformed_messages_fail_at_once(message):
    with pytest.raises(AuthenticationFailed, match="Invalid OAUTHBEARER client first message"):
        OAuthBearerServer(config()).respond(message)


def test_a_refused_token_is_answered_with_the_error_document_then_the_x01_fails():
    server = OAuthBearerServer(config())
    assert server.respond(oauth.initial_response(token(exp=NOW - 31))) == (INVALID_TOKEN.encode(), False)
    with pytest.raises(AuthenticationFailed) as failed:
        server.respond(b"\x01")
    assert str(failed.value) == '{"status":"invalid_token"}' and "expired" in failed.value.detail


def test_clock_skew_applies_to_exp_iat_and_nbf():
    assert validate(token(exp=NOW - 29), config()).principal == "alice"
    assert validate(token(iat=NOW + 29, nbf=NOW + 29), config()).principal == "alice"
    for claims in ({"exp": NOW - 31}, {"iat": NOW + 31}, {"nbf": NOW + 31}):
        with pytest.raises(InvalidToken):
            validate(token(**claims), config())


def test_the_principal_and_scope_claims_are_configurable():
    valid = validate(token(client_id="svc", scp=["a", "b"]), config(sub_claim="client_id", scope_claim="scp"))
    assert (valid.principal, valid.scope) == ("svc", ("a", "b"))
    with pytest.raises(InvalidToken, match="distinct"):
        validate(token(scope="a a"), config())
    with pytest.raises(InvalidToken, match="'sub'"):
        validate(token(sub="  "), config())


@pytest.mark.parametrize("max_reauth_ms, lifetime_ms", [(0, 60_000), (10_000, 10_000), (120_000, 60_000)])
def test_the_session_lasts_until_exp_capped_by_connections_max_reauth_ms(max_reauth_ms, lifetime_ms):
    auth = Authenticator(("OAUTHBEARER",), None, max_reauth_ms, config(), versions=SUPPORTED_VERSIONS)
    assert auth.receive(frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}), 5.0).action is Action.CONTINUE
    step = auth.receive(frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": oauth.initial_response(token())}), 5.0)
    assert step.action is Action.DONE and auth.principal == "User:alice"
    assert auth.expires_at == 5.0 + lifetime_ms / 1000
