"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's server runs them: the stored
credentials derived from a password, and one exchange (client-first → server-first →
client-final → server-final). Sans-IO; hashlib and hmac only."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import os

ITERATIONS = 4096  # Kafka's minimum, and what its clients refuse to go below
MAX_ITERATIONS = 16384  # Kafka's maximum for credentials set through AlterUserScramCredentials
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # the INT8 of the user SCRAM APIs


class ScramError(Exception):
    """The exchange failed; the reason is for the server's debug log, never the client."""


@dataclasses.dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def derive(mechanism: str, password: str, iterations: int = ITERATIONS, salt: bytes | None = None) -> ScramCredential:
    """What the server keeps of a password: a salt, StoredKey and ServerKey (never the password)."""
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)
    return from_salted_password(mechanism, salted, salt, iterations)


def from_salted_password(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The credential from SaltedPassword = Hi(password, salt, i), which is what an admin client
    sends in AlterUserScramCredentials; the salted password itself is not kept."""
    name = HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(salt, hashlib.new(name, client_key).digest(), hmac.digest(salted, b"Server Key", name),
                           iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed attribute {part[:20]!r}")
        out.setdefault(key, value)
    return out


def _saslname(name: str) -> str:
    """RFC 5802 5.1: ',' and '=' travel as '=2C' and '=3D'; any other '=' is invalid."""
    out = name.replace("=2C", ",").replace("=3D", "=")
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("bad escape in user name")
    return out


class ScramServer:
    """One exchange. `lookup(user)` returns the user's credential for this mechanism, or None;
    `server_nonce` is fixed only by tests (RFC 7677's example)."""

    def __init__(self, mechanism: str, lookup, server_nonce: str | None = None) -> None:
        self._server_nonce = server_nonce
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._step = 0
        self.user: str | None = None

    def respond(self, token: bytes) -> tuple[bytes, bool]:
        """The next server token and whether the exchange is complete. Raises ScramError."""
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise ScramError("message is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._client_first(message), False
        if self._step == 1:
            self._step = 2
            return self._client_final(message), True
        raise ScramError("exchange already complete")

    def _client_first(self, message: str) -> bytes:
        flag, _, rest = message.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag != "n":  # Kafka supports no channel binding: "y" and "p=..." fail too
            raise ScramError("channel binding is not supported")
        attrs = _attributes(bare)
        if "n" not in attrs or not attrs.get("r"):
            raise ScramError("client-first lacks n= or r=")
        user = _saslname(attrs["n"])
        if authzid and authzid != "a=" + attrs["n"]:
            raise ScramError("authorization id differs from user name")
        if attrs.get("tokenauth", "false").lower() == "true":
            raise ScramError("delegation tokens are not supported")
        credential = self._lookup(user)
        if credential is None:
            raise ScramError(f"unknown user {user!r}")
        self.user, self._credential = user, credential
        self._client_nonce = attrs["r"]
        self._nonce = attrs["r"] + (self._server_nonce or base64.b64encode(os.urandom(18)).decode())
        self._server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        self._client_first_bare = bare
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        without_proof, sep, proof = message.rpartition(",p=")
        if not sep:
            raise ScramError("client-final lacks p=")
        attrs = _attributes(without_proof)
        # Kafka 4.0 wants the combined nonce exactly. librdkafka before 2.10 (Debian's kcat) puts its
        # own nonce in front of the combined one again, which Kafka before 4.0 accepted (it checked
        # only the end): accept that one form too. The proof covers the message as sent either way.
        if attrs.get("r") not in (self._nonce, self._client_nonce + self._nonce):
            raise ScramError("nonce mismatch")
        try:  # c= is decoded, not compared with the gs2 header (Kafka does not either)
            base64.b64decode(attrs.get("c", ""), validate=True)
            client_proof = base64.b64decode(proof, validate=True)
        except ValueError:
            raise ScramError("bad base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(client_proof) != len(signature):
            raise ScramError("bad proof length")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise ScramError("invalid proof")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one exchange, as Kafka's ScramSaslClient runs it (the brokers' channel to
    each other, the CLI tools): `first()`, then `final(server_first)`, then `verify(server_final)`.
    `nonce` is fixed only by tests. Raises ScramError on a server that refuses or cannot be trusted
    (a nonce that does not extend ours, fewer iterations than Kafka's minimum, a wrong signature)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self._hash = HASHES[mechanism]
        self._password = password
        self._nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        name = user.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self._nonce}"

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        message = server_first.decode()
        attrs = _attributes(message)
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ScramError("server nonce does not extend the client's")
        # bounded both ways: a hostile peer's huge count would hold the event loop in pbkdf2
        if not (iterations.isdigit() and len(iterations) <= 6 and ITERATIONS <= int(iterations) <= MAX_ITERATIONS) \
                or salt is None:
            raise ScramError(f"iterations {iterations[:16]!r} outside {ITERATIONS}..{MAX_ITERATIONS} or no salt")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
        except ValueError:
            raise ScramError("bad base64 salt") from None
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), salt_bytes, int(iterations))
        without_proof = f"c=biws,r={nonce}"  # biws: base64 of the gs2 header "n,,"
        auth_message = f"{self._first_bare},{message},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._expected = b"v=" + base64.b64encode(hmac.digest(hmac.digest(salted, b"Server Key", self._hash),
                                                              auth_message, self._hash))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        if not hmac.compare_digest(server_final, self._expected):
            raise ScramError("the server's signature does not verify (not the server that holds this user's "
                             "credential)")
