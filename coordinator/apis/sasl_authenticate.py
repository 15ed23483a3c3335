"""SaslAuthenticate (36), v0–v2.

v1 adds SessionLifetimeMs (KIP-368: how long the session lasts, 0 = no expiry) to the response;
v2 is flexible. The exchange itself is run by coordinator/security/authenticator.py; a SaslAuthenticate
that gets here (no exchange in progress) is answered ILLEGAL_SASL_STATE, connection open.
"""

from __future__ import annotations

import datetime

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from . import Request

KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = (0, 2)


def response(version: int, error: ErrorCode, message: str | None, auth_bytes: bytes = b"",
             session_lifetime_ms: int = 0):
    return build_response(KEY, version, {"error_code": error, "error_message": message, "auth_bytes": auth_bytes,
                                         "session_lifetime": datetime.timedelta(milliseconds=session_lifetime_ms)})


def handle(node, request: Request):
    return response(request.version, ErrorCode.illegal_sasl_state,
                    "Unexpected SaslAuthenticate: authentication has already completed or not begun")
