"""A worker's end of its socket to the supervisor (coordinator/server/supervisor.py), one JSON object per line."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import uuid
from typing import Callable

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.observability import readiness
from groupd.coordinator.settings import Settings
from groupd.storage.records_plane import plane_for

# one message per line, each side's reader bound: a forwarded write (a CreateAcls of thousands of
# bindings) or its answer is as large as the request allowed, far over asyncio's 64 KiB default
MESSAGE_LIMIT = 1 << 30
from groupd.coordinator.cluster.shared_files import SharedFiles
from groupd.coordinator.cluster.workers import WorkerView


class SupervisorLink:
    """The worker's end of its socket to the supervisor, one JSON object per line. Up: `serving` once
    it listens, `ready` once every owned partition is loaded (with the worker's private metrics
    address), `log_ends` of the data partitions it leads (every LOG_ENDS_S), `create_topic` (an auto-create)
    and `call` (a write of coordinator/cluster/controller_writes.py)
    for the controller, and from the controller the `reply` to a call. Down: `down` (the workers not
    serving now), the other workers' `log_ends`, to the controller `create_topic` and `call`, to the caller
    the `reply`. The
    supervisor gone (EOF) stops the worker."""

    READY_POLL_S = 0.02
    LOG_ENDS_S = 5.0  # how often a worker tells the others its data partitions' log ends (lag metrics)
    CALL_TIMEOUT_S = 10.0  # a call the controller has not answered by then (it died): UNAVAILABLE

    def __init__(self, index: int, count: int, fd: int, settings: Settings) -> None:
        self.index = index
        self.view = WorkerView(settings, index, count)
        self.shared: SharedFiles | None = None  # what a worker that is not the controller follows
        self._fd = fd
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: set[asyncio.Task] = set()
        self._calls: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._log_ends: dict[int, dict[tuple[uuid.UUID, int], int]] = {}  # by the worker that leads them

    async def start(self, node, on_lost: Callable[[], None]) -> None:
        """Connect, before the worker listens: a write it takes goes to the controller from the start."""
        reader, self._writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=self._fd),
                                                                  limit=MESSAGE_LIMIT)
        self._spawn(self._read(reader, node, on_lost))

    def serving(self, node, metrics_url: str | None) -> None:
        """The worker listens (the controller: its config topics are in the catalog); `ready` follows
        once its partitions are loaded."""
        self.send(serving=True)
        self._spawn(self._report_ready(node, metrics_url))
        if plane_for(node) is not None:
            self._spawn(self._share_log_ends(plane_for(node)))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def send(self, **message) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(json.dumps(message).encode() + b"\n")

    def create_topic(self, name: str) -> None:
        """Ask the controller to auto-create `name` (no answer: the client's next Metadata sees it)."""
        self.send(create_topic=name)

    def call(self, op: str, args: dict) -> asyncio.Future:
        """A future of the controller's result of `op` (controller_writes.UNAVAILABLE if none comes)."""
        loop = asyncio.get_running_loop()
        call_id, result = next(self._ids), loop.create_future()
        self._calls[call_id] = result
        timer = loop.call_later(self.CALL_TIMEOUT_S, self._answered, call_id, controller_writes.UNAVAILABLE)
        result.add_done_callback(lambda _: timer.cancel())
        self.send(call=call_id, op=op, args=args)
        return result

    def _answered(self, call_id: int, result: dict) -> None:
        waiting = self._calls.pop(call_id, None)
        if waiting is not None and not waiting.done():
            if self.shared is not None:
                self.shared.check()  # what the controller wrote is what this worker serves from now on
            waiting.set_result(result)

    async def _apply(self, node, message: dict) -> None:
        result = await controller_writes.apply(node, message["op"], message["args"])
        self.send(reply=message["call"], to=message["from"], result=result)

    async def _share_log_ends(self, plane) -> None:
        while True:
            self.send(log_ends=[[str(topic_id), p, end] for (topic_id, p), end in plane.high_watermarks()])
            await asyncio.sleep(self.LOG_ENDS_S)

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
                if "call" in message:  # this is the controller: the answer once written
                    self._spawn(self._apply(node, message))
                if "reply" in message:
                    self._answered(message["reply"], message["result"])
                if "log_ends" in message:  # another worker's, replacing what it said before
                    self._log_ends[message["from"]] = {(uuid.UUID(t), p): end for t, p, end in message["log_ends"]}
                    node.log_ends_elsewhere = {k: v for ends in self._log_ends.values() for k, v in ends.items()}
        except ConnectionError:
            pass
        on_lost()

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._writer is not None:
            self._writer.close()
