"""Fault injection: the table of armed faults (an API answered with Kafka's error, or held back, for
a count of requests or a while), the hook that applies them before a request is handled (installed
on the node only while a fault is armed), and the operations the admin endpoint
(coordinator/server/admin_http.py) runs. An injected error is answered
*instead of* handling the request, so a fault never half-applies anything durable."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from groupd.coordinator.apis import (
    consumer_group_heartbeat,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    offset_commit,
    offset_fetch,
    sync_group,
)
from groupd.coordinator.apis.request import forward
from groupd.coordinator.observability import metrics
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

if TYPE_CHECKING:
    from groupd.coordinator.apis.request import Handler, Request
    from groupd.coordinator.server.connection import Connection
    from groupd.coordinator.server.node import Node

log = logging.getLogger("groupd.chaos")

A = ApiKey


class FaultError(ValueError):
    """A fault that cannot be armed as asked (unknown API or error name, bad bounds)."""


# -- error replies: each API module's answer carrying only the error -------------------------------

ERROR_REPLIES: dict[ApiKey, Callable[[int, Any, ErrorCode], Any]] = {
    m.KEY: m.error_response for m in (join_group, sync_group, heartbeat, leave_group, offset_commit, offset_fetch,
                                      consumer_group_heartbeat, find_coordinator)}

# the requests a coordinator failover answers NOT_COORDINATOR (FindCoordinator keeps naming this node)
GROUP_APIS = tuple(api for api in ERROR_REPLIES if api is not A.FIND_COORDINATOR)


def error_response(api_key: int, version: int, body: Any, error: ErrorCode) -> Any:
    return ERROR_REPLIES[ApiKey(api_key)](version, body, error)


def groups_of(api_key: int, body: Any) -> tuple[str, ...]:
    """The group ids a request names (FindCoordinator: its keys)."""
    if api_key == A.FIND_COORDINATOR:
        return tuple(body.coordinator_keys) if hasattr(body, "coordinator_keys") else (body.key,)
    if api_key == A.OFFSET_FETCH and getattr(body, "groups", None) is not None:
        return tuple(g.group_id for g in body.groups)
    group_id = getattr(body, "group_id", None)
    return () if group_id is None else (group_id,)


# -- names as operators type them ------------------------------------------------------------------

def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_APIS = {_squash(k.name): k for k in ApiKey}


def api_named(name: str) -> ApiKey:
    """`SyncGroup`, `SYNC_GROUP`, `sync-group` → ApiKey.SYNC_GROUP."""
    try:
        return _APIS[_squash(name)]
    except KeyError:
        raise FaultError(f"unknown API {name!r} (Kafka's names: JoinGroup, SyncGroup, Heartbeat, ...)") from None


def error_named(name: str) -> ErrorCode:
    """`REBALANCE_IN_PROGRESS` (Kafka's name, any case) → ErrorCode.rebalance_in_progress."""
    try:
        error = ErrorCode[name.replace("-", "_").lower()]
    except KeyError:
        raise FaultError(f"unknown error {name!r} (Kafka's names, e.g. REBALANCE_IN_PROGRESS)") from None
    if error is ErrorCode.none:
        raise FaultError("NONE is not an error")
    return error


def api_label(api: ApiKey) -> str:
    return "".join(part.capitalize() for part in api.name.split("_"))


# -- the table -------------------------------------------------------------------------------------

@dataclasses.dataclass(slots=True)
class Fault:
    id: int
    kind: str  # "error", "delay" or "move-coordinator"
    apis: tuple[ApiKey, ...]
    group: str | None  # None: every group (and requests without one)
    error: ErrorCode | None = None
    delay_ms: int = 0
    remaining: int | None = None  # requests still to hit; None: until `until`
    until: float | None = None  # monotonic s; None: until `remaining` runs out
    hits: int = 0

    def matches(self, api_key: int, groups: tuple[str, ...]) -> bool:
        return api_key in self.apis and (self.group is None or self.group in groups)

    def describe(self, now: float) -> dict:
        return {"id": self.id, "kind": self.kind, "apis": [api_label(a) for a in self.apis], "group": self.group,
                "error": self.error.name.upper() if self.error is not None else None, "delay_ms": self.delay_ms,
                "remaining": self.remaining,
                "expires_in_ms": None if self.until is None else max(round((self.until - now) * 1000), 0),
                "hits": self.hits}


class FaultTable:
    """Armed faults, in the order they were armed. `on_change(active)` is told when the first fault
    is armed and when the last one retires (Chaos installs and removes the connections' hook)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[bool], None] = lambda active: None) -> None:
        self.faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._clock = clock
        self._on_change = on_change

    @property
    def active(self) -> bool:
        return bool(self.faults)

    def arm(self, kind: str, apis: tuple[ApiKey, ...], group: str | None = None, *, error: ErrorCode | None = None,
            delay_ms: int = 0, count: int | None = None, for_ms: int | None = None) -> Fault:
        if (count is None) == (for_ms is None):
            raise FaultError("give a count of requests or a duration, one of them")
        if count is not None and count < 1 or for_ms is not None and for_ms < 1 or delay_ms < 0:
            raise FaultError("count, duration and delay must be positive")
        until = None if for_ms is None else self._clock() + for_ms / 1000
        fault = Fault(next(self._ids), kind, apis, group, error, delay_ms, count, until)
        self.faults.append(fault)
        if len(self.faults) == 1:
            self._on_change(True)
        metrics.CHAOS_ARMED.labels(kind).inc()
        log.info("fault armed id=%d kind=%s apis=%s group=%s error=%s delay_ms=%d count=%s for_ms=%s", fault.id, kind,
                 ",".join(api_label(a) for a in apis), group or "*", error.name.upper() if error else "-", delay_ms,
                 count, for_ms)
        return fault

    def show(self, fault: Fault) -> dict:
        return fault.describe(self._clock())

    def take(self, api_key: int, groups: tuple[str, ...]) -> tuple[int, ErrorCode | None]:
        """The delay (ms) and the error (or None) this request meets; each fault it meets counts a hit,
        and one whose count runs out is retired."""
        now = self._clock()
        self._expire(now)
        delay, error = 0, None
        for fault in list(self.faults):  # a fault may retire on the way
            if not fault.matches(api_key, groups) or fault.error is not None and error is not None:
                continue
            fault.hits += 1
            delay += fault.delay_ms
            error = error or fault.error
            metrics.CHAOS_INJECTED.labels(fault.kind, api_label(ApiKey(api_key))).inc()
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining == 0:
                    self._retire(fault, "consumed")
        return delay, error

    def list(self) -> list[dict]:
        now = self._clock()
        self._expire(now)
        return [f.describe(now) for f in self.faults]

    def clear(self) -> int:
        cleared = len(self.faults)
        for fault in list(self.faults):
            self._retire(fault, "cleared")
        return cleared

    def _expire(self, now: float) -> None:
        for fault in [f for f in self.faults if f.until is not None and now >= f.until]:
            self._retire(fault, "expired")

    def _retire(self, fault: Fault, why: str) -> None:
        self.faults.remove(fault)
        if not self.faults:
            self._on_change(False)
        log.info("fault %s id=%d kind=%s hits=%d", why, fault.id, fault.kind, fault.hits)


# -- the operations the admin endpoint runs --------------------------------------------------------

class Chaos:
    """What `groupd chaos ...` asks of a running node. It owns the fault table and, while a fault is
    armed, installs its hook as the node's `intercept`, which every connection then dispatches
    through; with nothing armed the hot path does not pass here at all."""

    def __init__(self, node: Node, connections: set[Connection]) -> None:
        self.node = node
        self.connections = connections
        self.faults = FaultTable(on_change=self._install)

    def _install(self, active: bool) -> None:
        self.node.intercept = self.intercept if active else None

    def intercept(self, handler: Handler, api_key: int, request: Request) -> Any:
        """Handle `request` as the armed faults say: its error reply instead of handling it, or the
        handler's answer (or the error) after the delay."""
        node = self.node
        delay_ms, error = self.faults.take(api_key, groups_of(api_key, request.body))
        if delay_ms == 0:
            return handler(node, request) if error is None else error_response(api_key, request.version,
                                                                               request.body, error)
        loop = asyncio.get_running_loop()
        out = loop.create_future()

        def run() -> None:
            if out.done():  # the connection went away meanwhile
                return
            try:
                result = (handler(node, request) if error is None
                          else error_response(api_key, request.version, request.body, error))
            except Exception as e:  # the connection logs it and closes, as for any handler failure
                out.set_exception(e)
                return
            if isinstance(result, asyncio.Future):
                result.add_done_callback(lambda f: forward(f, out))
            else:
                out.set_result(result)

        loop.call_later(delay_ms / 1000, run)
        return out

    async def rebalance(self, group: str) -> ErrorCode:
        return await self._forced("rebalance", group, self.node.coordinator.force_rebalance(group))

    async def expire(self, group: str, members: list[str] | None) -> ErrorCode:
        return await self._forced("expire", group, self.node.coordinator.expire_members(group, members))

    @staticmethod
    async def _forced(kind: str, group: str, result: Any) -> ErrorCode:
        error = await result if isinstance(result, asyncio.Future) else result
        if error is ErrorCode.none:
            metrics.CHAOS_INJECTED.labels(kind, "-").inc()
        log.info("forced %s group=%s result=%s", kind, group, error.name.upper())
        return error

    def error(self, api: str, error: str, group: str | None, count: int | None, for_ms: int | None) -> Fault:
        key = api_named(api)
        if key not in ERROR_REPLIES:
            raise FaultError(f"{api_label(key)} cannot be answered with an injected error (these can: "
                             f"{', '.join(api_label(a) for a in ERROR_REPLIES)})")
        return self.faults.arm("error", (key,), group, error=error_named(error), count=count, for_ms=for_ms)

    def delay(self, api: str, delay_ms: int, group: str | None, count: int | None, for_ms: int | None) -> Fault:
        if delay_ms < 1:
            raise FaultError("the delay must be at least 1 ms")
        return self.faults.arm("delay", (api_named(api),), group, delay_ms=delay_ms, count=count, for_ms=for_ms)

    def move_coordinator(self, group: str, for_ms: int) -> Fault:
        """A coordinator failover as clients see it: the group's requests answer NOT_COORDINATOR for
        the duration while FindCoordinator keeps naming this node, then the group is served again."""
        return self.faults.arm("move-coordinator", GROUP_APIS, group, error=ErrorCode.not_coordinator,
                                    for_ms=for_ms)

    def drop_connections(self, client_id: str | None) -> int:
        dropped = [c for c in self.connections if client_id is None or c.client_id == client_id]
        for conn in dropped:
            conn.close()
        metrics.CHAOS_INJECTED.labels("drop-connections", "-").inc(len(dropped))
        log.info("connections dropped client_id=%s count=%d", client_id or "*", len(dropped))
        return len(dropped)
