"""Worker i of N on one host (`groupd serve --workers N`): its settings (node.id + i, every listener's
port + i) and its view of the cluster: every worker a broker, offsets partition p and data partition p
served by worker p mod N, worker 0 the controller. Static: only liveness changes, as the supervisor
reports workers down and up (coordinator/supervisor.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
from typing import Callable, Sequence
from urllib.parse import urlsplit

from . import readiness
from .cluster import Broker, ClusterView
from .settings import Listener, Settings


def shifted(listeners: Sequence[Listener], by: int) -> tuple[Listener, ...]:
    return tuple(dataclasses.replace(l, port=l.port + by) for l in listeners)


def worker_settings(settings: Settings, index: int) -> Settings:
    """What worker `index` serves with: its node id and ports; its metrics go to the supervisor, which
    serves the merged scrape on `metrics.listener` (a worker's own port is private, on loopback)."""
    return dataclasses.replace(
        settings, node_id=settings.node_id + index, listeners=shifted(settings.listeners, index),
        advertised_listeners=shifted(settings.advertised_listeners, index),
        metrics_listener="http://127.0.0.1:0/metrics" if settings.metrics_listener else "",
        admin_listener=_shifted_url(settings.admin_listener, index))


def _shifted_url(url: str, by: int) -> str:
    if not url:
        return url
    parts = urlsplit(url)
    return parts._replace(netloc=f"{parts.hostname}:{parts.port + by}").geturl()


class WorkerView(ClusterView):
    """The cluster as worker `index` of `count` sees it. A worker the supervisor reported down is not
    listed in Metadata and coordinates nothing meanwhile (FindCoordinator: COORDINATOR_NOT_AVAILABLE)."""

    def __init__(self, settings: Settings, index: int, count: int) -> None:
        self.base = settings.node_id  # worker 0's node id: the controller
        self.count = count
        self.node_id = settings.node_id + index
        advertised = [settings.advertised_for(l.name) for l in settings.listeners]
        self._all = tuple(Broker(self.base + i, {a.name: (a.host, a.port + i) for a in advertised})
                          for i in range(count))
        self._down: set[int] = set()
        self._brokers = self._all

    def brokers(self) -> Sequence[Broker]:
        return self._brokers

    def controller_id(self) -> int:
        return self.base

    def coordinator(self, partition: int) -> int | None:
        node = self.base + partition % self.count
        return None if node in self._down else node

    def leader(self, topic: str, partition: int) -> int:
        return self.base + partition % self.count

    def owns(self, partition: int) -> bool:
        return self.base + partition % self.count == self.node_id

    def set_down(self, node_ids: set[int]) -> None:
        """The workers the supervisor has reported not serving (crashed, restarting)."""
        self._down = set(node_ids) - {self.node_id}
        self._brokers = tuple(b for b in self._all if b.node_id not in self._down)


class SupervisorLink:
    """The worker's end of its socket to the supervisor, one JSON object per line. Up: `ready` once
    every owned partition is loaded (with the worker's private metrics address), `create_topic` for an
    auto-create the controller must do. Down: `down` (the workers not serving now), and to the
    controller `create_topic`. The supervisor gone (EOF) stops the worker."""

    READY_POLL_S = 0.02

    def __init__(self, index: int, count: int, fd: int, settings: Settings) -> None:
        self.index = index
        self.view = WorkerView(settings, index, count)
        self._fd = fd
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self, node, metrics_url: str | None, on_lost: Callable[[], None]) -> None:
        reader, self._writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=self._fd))
        for coro in (self._read(reader, node, on_lost), self._report_ready(node, metrics_url)):
            task = asyncio.get_running_loop().create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def send(self, **message) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(json.dumps(message).encode() + b"\n")

    async def _report_ready(self, node, metrics_url: str | None) -> None:
        while not readiness.is_ready(node.coordinator):
            await asyncio.sleep(self.READY_POLL_S)
        self.send(ready=True, metrics=metrics_url)

    async def _read(self, reader: asyncio.StreamReader, node, on_lost: Callable[[], None]) -> None:
        while line := await reader.readline():
            message = json.loads(line)
            if "down" in message:
                self.view.set_down(set(message["down"]))
            if "create_topic" in message:
                node.create_forwarded(message["create_topic"])
        on_lost()

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._writer is not None:
            self._writer.close()
