"""What every API handler is handed and the helpers they answer with: the `Request` (header, body,
the client's host, listener and principal), and how an answer that comes later is forwarded."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from typing import TYPE_CHECKING, Any, Callable

from groupd.coordinator.security.tls import ANONYMOUS  # the principal of a connection nobody authenticated
from groupd.protocol.codec import Encoded, RequestHeader

if TYPE_CHECKING:
    from groupd.coordinator.server.node import Node
    from groupd.coordinator.settings import Listener


@dataclasses.dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Any
    client_host: str  # "/127.0.0.1", as Java renders an InetAddress
    advertised: "Listener"  # this node's address on the listener the request came in on
    principal: str = ANONYMOUS  # the authenticated principal of the connection (Kafka's `Type:Name`)
    off_loop: bool = False  # its answer is being built off the loop: the connection reads on after it
    # the connection's callbacks run when it closes, by key (a ShareFetch session's release); None: no connection
    on_close: dict[Any, Callable[[], None]] | None = None

    @property
    def version(self) -> int:
        return self.header.api_version


# A handler returns a kio response, None (no response at all), or a future of either.
Handler = Callable[["Node", Request], Any]

_MS = datetime.timedelta(milliseconds=1)


def ms(value: datetime.timedelta) -> int:
    """kio carries Kafka's millisecond fields as timedeltas."""
    return value // _MS


# Rows (partitions, members) above which an answer is built and encoded off the loop: a 20,000-offset
# OffsetFetch costs ~90 ms of CPU, which the loop must not spend while other clients wait.
LARGE_ANSWER_ROWS = 2_000


def answer_off_loop(node: "Node", request: Request, make: Callable[[], Any]) -> asyncio.Future:
    """A future of `make()`, built and encoded on the node's answer thread. `make` may read only a
    snapshot taken on the loop (immutable values). The loop keeps serving other connections while it
    runs (the interpreter lock changes hands every few ms), and the requesting connection handles
    nothing more until it is done, so one connection holds at most one such answer."""
    request.off_loop = True
    return asyncio.wrap_future(node.answers.submit(lambda: Encoded(make())))


def respond(result: Any, make: Callable[[Any], Any]) -> Any:
    """`make(result)` now, or a future of it when the coordinator answers later."""
    if not isinstance(result, asyncio.Future):
        return make(result)
    out = asyncio.get_running_loop().create_future()
    result.add_done_callback(lambda f: forward(f, out, make))
    return out


def respond_all(items: list[Any], make: Callable[[list[Any]], Any]) -> Any:
    """`make(items)` once every item that is a future has its result (in its place)."""
    pending = [item for item in items if isinstance(item, asyncio.Future)]
    if not pending:
        return make(items)
    return respond(asyncio.gather(*pending), lambda _: make(
        [item.result() if isinstance(item, asyncio.Future) else item for item in items]))


def forward(done: asyncio.Future, out: asyncio.Future, make: Callable[[Any], Any] = lambda r: r) -> None:
    """Settle `out` as the finished `done` went: `make(its result)`, its exception, or cancelled."""
    if out.done():
        return
    if done.cancelled():
        out.cancel()
    elif done.exception() is not None:
        out.set_exception(done.exception())
    else:
        try:
            out.set_result(make(done.result()))
        except Exception as e:  # a bug in make(): the connection logs it and closes
            out.set_exception(e)
