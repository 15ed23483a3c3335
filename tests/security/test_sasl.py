"""SASL as the server runs it, without sockets: SCRAM (RFC 5802/7677) and PLAIN (RFC 4616) with
Kafka's checks and messages, and the per-connection exchange of coordinator/security/authenticator.py."""

import base64
import struct

import pytest
from kafka.net.sasl.scram import ScramClient

from groupd.coordinator.apis import SUPPORTED_VERSIONS
from groupd.coordinator.security.authenticator import Action, Authenticator, State
from groupd.coordinator.security.sasl import AuthenticationFailed, PlainServer, ScramMechanism, Users
from groupd.coordinator.security.scram import ScramError, ScramServer, derive
from groupd.coordinator.security.tls import certificate_principal
from groupd.protocol import ErrorCode, codec
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USERS = Users({"alice": "alice-secret", "a,b=c": "pw"}, MECHANISMS)


def test_scram_sha_256_matches_rfc_7677_example():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = derive("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first, done = server.respond(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert (first, done) == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                             b"i=4096", False)
    final, done = server.respond(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                 b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert (final, done) == (b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", True)
    assert server.user == "user"


def scram_exchange(mechanism: str, user: str, password: str, escape: bool = False) -> ScramMechanism:
    client = ScramClient(user.replace("=", "=3D").replace(",", "=2C") if escape else user, password, mechanism)
    server = ScramMechanism(mechanism, USERS)
    server_first, done = server.respond(client.first_message())
    assert not done
    client.process_server_first_message(server_first)
    server_final, done = server.respond(client.final_message())
    assert done
    client.process_server_final_message(server_final)  # raises unless the server proved it knows the key
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_kafka_pythons_client(mechanism):
    assert scram_exchange(mechanism, "alice", "alice-secret").user == "alice"


def test_scram_user_names_arrive_escaped():
    assert scram_exchange("SCRAM-SHA-512", "a,b=c", "pw", escape=True).user == "a,b=c"


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_scram_failure_says_the_same_for_a_wrong_password_and_an_unknown_user(user, password):
    with pytest.raises(AuthenticationFailed) as e:
        scram_exchange("SCRAM-SHA-512", user, password)
    assert str(e.value) == ("Authentication failed during authentication due to invalid credentials with SASL "
                            "mechanism SCRAM-SHA-512")
    assert e.value.reason == "bad_credentials"


def test_scram_refuses_a_nonce_the_server_did_not_extend():
    server = ScramServer("SCRAM-SHA-256", lambda user: USERS.scram("SCRAM-SHA-256", user))
    server.respond(b"n,,n=alice,r=abc")
    with pytest.raises(ScramError, match="nonce"):
        server.respond(b"c=biws,r=abc,p=AAAA")


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0alice-secret", None),
    (b"alice\0alice\0alice-secret", None),  # kafka-python sends the user as authzid
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0bob\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an authorization id that is different "
                                  "from username"),
    (b"\0\0pw", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
])
def test_plain_checks_and_messages_are_kafkas(token, message):
    server = PlainServer(USERS)
    if message is None:
        assert server.respond(token) == (b"", True) and server.user == "alice"
    else:
        with pytest.raises(AuthenticationFailed, match=message):
            server.respond(token)


# -- the connection's exchange --------------------------------------------------------------------


def frame(api: ApiKey, version: int, values: dict, correlation_id: int = 7) -> bytes:
    request = codec.build_request(api, version, values)
    return codec.encode_request(RequestHeader(api, version, correlation_id, "test"), request)[4:]


def reply(api: ApiKey, version: int, data: bytes):
    return codec.decode_response(api, version, data[4:])[1]


def handshake(auth: Authenticator, mechanism: str = "PLAIN", version: int = 1, now: float = 0.0):
    return auth.receive(frame(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism}), now)


def authenticate(auth: Authenticator, token: bytes, version: int = 2, now: float = 0.0):
    return auth.receive(frame(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}), now)


