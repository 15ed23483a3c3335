"""A worker's end of its socket to the supervisor (coordinator/supervisor.py), one JSON object per line."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Callable

from . import readiness
from .settings import Settings
from .workers import WorkerView


class SupervisorLink:
    """The worker's end of its socket to the supervisor, one JSON object per line. Up: `ready` once
    every owned partition is loaded (with the worker's private metrics address), `create_topic` for an
    auto-create the controller must do; first `serving` once it listens. Down: `down` (the workers not serving now), and to the
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
        self.send(serving=True)  # listening, its shared files written (the controller: config topics)
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
        try:
            while line := await reader.readline():
                message = json.loads(line)
                if "down" in message:
                    self.view.set_down(set(message["down"]))
                if "create_topic" in message:
                    node.create_forwarded(message["create_topic"])
        except ConnectionError:
            pass
        on_lost()

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._writer is not None:
            self._writer.close()
