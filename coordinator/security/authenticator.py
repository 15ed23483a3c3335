"""The SASL exchange of one connection on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka 4.0's
SaslServerAuthenticator runs it: before authentication only ApiVersions (once), SaslHandshake and
then the mechanism's tokens are accepted — as SaslAuthenticate requests after a v1 handshake, as
bare length-prefixed frames after a v0 one (kafka-python ≤ 2.0). Anything else closes the
connection. Also KIP-368: the session's expiry and re-authentication.

It takes a frame and returns a Step that says what the connection does next; it holds no socket."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import struct
from collections.abc import Mapping

from groupd.protocol import ErrorCode, codec
from groupd.protocol.apis import ApiKey

from .oauthbearer import OAuthBearerServer, OAuthConfig
from .sasl import AuthenticationFailed, Users, new_exchange


def handshake_response(version: int, error: ErrorCode, mechanisms: list[str]):
    """SaslHandshake's answer (its handler answers with it too)."""
    return codec.build_response(ApiKey.SASL_HANDSHAKE, version, {"error_code": error, "mechanisms": mechanisms})


def authenticate_response(version: int, error: ErrorCode, message: str | None, auth_bytes: bytes = b"",
                          session_lifetime_ms: int = 0):
    """SaslAuthenticate's answer (its handler answers with it too)."""
    return codec.build_response(ApiKey.SASL_AUTHENTICATE, version, {
        "error_code": error, "error_message": message, "auth_bytes": auth_bytes,
        "session_lifetime": datetime.timedelta(milliseconds=session_lifetime_ms)})


class Action(enum.Enum):
    CONTINUE = "continue"  # send the reply (if any), wait for the next frame
    DISPATCH = "dispatch"  # an ordinary request (ApiVersions): handle it as usual
    DONE = "done"  # send the reply; the connection is authenticated as `principal`
    FAIL = "fail"  # authentication failed: after connection.failed.authentication.delay.ms send the reply, close
    CLOSE = "close"  # a protocol violation: close now, no reply


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    action: Action
    reply: bytes | None = None
    reason: str = ""  # why it failed or closed: a short code for the metric
    detail: str = ""  # ... and the facts for the log line


class State(enum.Enum):
    INITIAL = 0
    HANDSHAKE = 1  # ApiVersions answered, waiting for SaslHandshake
    AUTHENTICATE = 2  # v1: tokens in SaslAuthenticate
    AUTHENTICATE_RAW = 3  # v0: tokens as bare frames
    COMPLETE = 4


