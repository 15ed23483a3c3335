"""Signing keys, a JWKS and tokens for the OAUTHBEARER tests: an identity provider in a few lines."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from email.message import Message
from typing import Callable

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://idp.test"
AUDIENCE = "groupd"


class Signer:
    """A private key and its kid; `jwk` is its public half as a JWKS entry."""

    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        if kind == "RSA":
            self.key, self.alg = rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"
            self.jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        else:
            self.key, self.alg = ec.generate_private_key(ec.SECP256R1()), "ES256"
            self.jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key()))
        self.jwk.update({"kid": kid, "use": "sig"})

    def token(self, sub: str = "alice", lifetime: float = 300, kid: str | None = None, **claims) -> str:
        now = time.time()
        body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now), "exp": int(now + lifetime),
                "scope": "kafka", **claims}
        return jwt.encode({k: v for k, v in body.items() if v is not None}, self.key, algorithm=self.alg,
                          headers={"kid": kid or self.kid})


def write_jwks(path: str, *signers: Signer) -> str:
    """Write the JWKS of `signers` to `path` (atomically); returns its file: URL."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"keys": [s.jwk for s in signers]}, f)
    os.replace(tmp, path)
    return "file://" + path


def unsigned(sub: str = "alice", lifetime: float = 300) -> str:
    """An alg none token (KIP-255's unsecured kind), which a JWKS-validating server must refuse."""
    now = time.time()
    return jwt.encode({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now), "exp": int(now + lifetime)},
                      None, algorithm="none")


def settings(jwks_url: str, *extra: str) -> list[str]:
    return ["sasl.enabled.mechanisms=OAUTHBEARER,SCRAM-SHA-512", f"sasl.oauthbearer.jwks.endpoint.url={jwks_url}",
            f"sasl.oauthbearer.expected.audience={AUDIENCE}", f"sasl.oauthbearer.expected.issuer={ISSUER}",
            "sasl.oauthbearer.clock.skew.seconds=5", *extra]


def initial_response(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


class JsonEndpoint:
    """An identity provider's HTTP endpoint on 127.0.0.1: `answer(method, headers, body)` gives the
    status and the JSON document of every GET and POST."""

    def __init__(self, answer: Callable[[str, Message, bytes], tuple[int, dict]]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self.reply("GET")

            def do_POST(self) -> None:  # noqa: N802
                self.reply("POST")

            def reply(self, method: str) -> None:
                status, document = answer(method, self.headers,
                                          self.rfile.read(int(self.headers.get("Content-Length", 0))))
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
