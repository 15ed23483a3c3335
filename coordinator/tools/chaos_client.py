"""The client side of the admin endpoint's fault injection (coordinator/server/admin_http.py): what
`groupd chaos ...` and the pytest plugin's server helpers call. Blocking, standard library only."""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from typing import Any


class ChaosError(Exception):
    """The endpoint refused (its one-line reason) or could not be reached."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, None: 1000}


def duration_ms(text: str) -> int:
    """`500ms`, `10s` (or `10`), `2m`, `1h` → milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise ChaosError(f"{text!r} is not a duration (e.g. 500ms, 10s, 2m)")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2)])


class ChaosClient:
    def __init__(self, url: str, timeout: float = 30.0, credentials: tuple[str, str] | None = None) -> None:
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        # HTTP Basic, for a groupd with sasl.users: http://user:password@host:port, else `credentials`
        # (`groupd chaos --command-config`: sasl.jaas.config's or sasl.username/sasl.password)
        if parts.username:
            credentials = (urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or ""))
        self.auth = ("Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
                     if credentials else None)
        self.user = credentials[0] if credentials else None
        self.url = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict | None = None) -> Any:
        import urllib.error  # here: `groupd serve` parses this command's arguments but never sends one
        import urllib.request

        data = None if body is None else json.dumps({k: v for k, v in body.items() if v is not None}).encode()
        headers = {"Content-Type": "application/json"}
        if self.auth:
            headers["Authorization"] = self.auth
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                reason = json.loads(e.read()).get("error", e.reason)
            except ValueError:
                reason = e.reason
            if e.code == 401:
                reason = (f"the admin endpoint refused the credentials of {self.user!r}" if self.user else
                          "the admin endpoint wants the credentials of a sasl.users user (HTTP Basic) and none are "
                          "given: --command-config FILE with sasl.jaas.config (or sasl.username and sasl.password), "
                          "or http://USER:PASSWORD@host:port")
            raise ChaosError(f"{reason} (HTTP {e.code})") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ChaosError(f"cannot reach the admin endpoint {self.url}: {reason}") from None

    def ready(self) -> bool:
        try:
            return bool(self.request("GET", "/ready"))
        except ChaosError:
            return False

    # -- the operations, in `groupd chaos`'s words --------------------------------------------------

    def rebalance(self, group: str) -> dict:
        return self.request("POST", "/chaos/rebalance", {"group": group})

    def expire(self, group: str, members: list[str] | None = None) -> dict:
        """`members` None: every member of the group."""
        return self.request("POST", "/chaos/expire", {"group": group, "members": members})

    def error(self, api: str, error: str, group: str | None = None, *, count: int | None = None,
              for_ms: int | None = None) -> dict:
        return self.request("POST", "/chaos/error", {"api": api, "error": error, "group": group, "count": count,
                                                     "for_ms": for_ms})

    def delay(self, api: str, delay_ms: int, group: str | None = None, *, count: int | None = None,
              for_ms: int | None = None) -> dict:
        return self.request("POST", "/chaos/delay", {"api": api, "delay_ms": delay_ms, "group": group,
                                                     "count": count, "for_ms": for_ms})

    def move_coordinator(self, group: str, for_ms: int) -> dict:
        return self.request("POST", "/chaos/move-coordinator", {"group": group, "for_ms": for_ms})

    def drop_connections(self, client_id: str | None = None) -> int:
        return self.request("POST", "/chaos/drop-connections", {"client_id": client_id})["dropped"]

    def faults(self) -> list[dict]:
        return self.request("GET", "/chaos")["faults"]

    def clear(self) -> int:
        return self.request("DELETE", "/chaos")["cleared"]
