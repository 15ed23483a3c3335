"""Listening sockets accepted by hand, so that running out of file descriptors (EMFILE, ENFILE) is
logged, counted and retried: libuv would accept and drop the waiting connections without a word."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

from groupd.coordinator.observability import metrics
from groupd.coordinator.observability.log_limit import LimitedLog

log = logging.getLogger("groupd")
accept_log = LimitedLog(log, "accept-failed", per_interval=5)

ACCEPT_RETRY_S = 0.1  # waiting connections stay in the backlog meanwhile (asyncio waits 1 s)
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_ACCEPTS_PER_WAKEUP = 64


_EXAMPLES = {"metrics.listener": "http://:{}/metrics", "admin.listener": "http://127.0.0.1:{}"}


class ListenError(OSError):
    """A listening socket that could not be bound, with the setting that asked for it; `str(e)` is the
    one line for the operator: what failed and what to do about that errno."""

    def __init__(self, setting: str, host: str, port: int, error: OSError) -> None:
        super().__init__(error.errno, error.strerror)
        self.setting, self.host, self.port = setting, host, port

    def __str__(self) -> str:
        setting, host = self.setting, self.host
        where = f"cannot listen on {f'[{host}]' if ':' in host else host or '*'}:{self.port} ({setting})"
        if self.errno == errno.EADDRINUSE:
            advice = f"another process (another groupd?) holds that port: stop it, or give {setting} another port"
            if setting in _EXAMPLES:
                advice += f", e.g. --set {setting}={_EXAMPLES[setting].format(self.port + 1)} (empty turns it off)"
            return f"{where}: address already in use; {advice}"
        if self.errno == errno.EADDRNOTAVAIL:
            return (f"{where}: {host} is not an address of this host: give {setting} one of its addresses, or "
                    "0.0.0.0 for all" + ("; the address clients should use goes in advertised.listeners"
                                        if setting == "listeners" else ""))
        if self.errno == errno.EACCES:
            return f"{where}: permission denied (ports below 1024 need privileges): give {setting} a port from 1024"
        return f"{where}: {self.strerror}"


def default_port_taken(error: OSError, settings, setting: str) -> str | None:
    """When `error` is the port of `setting` in use while that setting is left at its default (a
    second groupd on this host meets the first one's metrics port): the warning to log, and the
    endpoint stays off. None when the bind failure is a start-up error (a port the user chose)."""
    if error.errno != errno.EADDRINUSE or settings.origins.get(setting, "default") != "default":
        return None
    port = getattr(error, "port", 0)
    return (f"{setting} is its default and port {port} is in use (another groupd on this host?): serving "
            f"without it; give {setting} another port (--set {setting}={_EXAMPLES[setting].format(port + 1)}) "
            "or empty to turn it off")


def bind_failed(setting: str, host: str, port: int, error: OSError) -> OSError:
    """The error to raise for a bind of `setting` that failed: a ListenError where it has advice."""
    if error.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
        return ListenError(setting, host, port, error)
    return error


class Listener:
    def __init__(self, name: str, host: str, port: int, factory: Callable[[], asyncio.Protocol],
                 backlog: int = 1024, setting: str = "listeners") -> None:
        self.name = name
        self._factory = factory
        try:
            if host:
                self.sock = socket.create_server((host, port), backlog=backlog)
            elif socket.has_dualstack_ipv6():
                self.sock = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True,
                                                 backlog=backlog)
            else:
                self.sock = socket.create_server(("", port), backlog=backlog)
        except OSError as e:
            raise bind_failed(setting, host, port, e) from None
        self.sock.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._retry: asyncio.TimerHandle | None = None
        self._handshakes: set[asyncio.Task] = set()
        self._start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return host, port

    def _start(self) -> None:
        self._retry = None
        self._loop.add_reader(self.sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_WAKEUP):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _OUT_OF_RESOURCES:
                    metrics.ACCEPT_FAILED.inc()
                    accept_log.log(logging.WARNING, "accept failed listener=%s error=%s: %s; retrying in %d ms "
                                   "(raise the open files limit, ulimit -n)", self.name,
                                   errno.errorcode.get(e.errno, e.errno), e.strerror, ACCEPT_RETRY_S * 1000)
                    self._loop.remove_reader(self.sock.fileno())
                    self._retry = self._loop.call_later(ACCEPT_RETRY_S, self._start)
                    return
                continue  # the peer gave up before we accepted (ECONNABORTED and the like)
            conn.setblocking(False)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self._loop.create_task(self._connect(conn))
            self._handshakes.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._handshakes.discard)

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError as e:
            conn.close()
            accept_log.log(logging.WARNING, "accepted connection failed listener=%s: %s", self.name, e)

    def close(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        else:
            self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
