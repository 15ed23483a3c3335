"""The server's lifecycle: start the listeners, serve until SIGTERM/SIGINT, shut down cleanly
(stop accepting, answer what is in flight, close connections, close the log)."""

from __future__ import annotations

import asyncio
import logging
import signal
import time

from . import metrics
from .connection import Connection, RequestMemory, bad_frame_log
from .listen import Listener, accept_log
from .node import Node
from .settings import Settings

log = logging.getLogger("groupd")

SHUTDOWN_GRACE_S = 5.0
LOG_LIMIT_TICK_S = 5.0


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
        self.request_memory = RequestMemory(settings.queued_max_request_bytes)
        self._listeners: list[Listener] = []
        self._stop = asyncio.Event()
        self._log_timer: asyncio.TimerHandle | None = None

    async def startup(self) -> None:
        started = time.monotonic()
        self.node = Node(self.settings)
        metrics_url = await metrics.serve(self.settings, self.node)
        self.node.coordinator.start()  # partitions load off the loop and answer LOAD_IN_PROGRESS until then
        for listener in self.settings.listeners:
            self._listeners.append(Listener(listener.name, listener.host, listener.port,
                                            lambda: Connection(self.node, self.connections, self.request_memory)))
        self._tick_log_limits()
        bound = ", ".join(f"{l.name}://{l.address[0]}:{l.address[1]}" for l in self._listeners)
        log.info("groupd ready listeners=%s advertised=%s node.id=%d cluster.id=%s data.dir=%s "
                 "topics=%d metrics=%s startup_ms=%d", bound, self.settings.advertised, self.settings.node_id,
                 self.node.cluster_id, self.settings.data_dir, len(self.node.catalog), metrics_url or "off",
                 (time.monotonic() - started) * 1000)

    def _tick_log_limits(self) -> None:
        """Report suppressed log lines once their window ends, even if nothing else is logged."""
        bad_frame_log.tick()
        accept_log.tick()
        self._log_timer = asyncio.get_running_loop().call_later(LOG_LIMIT_TICK_S, self._tick_log_limits)

    def request_stop(self, signame: str = "") -> None:
        if not self._stop.is_set():
            log.info("shutdown requested signal=%s", signame or "-")
            self._stop.set()

    async def shutdown(self) -> None:
        if self._log_timer is not None:
            self._log_timer.cancel()
        for listener in self._listeners:
            listener.close()
        if self.node is not None:
            self.node.release_all()  # held fetches answer now
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        if self.node is not None:
            await self.node.coordinator.close()  # in-flight writes finish, every log is fsynced and closed
            self.node.close()  # releases the data dir's lock
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
