"""The admin HTTP endpoint on `admin.listener` (off by default): JSON over HTTP/1.1 for the fault
injection of `groupd chaos ...` (coordinator/chaos/faults.py) and a readiness probe. Every request passes
`authorized` first: the one place where credentials are checked.

    GET    /ready                     200 once every offsets partition has loaded, else 503
    GET    /chaos                     the armed faults
    DELETE /chaos                     disarm them all
    POST   /chaos/rebalance           {"group"}
    POST   /chaos/expire              {"group", "members": [..] | null for all}
    POST   /chaos/error               {"api", "error", "group"?, "count" | "for_ms"}
    POST   /chaos/delay               {"api", "delay_ms", "group"?, "count" | "for_ms"}
    POST   /chaos/move-coordinator    {"group", "for_ms"}
    POST   /chaos/drop-connections    {"client_id"?}
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any
from urllib.parse import urlsplit

from groupd.coordinator.chaos.faults import Chaos, FaultError
from groupd.coordinator.security.sasl import Users
from groupd.protocol import ErrorCode

from .listen import bind_failed

log = logging.getLogger("groupd.admin")

MAX_BODY = 64 * 1024
READ_TIMEOUT_S = 10.0


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def authorized(headers: dict[str, str], users: Users | None, super_users: frozenset[str]) -> bool:
    """Whether the request may use the endpoint: anyone on its (loopback) listener when groupd has
    no `sasl.users`; else HTTP Basic credentials of one of them (a `super.users` member, when that
    is set), checked as SASL/PLAIN checks them."""
    if users is None:
        return True
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, sep, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return False
    return bool(sep) and users.plain_matches(user, password) and (not super_users or f"User:{user}" in super_users)


class AdminEndpoint:
    def __init__(self, chaos: Chaos, ready, users: Users | None = None, super_users: frozenset[str] = frozenset()) -> None:
        self.chaos = chaos
        self.ready = ready  # () -> bool
        self.users = users  # sasl.users (PLAIN-checked), when configured: HTTP Basic is required
        self.super_users = super_users
        self.server: asyncio.AbstractServer | None = None

    async def start(self, url: str) -> str:
        parts = urlsplit(url)
        host = parts.hostname or "127.0.0.1"
        try:
            self.server = await asyncio.start_server(self._serve, host, parts.port)
        except OSError as e:
            raise bind_failed("admin.listener", host, parts.port, e) from None
        return url

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, headers, body = await asyncio.wait_for(_read(reader), READ_TIMEOUT_S)
            if not authorized(headers, self.users, self.super_users):
                raise HttpError(401, "credentials required")
            status, answer = 200, await self._route(method, path.split("?", 1)[0].rstrip("/"), body)
        except HttpError as e:
            status, answer = e.status, {"error": str(e)}
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                ValueError) as e:
            status, answer = 400, {"error": f"bad request: {e}"}
        except Exception as e:  # a bug: this request fails, with one line, and the endpoint serves on
            log.error("admin request failed: %r", e)
            status, answer = 500, {"error": "internal error (see the server log)"}
        payload = json.dumps(answer).encode()
        writer.write(f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    async def _route(self, method: str, path: str, body: dict) -> Any:
        chaos = self.chaos
        if (method, path) == ("GET", "/ready"):
            if not self.ready():
                raise HttpError(503, "offsets partitions still loading")
            return {"ready": True}
        if (method, path) == ("GET", "/chaos"):
            return {"faults": chaos.faults.list()}
        if (method, path) == ("DELETE", "/chaos"):
            return {"cleared": chaos.faults.clear()}
        if method != "POST" or not path.startswith("/chaos/"):
            raise HttpError(404, f"no such endpoint: {method} {path}")
        try:
            return await self._chaos(path[len("/chaos/"):], body)
        except FaultError as e:
            raise HttpError(400, str(e)) from None
        except KeyError as e:
            raise HttpError(400, f"missing field {e}") from None

    async def _chaos(self, op: str, body: dict) -> Any:
        chaos, show = self.chaos, self.chaos.faults.show
        bounds = {"count": _number(body, "count"), "for_ms": _number(body, "for_ms")}
        if op == "rebalance":
            return _group_result(await chaos.rebalance(body["group"]), body["group"])
        if op == "expire":
            return _group_result(await chaos.expire(body["group"], body.get("members")), body["group"])
        if op == "error":
            return show(chaos.error(body["api"], body["error"], body.get("group"), **bounds))
        if op == "delay":
            delay_ms = _number(body, "delay_ms", required=True)
            return show(chaos.delay(body["api"], delay_ms, body.get("group"), **bounds))
        if op == "move-coordinator":
            return show(chaos.move_coordinator(body["group"], _number(body, "for_ms", required=True)))
        if op == "drop-connections":
            return {"dropped": chaos.drop_connections(body.get("client_id"))}
        raise HttpError(404, f"no such chaos operation: {op}")


def _number(body: dict, key: str, required: bool = False) -> int | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise HttpError(400, f"{key} must be an integer")
    return value


def _group_result(error: ErrorCode, group: str) -> dict:
    if error is ErrorCode.group_id_not_found:
        raise HttpError(404, f"group {group} not found")
    if error is ErrorCode.unknown_member_id:
        raise HttpError(404, f"group {group} has no such member")
    if error is not ErrorCode.none:
        raise HttpError(409, f"group {group}: {error.name.upper()}")
    return {"group": group, "result": "done"}


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 409: "Conflict",
            503: "Service Unavailable"}


async def _read(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], dict]:
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_BODY:
        raise ValueError("header too large")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    if not 0 <= length <= MAX_BODY:
        raise ValueError("body too large")
    raw = await reader.readexactly(length) if length else b""
    body = json.loads(raw) if raw else {}
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return method.upper(), path, headers, body