class Authenticator:
    def __init__(self, mechanisms: tuple[str, ...], users: Users, max_reauth_ms: int,
                 oauth: OAuthConfig | None = None, *, versions: Mapping[int, tuple[int, int]]) -> None:
        """`versions`: the API versions the node serves (min, max) by api key, as ApiVersions advertises."""
        self.mechanisms = mechanisms
        self._max_version = {api: hi for api, (lo, hi) in versions.items()}
        self._users = users
        self._oauth = oauth  # OAUTHBEARER's token validation, when that mechanism is enabled
        self._max_reauth_ms = max_reauth_ms
        self.state = State.INITIAL
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.reauthenticating = False
        self.expires_at: float | None = None  # monotonic seconds; None = the session never expires
        self._started_at = float("-inf")
        self._exchange = None

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def may_reauthenticate(self, now: float) -> bool:
        """KIP-368: only a session with an expiry, and not within a second of the last start."""
        return self.complete and self.expires_at is not None and now - self._started_at >= 1.0

    def receive(self, frame: bytes, now: float) -> Step:
        if self.state is State.AUTHENTICATE_RAW:
            return self._token(frame, None, now)
        api_key, version, correlation_id = codec.peek_header(frame)
        if api_key == ApiKey.API_VERSIONS and self.state is State.INITIAL and not self.reauthenticating:
            if version <= self._max_version[ApiKey.API_VERSIONS]:
                self.state = State.HANDSHAKE
            return Step(Action.DISPATCH)
        if api_key == ApiKey.SASL_HANDSHAKE and self.state in (State.INITIAL, State.HANDSHAKE, State.COMPLETE):
            return self._handshake(frame, version, correlation_id, now)
        if api_key == ApiKey.SASL_AUTHENTICATE and self.state is State.AUTHENTICATE:
            if version > self._max_version[ApiKey.SASL_AUTHENTICATE]:
                return Step(Action.CLOSE, reason="unsupported_version", detail=f"SaslAuthenticate v{version}")
            body = self._decode(frame, api_key, version)
            return self._token(body.auth_bytes, (version, correlation_id), now)
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"api key {api_key}"
        if self.state is State.AUTHENTICATE:
            return Step(Action.FAIL, self._illegal_state(api_key, version, correlation_id), reason="illegal_state",
                        detail=f"unexpected {name} during the SASL exchange")
        return Step(Action.CLOSE, reason="unauthenticated_request", detail=f"{name} before SASL authentication")

    def _illegal_state(self, api_key: int, version: int, correlation_id: int) -> bytes | None:
        """Kafka answers an out-of-order request with that API's ILLEGAL_SASL_STATE response; groupd
        does so for the two a SASL client may send (another handshake, ApiVersions), and closes
        without an answer for any other."""
        if api_key == ApiKey.SASL_HANDSHAKE and version <= self._max_version[api_key]:
            response = handshake_response(version, ErrorCode.illegal_sasl_state, [])
        elif api_key == ApiKey.API_VERSIONS and version <= self._max_version[api_key]:
            response = codec.build_response(api_key, version, {"error_code": ErrorCode.illegal_sasl_state,
                                                               "api_keys": []})
        else:
            return None
        return codec.encode_response(api_key, correlation_id, response)

    @staticmethod
    def _decode(frame: bytes, api_key: int, version: int):
        header, offset = codec.parse_header(frame, codec.is_flexible(api_key, version))
        return codec.decode_request(api_key, version, frame, offset)

    def _handshake(self, frame: bytes, version: int, correlation_id: int, now: float) -> Step:
        if version > self._max_version[ApiKey.SASL_HANDSHAKE]:
            return Step(Action.CLOSE, reason="unsupported_version", detail=f"SaslHandshake v{version}")
        mechanism = self._decode(frame, ApiKey.SASL_HANDSHAKE, version).mechanism
        enabled = list(self.mechanisms)
        reauthenticating = self.state is State.COMPLETE
        if mechanism not in enabled or (reauthenticating and mechanism != self.mechanism):
            reply = handshake_response(version, ErrorCode.unsupported_sasl_mechanism, enabled)
            return Step(Action.FAIL, codec.encode_response(ApiKey.SASL_HANDSHAKE, correlation_id, reply),
                        reason="unsupported_mechanism", detail=f"mechanism {mechanism!r} is not enabled")
        self.reauthenticating = reauthenticating
        self._started_at = now
        self.mechanism = mechanism
        self._exchange = (OAuthBearerServer(self._oauth) if mechanism == "OAUTHBEARER"
                          else new_exchange(mechanism, self._users))
        self.state = State.AUTHENTICATE if version >= 1 else State.AUTHENTICATE_RAW
        reply = handshake_response(version, ErrorCode.none, enabled)
        return Step(Action.CONTINUE, codec.encode_response(ApiKey.SASL_HANDSHAKE, correlation_id, reply))

    def _token(self, token: bytes, framing: tuple[int, int] | None, now: float) -> Step:
        """`framing`: (version, correlation id) of the SaslAuthenticate that carried the token, or
        None for a bare v0 token."""
        try:
            challenge, done = self._exchange.respond(token)
            principal = f"User:{self._exchange.user}" if done else None
            if done and self.reauthenticating and principal != self.principal:
                raise AuthenticationFailed(f"Cannot change principals during re-authentication from "
                                           f"{self.principal} to {principal}", "principal_changed")
        except AuthenticationFailed as e:
            reply = None
            if framing is not None:
                version, correlation_id = framing
                response = authenticate_response(version, ErrorCode.sasl_authentication_failed, str(e))
                reply = codec.encode_response(ApiKey.SASL_AUTHENTICATE, correlation_id, response)
            return Step(Action.FAIL, reply, reason=e.reason, detail=e.detail)
        lifetime_ms = 0
        if done:
            self.state, self.principal = State.COMPLETE, principal
            # KIP-368: connections.max.reauth.ms, capped by the credential's own expiry (a token's exp)
            limits = [ms for ms in (self._max_reauth_ms or None, getattr(self._exchange, "lifetime_ms", None))
                      if ms is not None]
            if limits:
                lifetime_ms = min(limits)
                self.expires_at = now + lifetime_ms / 1000
        if framing is None:
            reply = struct.pack(">i", len(challenge)) + challenge
        else:
            version, correlation_id = framing
            response = authenticate_response(version, ErrorCode.none, None, challenge, lifetime_ms)
            reply = codec.encode_response(ApiKey.SASL_AUTHENTICATE, correlation_id, response)
        return Step(Action.DONE if done else Action.CONTINUE, reply)

