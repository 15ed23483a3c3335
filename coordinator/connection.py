"""One client connection: bytes in → frames → handler → replies out, in request order.

Requests may be pipelined. A handler answers at once (a response object), never (None: Produce
with acks=0), or later (a future: a held Fetch, a parked JoinGroup); replies leave in the order
their requests arrived, so a parked reply holds back the ones behind it, as in Kafka.

Anything that cannot be parsed closes this connection only, with one log line and a counter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from protocol import codec
from protocol.apis import ApiKey
from protocol.codec import MalformedRequest
from protocol.framing import FrameReader, FrameTooLarge

from . import metrics
from .apis import HANDLERS, SUPPORTED_VERSIONS, Request
from .apis.api_versions import unsupported_version_response

if TYPE_CHECKING:
    from .node import Node

log = logging.getLogger("groupd.connection")

_NO_REPLY = b""
_MAX_QUEUED = 1024  # replies waiting on one connection before we stop reading from it


class Connection(asyncio.Protocol):
    def __init__(self, node: Node, connections: set[Connection]) -> None:
        self.node = node
        self._connections = connections
        self._frames = FrameReader(node.settings.socket_request_max_bytes)
        self._replies: deque[bytes | asyncio.Future] = deque()
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self.client_host = "/?"
        self._paused = False
        self._idle_ms = node.settings.connections_max_idle_ms
        self._last_active = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self._peer = f"{peer[0]}:{peer[1]}"
            self.client_host = f"/{peer[0]}"  # Java's InetAddress.toString() without a host name
        self._connections.add(self)
        metrics.CONNECTIONS_OPENED.inc()
        metrics.CONNECTIONS_OPEN.inc()
        loop = asyncio.get_running_loop()
        self._last_active = loop.time()
        self._idle_timer = loop.call_at(self._last_active + self._idle_ms / 1000, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        metrics.CONNECTIONS_CLOSED.inc()
        metrics.CONNECTIONS_OPEN.dec()
        if self._idle_timer:
            self._idle_timer.cancel()
        for reply in self._replies:
            if isinstance(reply, asyncio.Future):
                reply.cancel()
        self._replies.clear()
        self._transport = None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    @property
    def busy(self) -> bool:
        """Replies are still owed on this connection."""
        return bool(self._replies)

    def _check_idle(self) -> None:
        # Lazy deadline: traffic only moves _last_active; the one timer re-arms when it fires early.
        loop = asyncio.get_running_loop()
        deadline = self._last_active + self._idle_ms / 1000
        if loop.time() < deadline or self._replies:
            self._idle_timer = loop.call_at(max(deadline, loop.time() + 0.001), self._check_idle)
            return
        log.info("connection closed peer=%s reason=idle idle_ms=%d", self._peer, self._idle_ms)
        metrics.IDLE_CLOSED.inc()
        self.close()

    # -- flow control ------------------------------------------------------------------------

    def pause_writing(self) -> None:
        self._pause()

    def resume_writing(self) -> None:
        self._resume()

    def _pause(self) -> None:
        if not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def _resume(self) -> None:
        if self._paused and self._transport is not None and len(self._replies) < _MAX_QUEUED:
            self._paused = False
            self._transport.resume_reading()

    # -- requests ----------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._last_active = asyncio.get_running_loop().time()
        try:
            for frame in self._frames.feed(data):
                self._dispatch(frame)
                if self._transport is None or self._transport.is_closing():
                    return
        except FrameTooLarge as e:
            self._reject("oversized", str(e))
        except MalformedRequest as e:
            self._reject("malformed", str(e))

    def eof_received(self) -> bool:
        if self._frames.pending:
            log.info("connection closed peer=%s reason=truncated-frame pending_bytes=%d",
                     self._peer, self._frames.pending)
            metrics.BAD_FRAME["malformed"].inc()
        return False

    def _reject(self, reason: str, detail: str) -> None:
        log.warning("connection closed peer=%s reason=%s: %s", self._peer, reason, detail)
        metrics.BAD_FRAME[reason].inc()
        self.close()

    def _dispatch(self, frame: bytes) -> None:
        api_key, version, correlation_id = codec.peek_header(frame)
        handler = HANDLERS.get(api_key)
        if handler is None:
            return self._reject("unknown_api", f"api key {api_key} is not served")
        lo, hi = SUPPORTED_VERSIONS[api_key]
        if not lo <= version <= hi:
            if api_key == ApiKey.API_VERSIONS:
                # Clients probe with their newest ApiVersions; answer v0 with the table (KIP-511).
                return self._queue(codec.encode_response(api_key, correlation_id,
                                                         unsupported_version_response()))
            return self._reject("unsupported_version",
                                f"{ApiKey(api_key).name} v{version} (supported {lo}-{hi})")
        header, offset = codec.parse_header(frame, codec.is_flexible(api_key, version))
        body = codec.decode_request(api_key, version, frame, offset)
        started = time.perf_counter()
        try:
            reply = handler(self.node, Request(header, body, self.client_host))
        except Exception:
            log.exception("handler failed api=%s version=%d peer=%s", ApiKey(api_key).name,
                          version, self._peer)
            metrics.BAD_FRAME["handler_error"].inc()
            self.close()
            return
        if reply is None:
            self._queue(_NO_REPLY)
        elif isinstance(reply, asyncio.Future):
            metrics.IN_FLIGHT.inc()
            reply.add_done_callback(lambda f, k=api_key, c=correlation_id, t=started: self._completed(f, k, c, t))
            self._queue(reply)
        else:
            self._queue(codec.encode_response(api_key, correlation_id, reply))
            metrics.request_done(api_key, reply, time.perf_counter() - started)

    def _queue(self, reply: bytes | asyncio.Future) -> None:
        if not self._replies and not isinstance(reply, asyncio.Future):
            if reply:  # the common case: nothing pending, answer at once
                self._transport.write(reply)  # type: ignore[union-attr]
            return
        self._replies.append(reply)
        if len(self._replies) >= _MAX_QUEUED:
            self._pause()

    def _completed(self, fut: asyncio.Future, api_key: int, correlation_id: int, started: float) -> None:
        metrics.IN_FLIGHT.dec()
        if fut.cancelled() or self._transport is None:
            return
        try:
            response: Any = fut.result()
        except Exception:
            log.exception("deferred handler failed api=%s peer=%s", ApiKey(api_key).name, self._peer)
            metrics.BAD_FRAME["handler_error"].inc()
            self.close()
            return
        encoded = _NO_REPLY if response is None else codec.encode_response(api_key, correlation_id, response)
        metrics.request_done(api_key, response, time.perf_counter() - started)
        # Swap the future for its bytes in place, then send whatever is ready at the head.
        for i, reply in enumerate(self._replies):
            if reply is fut:
                self._replies[i] = encoded
                break
        self._flush()

    def _flush(self) -> None:
        replies = self._replies
        out = []
        while replies and not isinstance(replies[0], asyncio.Future):
            out.append(replies.popleft())
        if out and self._transport is not None:
            self._transport.write(b"".join(out))
            self._last_active = asyncio.get_running_loop().time()
        self._resume()
