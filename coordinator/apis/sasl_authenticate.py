"""SaslAuthenticate (36), v0–v2.

v1 adds SessionLifetimeMs (KIP-368: how long the session lasts, 0 = no expiry) to the response;
v2 is flexible. The exchange itself is run by coordinator/security/authenticator.py; a SaslAuthenticate
that gets here (no exchange in progress) is answered ILLEGAL_SASL_STATE, connection open.
"""

from __future__ import annotations

from groupd.coordinator.security.authenticator import authenticate_response
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

from .request import Request

KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = (0, 2)


def handle(node, request: Request):
    return authenticate_response(request.version, ErrorCode.illegal_sasl_state,
                                 "Unexpected SaslAuthenticate: authentication has already completed or not begun")
