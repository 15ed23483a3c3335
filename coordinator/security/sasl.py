"""SASL credentials and mechanisms: the users of `sasl.users` as groupd keeps them (a salted hash
for PLAIN, SCRAM credentials per SCRAM mechanism, never the password), and one server exchange per
mechanism, with Kafka's messages for the client. Sans-IO."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping

from .scram import HASHES, ScramCredential, ScramError, ScramServer, derive


class AuthenticationFailed(Exception):
    """`str(e)` is what the client is told (SaslAuthenticate's ErrorMessage); `reason` (a short code
    for the metric) and `detail` are for the server's log, and never hold a password."""

    def __init__(self, message: str, reason: str, detail: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.detail = detail or message


class Users:
    """The credentials of `sasl.users`, derived once at start-up, and the SCRAM credentials that
    AlterUserScramCredentials sets (coordinator/security/scram_users.py), which every listener sees at once."""

    def __init__(self, users: Mapping[str, str], mechanisms: Iterable[str]) -> None:
        mechanisms = tuple(mechanisms)
        self._plain = {}
        if "PLAIN" in mechanisms:
            for user, password in users.items():
                salt = os.urandom(16)
                self._plain[user] = (salt, hashlib.sha256(salt + password.encode()).digest())
        # every SCRAM mechanism has a table (the admin API may fill one that is not enabled yet);
        # sasl.users fills only the enabled ones: the derivation costs 4096 hash rounds each
        self._scram = {m: {user: derive(m, password) for user, password in users.items()} if m in mechanisms
                       else {} for m in HASHES}

    def plain_matches(self, user: str, password: str) -> bool:
        salt, digest = self._plain.get(user, (b"", b""))
        return hmac.compare_digest(hashlib.sha256(salt + password.encode()).digest(), digest) and bool(digest)

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._scram[mechanism].get(user)

    def set_scram(self, mechanism: str, user: str, credential: ScramCredential | None) -> None:
        """Set or (None) remove the user's credential for the mechanism."""
        if credential is None:
            self._scram[mechanism].pop(user, None)
        else:
            self._scram[mechanism][user] = credential

    def scram_credentials(self) -> dict[str, dict[str, ScramCredential]]:
        """user → {mechanism: credential}, for every user with at least one."""
        out: dict[str, dict[str, ScramCredential]] = {}
        for mechanism, users in self._scram.items():
            for user, credential in users.items():
                out.setdefault(user, {})[mechanism] = credential
        return out


class PlainServer:
    """RFC 4616: one token, `authzid NUL user NUL password`; Kafka's checks and messages."""

    def __init__(self, users: Users) -> None:
        self._users = users
        self.user: str | None = None

    def respond(self, token: bytes) -> tuple[bytes, bool]:
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}",
                                       "malformed")
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified", "malformed")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified", "malformed")
        if not self._users.plain_matches(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password", "bad_credentials")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username", "bad_credentials")
        self.user = user
        return b"", True


class ScramMechanism:
    """ScramServer with Kafka's one message for every failure: it never tells whether the user exists."""

    def __init__(self, mechanism: str, users: Users) -> None:
        self._mechanism = mechanism
        self._server = ScramServer(mechanism, lambda user: users.scram(mechanism, user))

    @property
    def user(self) -> str | None:
        return self._server.user

    def respond(self, token: bytes) -> tuple[bytes, bool]:
        try:
            return self._server.respond(token)
        except ScramError as e:
            raise AuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self._mechanism}", "bad_credentials", str(e)) from None


def new_exchange(mechanism: str, users: Users):
    return PlainServer(users) if mechanism == "PLAIN" else ScramMechanism(mechanism, users)
