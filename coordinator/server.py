"""The server's lifecycle: start the listeners, serve until SIGTERM/SIGINT, shut down cleanly
(stop accepting, answer what is in flight, close connections, close the log)."""

from __future__ import annotations

import asyncio
import logging
import signal
import time

from . import metrics
from .connection import Connection
from .node import Node
from .settings import Settings

log = logging.getLogger("groupd")

SHUTDOWN_GRACE_S = 5.0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed, the standard loop otherwise: the one place that chooses."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Server:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.node: Node | None = None
        self.connections: set[Connection] = set()
        self._servers: list[asyncio.base_events.Server] = []
        self._stop = asyncio.Event()

    async def startup(self) -> None:
        started = time.monotonic()
        self.node = Node(self.settings)
        metrics_url = await metrics.serve(self.settings, self.node.coordinator)
        self.node.coordinator.start()  # partitions load off the loop and answer LOAD_IN_PROGRESS until then
        loop = asyncio.get_running_loop()
        for listener in self.settings.listeners:
            server = await loop.create_server(lambda: Connection(self.node, self.connections),
                                              host=listener.host or None, port=listener.port,
                                              reuse_address=True, backlog=1024)
            self._servers.append(server)
        bound = ", ".join(f"{l.name}://{s.sockets[0].getsockname()[0]}:{s.sockets[0].getsockname()[1]}"
                          for l, s in zip(self.settings.listeners, self._servers))
        log.info("groupd ready listeners=%s advertised=%s node.id=%d cluster.id=%s data.dir=%s "
                 "topics=%d metrics=%s startup_ms=%d", bound, self.settings.advertised, self.settings.node_id,
                 self.node.cluster_id, self.settings.data_dir, len(self.node.catalog), metrics_url or "off",
                 (time.monotonic() - started) * 1000)

    def request_stop(self, signame: str = "") -> None:
        if not self._stop.is_set():
            log.info("shutdown requested signal=%s", signame or "-")
            self._stop.set()

    async def shutdown(self) -> None:
        for server in self._servers:
            server.close()
        if self.node is not None:
            self.node.release_all()  # held fetches answer now
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        for server in self._servers:
            await server.wait_closed()
        if self.node is not None:
            await self.node.coordinator.close()  # in-flight writes finish, every log is fsynced and closed
        log.info("groupd stopped")

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.getsignal(sig)
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        try:
            await self.startup()
            await self._stop.wait()
            await self.shutdown()
        finally:
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)


def run(settings: Settings) -> None:
    loop = new_event_loop()
    try:
        loop.run_until_complete(Server(settings).serve())
    finally:
        loop.close()
