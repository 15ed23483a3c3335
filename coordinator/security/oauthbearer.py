"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer runs it, with KIP-768's validation
of signed JWTs (OAuthBearerValidatorCallbackHandler): the client's one message, the token's checks,
and the JSON error challenge a rejected token gets before the client's %x01 ends the exchange.
Sans-IO: the keys and the wall clock come in through OAuthConfig."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jwt

from .sasl import AuthenticationFailed

# asymmetric JWS algorithms only: a JWKS publishes public keys ("none" and HMAC are refused)
ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
INVALID_TOKEN = json.dumps({"status": "invalid_token"}, separators=(",", ":"))  # Kafka's exact bytes

# RFC 7628 §3.1 as Kafka's OAuthBearerClientInitialResponse parses it
_MESSAGE = re.compile(r"n,(?:a=([^,\x01]*))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]*\x01)*)\x01", re.S)
_KVPAIR = re.compile(r"([A-Za-z]+)=([\x21-\x7E \t\r\n]*)\x01")
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([-_~+/.A-Za-z0-9]+=*)")


class InvalidToken(Exception):
    """Why a token was refused: for the server's log only; the client is told invalid_token."""


@dataclasses.dataclass(frozen=True, slots=True)
class OAuthConfig:
    keys: Callable[[str | None], jwt.PyJWK | None]  # the JWKS key with this kid (None: the only key), or None
    clock: Callable[[], float]  # wall-clock seconds since the epoch
    audience: tuple[str, ...] = ()
    issuer: str = ""
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30


@dataclasses.dataclass(frozen=True, slots=True)
class Token:
    principal: str  # the user name: the principal is User:<principal>
    expires_at: float  # exp, seconds since the epoch
    scope: tuple[str, ...]


def validate(token: str, config: OAuthConfig) -> Token:
    """The token's principal and expiry, or InvalidToken: Kafka's ValidatorAccessTokenValidator."""
    import jwt  # here, not at start-up: PyJWT and cryptography are a tenth of what `serve` imports

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as e:
        raise InvalidToken(f"malformed token: {e}") from None
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise InvalidToken(f"algorithm {alg!r} is not accepted")
    key = config.keys(header.get("kid"))
    if key is None:
        raise InvalidToken(f"no key in the JWKS with kid {header.get('kid')!r}")
    try:
        claims = jwt.decode(token, key.key, algorithms=[alg], audience=list(config.audience) or None,
                            issuer=config.issuer or None,
                            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                                     "verify_aud": bool(config.audience), "verify_iss": bool(config.issuer),
                                     "require": ["exp", "iat"]})
    except (jwt.PyJWTError, TypeError, ValueError) as e:
        raise InvalidToken(f"{type(e).__name__}: {e}") from None
    now, skew = config.clock(), config.clock_skew_s
    exp, iat, nbf = claims["exp"], claims["iat"], claims.get("nbf")
    for name, value in (("exp", exp), ("iat", iat), ("nbf", nbf)):
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                  or not math.isfinite(value) or value < 0):
            raise InvalidToken(f"{name} is not a non-negative number of seconds")
    if now - skew >= exp:
        raise InvalidToken(f"the token expired at {exp} (now {now:.0f}, skew {skew} s)")
    if iat > now + skew:
        raise InvalidToken(f"the token is issued in the future ({iat})")
    if nbf is not None and nbf > now + skew:
        raise InvalidToken(f"the token is not valid before {nbf}")
    principal = claims.get(config.sub_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidToken(f"the claim {config.sub_claim!r} is not a non-blank string")
    return Token(principal, float(exp), _scope(claims.get(config.scope_claim), config.scope_claim))


def _scope(value, claim: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items) or len(set(items)) != len(items):
        raise InvalidToken(f"the claim {claim!r} is not a list of distinct scopes")
    return tuple(items)


class OAuthBearerServer:
    """One exchange. A valid token completes it with an empty challenge; a refused one is answered
    with the JSON error document, and the client's %x01 that follows fails it (Kafka's message for
    the 58 is that document)."""

    def __init__(self, config: OAuthConfig) -> None:
        self._config = config
        self._refused: str | None = None  # why the token was refused, once the error challenge went out
        self.user: str | None = None
        self.lifetime_ms: int | None = None  # until the token's exp: the session ends then (KIP-368)

    def respond(self, message: bytes) -> tuple[bytes, bool]:
        if self._refused is not None:
            raise AuthenticationFailed(INVALID_TOKEN, "invalid_token", self._refused)
        if message == b"\x01":
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message", "malformed",
                                       "%x01 without an error challenge")
        try:
            token, authzid = _initial_response(message.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message", "malformed", str(e)) from None
        try:
            valid = validate(token, self._config)
            if authzid and authzid != valid.principal:
                raise InvalidToken(f"authorization id {authzid!r} is not the token's principal {valid.principal!r}")
        except InvalidToken as e:
            self._refused = str(e)
            return INVALID_TOKEN.encode(), False
        self.user = valid.principal
        self.lifetime_ms = max(0, int((valid.expires_at - self._config.clock()) * 1000))
        return b"", True


def _initial_response(message: str) -> tuple[str, str]:
    """(token, authzid) of `n,[a=authzid],%x01auth=Bearer token%x01[key=value%x01...]%x01`."""
    match = _MESSAGE.fullmatch(message)
    if match is None:
        raise ValueError("not an RFC 7628 client initial response")
    pairs = dict(_KVPAIR.findall(match.group(2)))
    if "auth" not in pairs:
        raise ValueError("no auth= key")
    bearer = _BEARER.fullmatch(pairs["auth"])
    if bearer is None:
        raise ValueError("auth= is not 'Bearer <token>'")
    return bearer.group(1), match.group(1) or ""