def test_api_versions_then_handshake_then_plain_authenticates():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    assert auth.receive(frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                       "client_software_version": "1"}), 0).action is Action.DISPATCH
    step = handshake(auth)
    assert step.action is Action.CONTINUE
    assert reply(ApiKey.SASL_HANDSHAKE, 1, step.reply).mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    step = authenticate(auth, b"\0alice\0alice-secret")
    assert step.action is Action.DONE and auth.principal == "User:alice"
    response = reply(ApiKey.SASL_AUTHENTICATE, 2, step.reply)
    assert (response.error_code, response.auth_bytes, response.session_lifetime.total_seconds()) == \
        (ErrorCode.none, b"", 0)


def test_any_other_request_before_authentication_closes_without_a_reply():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    step = auth.receive(frame(ApiKey.METADATA, 1, {"topics": None}), 0)
    assert (step.action, step.reply) == (Action.CLOSE, None)


def test_a_second_api_versions_closes():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    api_versions = frame(ApiKey.API_VERSIONS, 0, {})
    assert auth.receive(api_versions, 0).action is Action.DISPATCH
    assert auth.receive(api_versions, 0).action is Action.CLOSE


def test_unsupported_mechanism_fails_with_33_and_the_enabled_list():
    auth = Authenticator(("SCRAM-SHA-512",), USERS, 0, versions=SUPPORTED_VERSIONS)
    step = handshake(auth, "PLAIN")
    assert step.action is Action.FAIL
    response = reply(ApiKey.SASL_HANDSHAKE, 1, step.reply)
    assert (response.error_code, response.mechanisms) == (ErrorCode.unsupported_sasl_mechanism, ("SCRAM-SHA-512",))


def test_bad_credentials_fail_with_58_and_a_message():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    handshake(auth)
    step = authenticate(auth, b"\0alice\0guess", version=1)
    assert step.action is Action.FAIL and "guess" not in step.detail
    response = reply(ApiKey.SASL_AUTHENTICATE, 1, step.reply)
    assert response.error_code is ErrorCode.sasl_authentication_failed
    assert response.error_message == "Authentication failed: Invalid username or password"


def test_other_requests_during_the_exchange_fail_it():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    handshake(auth)
    assert auth.receive(frame(ApiKey.METADATA, 1, {"topics": None}), 0).action is Action.FAIL


def test_v0_handshake_carries_bare_tokens():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    assert handshake(auth, version=0).action is Action.CONTINUE
    assert auth.state is State.AUTHENTICATE_RAW
    step = auth.receive(b"\0alice\0alice-secret", 0)
    assert (step.action, step.reply) == (Action.DONE, struct.pack(">i", 0))  # PLAIN's empty challenge, framed


def test_v0_scram_answers_each_token_in_a_bare_frame():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    handshake(auth, "SCRAM-SHA-256", version=0)
    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
    step = auth.receive(client.first_message(), 0)
    assert step.action is Action.CONTINUE
    (size,) = struct.unpack_from(">i", step.reply)
    client.process_server_first_message(step.reply[4:4 + size])
    step = auth.receive(client.final_message(), 0)
    assert step.action is Action.DONE
    client.process_server_final_message(step.reply[4:])


def test_session_lifetime_is_sent_and_enforced():
    auth = Authenticator(MECHANISMS, USERS, max_reauth_ms=60_000, versions=SUPPORTED_VERSIONS)
    handshake(auth, now=100.0)
    step = authenticate(auth, b"\0alice\0alice-secret", version=1, now=100.0)
    assert reply(ApiKey.SASL_AUTHENTICATE, 1, step.reply).session_lifetime.total_seconds() == 60
    assert not auth.expired(159.9) and auth.expired(160.0)
    assert not auth.may_reauthenticate(100.5)  # not within a second of the last start (KIP-368)
    assert auth.may_reauthenticate(101.0)


