"""`groupd serve --workers N`: the supervisor process. It holds the data dir's `.lock`, starts N worker
processes (`groupd serve ... --worker i:fd`, coordinator/cluster/workers.py), restarts one that exits (with a
backoff; the others are told it is down meanwhile), relays auto-creates to the controller (worker 0),
serves the merged metrics and `/ready` on `metrics.listener`, and on SIGTERM/SIGINT drains every
worker and exits 0."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import sys
import time
from urllib.parse import urlsplit

from groupd.coordinator.cluster.controller_writes import UNAVAILABLE
from groupd.coordinator.observability import merge as metrics_merge
from groupd.coordinator.observability import readiness
from groupd.coordinator.settings import Settings
from groupd.storage.catalog import load_cluster_id
from groupd.storage.files import DataDirLock, prepare_data_dir

from .listen import bind_failed, default_port_taken
from .metrics_http import EXPOSITION_MAX_CONNECTIONS
from .supervisor_link import MESSAGE_LIMIT

log = logging.getLogger("groupd")

RESTART_BACKOFF_S = (0.5, 1, 2, 5, 10)  # after each quick exit in a row (a worker that ran a while: the first)
STABLE_S = 30.0  # a worker that ran this long before it exited restarts with the first backoff
STOP_TIMEOUT_S = 60.0  # a draining worker still running after this is killed
SCRAPE_TIMEOUT_S = 10.0


class Worker:
    """One worker slot: the process serving it now, and its socket to the supervisor."""

    def __init__(self, index: int, node_id: int) -> None:
        self.index = index
        self.node_id = node_id
        self.proc: asyncio.subprocess.Process | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.serving = False  # listening (its partitions may still load: LOAD_IN_PROGRESS)
        self.ready = False
        self.metrics: str | None = None
        self.started = 0.0
        self.starts = 0
        self.quick_exits = 0

    def send(self, **message) -> None:
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(json.dumps(message).encode() + b"\n")


class Supervisor:
    def __init__(self, settings: Settings, worker_args: list[str]) -> None:
        self.settings = settings
        self.worker_args = worker_args  # `serve` and its --config/--set, for each worker's command line
        self.workers = [Worker(i, settings.node_id + i) for i in range(settings.workers)]
        self._stop = asyncio.Event()
        self._failed: int | None = None  # a worker's exit code before it ever became ready: stop with it
        self._tasks: set[asyncio.Task] = set()
        self._serving = [asyncio.Event() for _ in self.workers]  # set once each first listens (or exits)
        self._scrapes = 0  # open connections to metrics.listener

    async def run(self) -> int:
        prepare_data_dir(self.settings.data_dir)
        lock = DataDirLock(self.settings.data_dir).acquire(f"groupd serve --workers {self.settings.workers}")
        load_cluster_id(self.settings.data_dir, self.settings.node_id)  # written once, before any worker reads it
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        try:
            metrics_url = await self._serve_metrics()
            # the controller first: the others start once it serves (its config topics are in the catalog)
            await self._start(self.workers[0])
            await self._serving[0].wait()
            for w in self.workers[1:] if not self._stop.is_set() else ():
                await self._start(w)
            if not self._stop.is_set():  # not when the controller's first start already failed
                log.info("supervisor started workers=%d node.ids=%d-%d metrics=%s", len(self.workers),
                         self.workers[0].node_id, self.workers[-1].node_id, metrics_url or "off")
            await self._stop.wait()
            codes = await asyncio.gather(*(self._drain(w) for w in self.workers))
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            lock.release()
        if self._failed is not None:
            return self._failed
        log.info("supervisor stopped workers=%d", len(self.workers))
        return 0 if all(code == 0 for code in codes) else 1

    def request_stop(self, signame: str = "") -> None:
        if not self._stop.is_set():
            log.info("shutdown requested signal=%s workers=%d", signame or "-", len(self.workers))
            self._stop.set()

    # -----------------------------------------------------------------------------------------
    # Worker processes

    async def _start(self, w: Worker) -> None:
        ours, theirs = socket.socketpair()
        args = [sys.executable, "-P", "-m", "groupd.coordinator", *self.worker_args, "--worker", f"{w.index}:{theirs.fileno()}"]
        w.proc = await asyncio.create_subprocess_exec(*args, pass_fds=(theirs.fileno(),))
        theirs.close()
        w.started, w.starts = time.monotonic(), w.starts + 1
        w.serving, w.ready, w.metrics = False, False, None
        reader, w.writer = await asyncio.open_unix_connection(sock=ours, limit=MESSAGE_LIMIT)
        log.info("worker started worker=%d node.id=%d pid=%d", w.index, w.node_id, w.proc.pid)
        self._spawn(self._read(w, reader))
        self._spawn(self._watch(w, w.proc))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, w: Worker, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                self._handle(w, json.loads(line))
        except ConnectionError:
            pass  # the worker died: _watch reports it

    def _handle(self, w: Worker, message: dict) -> None:
        if message.get("serving"):
            w.serving = True
            self._serving[w.index].set()
            self._tell_down()  # clients are sent to it again: COORDINATOR_LOAD_IN_PROGRESS until it loaded
        if message.get("ready"):
            w.ready, w.metrics = True, message.get("metrics")
            log.info("worker ready worker=%d node.id=%d ms=%d", w.index, w.node_id,
                     (time.monotonic() - w.started) * 1000)
            if all(x.ready for x in self.workers):
                log.info("workers ready workers=%d", len(self.workers))
        if "create_topic" in message:
            self.workers[0].send(create_topic=message["create_topic"])
        if "call" in message:  # a write for the controller; its reply goes back to the caller
            if self.workers[0].serving:
                self.workers[0].send(**message, **{"from": w.index})
            else:
                w.send(reply=message["call"], result=UNAVAILABLE)
        if "reply" in message:
            self.workers[message["to"]].send(reply=message["reply"], result=message["result"])
        if "log_ends" in message:  # for the others' lag metrics
            for other in self.workers:
                if other is not w:
                    other.send(log_ends=message["log_ends"], **{"from": w.index})

    async def _watch(self, w: Worker, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        self._serving[w.index].set()  # nobody waits for a worker that is gone
        if self._stop.is_set():
            return  # draining: _drain reports it
        ran = time.monotonic() - w.started
        was_ready, w.serving, w.ready, w.writer = w.ready, False, False, None
        self._tell_down()
        if w.starts == 1 and not was_ready and code in (1, 2):
            # its first start refused (configuration, data dir, port): restarting cannot help; it said why
            log.error("worker exited worker=%d node.id=%d code=%d before it was ready; stopping", w.index,
                      w.node_id, code)
            self._failed = code
            self.request_stop("worker-failed")
            return
        w.quick_exits = 0 if ran >= STABLE_S else w.quick_exits + 1
        delay = RESTART_BACKOFF_S[min(max(w.quick_exits - 1, 0), len(RESTART_BACKOFF_S) - 1)]
        log.warning("worker exited worker=%d node.id=%d code=%d ran_s=%.1f; restarting in %.1f s", w.index,
                    w.node_id, code, ran, delay)
        try:
            await asyncio.wait_for(self._stop.wait(), delay)
            return  # stopping meanwhile
        except asyncio.TimeoutError:
            pass
        await self._start(w)

    def _down(self) -> list[int]:
        """The workers not serving: exited, restarting, or not listening yet."""
        return [w.node_id for w in self.workers if not w.serving]

    def _tell_down(self) -> None:
        down = self._down()
        for w in self.workers:
            w.send(down=down)

    async def _drain(self, w: Worker) -> int:
        """SIGTERM: the worker answers what is in flight, fsyncs and exits (as `groupd serve` does)."""
        if w.proc is None or w.proc.returncode is not None:
            return 0  # not running (waiting for its restart): nothing to drain
        w.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(w.proc.wait(), STOP_TIMEOUT_S)
        except asyncio.TimeoutError:
            log.error("worker did not stop worker=%d node.id=%d in %d s; killing it", w.index, w.node_id,
                      STOP_TIMEOUT_S)
            w.proc.kill()
            code = await w.proc.wait()
        log.info("worker stopped worker=%d node.id=%d code=%d", w.index, w.node_id, code)
        return code

    # -----------------------------------------------------------------------------------------
    # metrics.listener: one endpoint for every worker

    async def _serve_metrics(self) -> str | None:
        if not self.settings.metrics_listener:
            return None
        url = urlsplit(self.settings.metrics_url)
        self._metrics_path = url.path or "/metrics"
        host = url.hostname or "0.0.0.0"
        try:
            await asyncio.start_server(self._http, host, url.port, backlog=128)
        except OSError as e:
            failed = bind_failed("metrics.listener", host, url.port, e)
            warning = default_port_taken(failed, self.settings, "metrics.listener")
            if warning is None:
                raise failed from None
            log.warning("%s", warning)
            return None
        return self.settings.metrics_url

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._scrapes >= EXPOSITION_MAX_CONNECTIONS:  # bounded, as a worker's own endpoint
            writer.close()
            return
        self._scrapes += 1
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), SCRAPE_TIMEOUT_S)
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            path = (parts[1] if len(parts) > 1 else "").split("?", 1)[0]
            if path in (self._metrics_path, "/"):
                status, body, kind = "200 OK", await self._scrape(), metrics_merge.CONTENT_TYPE
            elif path == "/ready":
                status, body, kind = self._ready()
            elif path == "/healthz":
                status, body, kind = readiness.alive()
            else:
                status, body, kind = "404 Not Found", b"not found\n", "text/plain"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                         "Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            self._scrapes -= 1
            writer.close()

    def _ready(self) -> tuple[str, bytes, str]:
        ready = [w.ready for w in self.workers]
        body = {"status": "ready" if all(ready) else "not ready", "workers": len(ready), "ready": sum(ready)}
        return ("200 OK" if all(ready) else "503 Service Unavailable"), (json.dumps(body) + "\n").encode(), \
            readiness.JSON

    async def _scrape(self) -> bytes:
        texts = await asyncio.gather(*(self._scrape_one(w) for w in self.workers))
        return metrics_merge.merge([(w.index, t) for w, t in zip(self.workers, texts) if t is not None])

    @staticmethod
    async def _scrape_one(w: Worker) -> str | None:
        if not w.metrics:
            return None
        url = urlsplit(w.metrics)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(url.hostname, url.port), SCRAPE_TIMEOUT_S)
            writer.write(f"GET {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
            response = await asyncio.wait_for(reader.read(), SCRAPE_TIMEOUT_S)
            writer.close()
        except (OSError, asyncio.TimeoutError):
            return None  # restarting: its series are missing from this scrape
        return response.partition(b"\r\n\r\n")[2].decode()


def run(settings: Settings, worker_args: list[str]) -> int:
    from .server import run_loop

    return run_loop(Supervisor(settings, worker_args).run())
