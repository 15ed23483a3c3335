"""The metrics endpoint on `metrics.listener`: the Prometheus exposition, `/healthz` and `/ready`
(coordinator/observability/readiness.py), a minimal HTTP/1.1 server on the event loop."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

from groupd.coordinator.observability import collector, prometheus, readiness, records_collector

from .listen import Listener, default_port_taken

EXPOSITION_IDLE_S = 10.0  # a scrape connection that sends no complete request in this long is closed
EXPOSITION_MAX_CONNECTIONS = 32  # beyond this, the oldest connection makes room for the new one


class _Exposition(asyncio.Protocol):
    """A minimal HTTP/1.1 endpoint on the event loop: collecting on the loop that owns the groups
    means no collector ever sees a dict that another thread is changing. One request per connection;
    idle connections are closed and their number is bounded."""

    def __init__(self, routes: dict, open_: dict[_Exposition, None]) -> None:
        self.routes = routes  # request path → () → (status, body, content type)
        self.buf = b""
        self.open = open_  # every open exposition connection, oldest first

    def connection_made(self, transport) -> None:
        self.transport = transport
        while len(self.open) >= EXPOSITION_MAX_CONNECTIONS:
            oldest = next(iter(self.open))
            del self.open[oldest]
            oldest.transport.close()
        self.open[self] = None
        self.timer = asyncio.get_running_loop().call_later(EXPOSITION_IDLE_S, transport.close)

    def connection_lost(self, exc) -> None:
        self.open.pop(self, None)
        self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return  # answered already: whatever follows is ignored
        self.buf += data
        if b"\r\n\r\n" not in self.buf and len(self.buf) < 8192:
            return
        request_line = self.buf.split(b"\r\n", 1)[0].decode("latin-1").split()
        target = request_line[1] if len(request_line) > 1 else ""
        route = self.routes.get(target.split("?", 1)[0])
        if route is not None:
            status, body, kind = route()
        else:
            status, body, kind = "404 Not Found", b"not found\n", "text/plain"
        self.transport.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                             "Connection: close\r\n\r\n".encode() + body)
        self.transport.close()


async def serve(settings, node) -> str | None:
    """Hand the node's coordinator (and records plane) to the state collector and serve the
    exposition on `metrics.listener`."""
    collector.register().watch(node.coordinator, settings.metrics_group_generation_enabled, settings.metrics_group_offsets_enabled,
                    settings.metrics_group_max_groups, collector.records_view(node))
    records_collector.register().watch(node)
    if not settings.metrics_listener:
        return None
    url = urlsplit(settings.metrics_url)
    exposition = lambda: ("200 OK", *prometheus.exposition())  # noqa: E731
    routes = {url.path or "/metrics": exposition, "/": exposition, "/healthz": readiness.alive,
              "/ready": lambda: readiness.ready(node.coordinator)}
    open_: dict[_Exposition, None] = {}
    try:
        listener = Listener("metrics", url.hostname or "0.0.0.0", url.port, lambda: _Exposition(routes, open_),
                            backlog=128, setting="metrics.listener")
    except OSError as e:
        warning = default_port_taken(e, settings, "metrics.listener")
        if warning is None:
            raise
        logging.getLogger("groupd").warning("%s", warning)
        return None
    return url._replace(netloc=f"{url.hostname}:{listener.address[1]}").geturl()  # port 0: the one bound