def test_reauthentication_must_keep_the_principal():
    users = Users({"alice": "a", "bob": "b"}, MECHANISMS)
    auth = Authenticator(MECHANISMS, users, max_reauth_ms=60_000, versions=SUPPORTED_VERSIONS)
    handshake(auth)
    authenticate(auth, b"\0alice\0a")
    assert handshake(auth, now=30.0).action is Action.CONTINUE and auth.reauthenticating
    step = authenticate(auth, b"\0bob\0b", now=30.0)
    assert step.action is Action.FAIL and step.reason == "principal_changed"
    assert "from User:alice to User:bob" in reply(ApiKey.SASL_AUTHENTICATE, 2, step.reply).error_message


def test_reauthentication_renews_the_session():
    auth = Authenticator(MECHANISMS, USERS, max_reauth_ms=60_000, versions=SUPPORTED_VERSIONS)
    handshake(auth)
    authenticate(auth, b"\0alice\0alice-secret")
    handshake(auth, now=50.0)
    assert authenticate(auth, b"\0alice\0alice-secret", now=50.0).action is Action.DONE
    assert not auth.expired(100.0) and auth.expired(110.0)


def test_sasl_apis_are_advertised_in_kafkas_ranges():
    assert SUPPORTED_VERSIONS[ApiKey.SASL_HANDSHAKE] == (0, 1)
    assert SUPPORTED_VERSIONS[ApiKey.SASL_AUTHENTICATE] == (0, 2)


# -- certificates ---------------------------------------------------------------------------------


def test_certificate_principal_is_the_subject_in_rfc_2253_order():
    peercert = {"subject": ((("countryName", "US"),), (("organizationName", "Example, Inc."),),
                            (("organizationalUnitName", "ops"),), (("commonName", "alice"),))}
    assert certificate_principal(peercert) == r"User:CN=alice,OU=ops,O=Example\, Inc.,C=US"


def test_no_certificate_is_anonymous():
    assert certificate_principal(None) == certificate_principal({}) == "User:ANONYMOUS"


def final_nonce_prefixed(prefix_of) -> bytes:
    """A SCRAM-SHA-256 exchange whose client-final carries `prefix_of(client nonce)` before the
    combined nonce, with a proof computed over that message (what librdkafka < 2.10 sends)."""
    server = ScramMechanism("SCRAM-SHA-256", USERS)
    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
    client_nonce = client.nonce
    server_first, _ = server.respond(client.first_message())
    client.process_server_first_message(server_first)
    client.nonce = prefix_of(client_nonce) + client.nonce
    client.auth_message = client.auth_message.rsplit(b",c=biws,", 1)[0] + b",c=biws,r=" + client.nonce
    signature = client.hmac(client.stored_key, client.auth_message)
    client.client_proof = bytes(a ^ b for a, b in zip(client.client_key, signature))
    return server.respond(client.final_message())[0]


def test_scram_accepts_old_librdkafkas_doubled_client_nonce():
    assert final_nonce_prefixed(lambda client_nonce: client_nonce).startswith(b"v=")


def test_scram_refuses_any_other_nonce_prefix():
    with pytest.raises(AuthenticationFailed):
        final_nonce_prefixed(lambda client_nonce: b"x")


def test_scram_refuses_channel_binding_flags():
    server = ScramServer("SCRAM-SHA-256", lambda user: USERS.scram("SCRAM-SHA-256", user))
    with pytest.raises(ScramError, match="channel binding"):
        server.respond(b"y,,n=alice,r=abc")


def test_a_second_handshake_during_the_exchange_is_answered_illegal_sasl_state():
    auth = Authenticator(MECHANISMS, USERS, 0, versions=SUPPORTED_VERSIONS)
    handshake(auth)
    step = handshake(auth)
    assert step.action is Action.FAIL
    assert reply(ApiKey.SASL_HANDSHAKE, 1, step.reply).error_code is ErrorCode.illegal_sasl_state
