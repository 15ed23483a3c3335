"""SaslHandshake (17), v0–v1.

The two versions have the same bytes; the version says how the SASL tokens that follow travel:
v0 as bare length-prefixed frames, v1 inside SaslAuthenticate requests. On a SASL listener the
exchange is run by coordinator/security/authenticator.py before any request reaches a handler; a handshake
that gets here (a PLAINTEXT or SSL listener, or a SASL connection that has authenticated and may not
re-authenticate now) is answered ILLEGAL_SASL_STATE with no mechanisms, and the connection stays open.
"""

from __future__ import annotations

from groupd.coordinator.security.authenticator import handshake_response
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

from .request import Request

KEY = ApiKey.SASL_HANDSHAKE
VERSIONS = (0, 1)


def handle(node, request: Request):
    return handshake_response(request.version, ErrorCode.illegal_sasl_state, [])
