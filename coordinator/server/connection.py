"""One client connection: bytes in → frames → handler → replies out, in request order.

Requests may be pipelined. A handler answers at once (a response object), never (None: Produce
with acks=0), or later (a future: a held Fetch, a parked JoinGroup); replies leave in the order
their requests arrived, so a parked reply holds back the ones behind it, as in Kafka.

Anything that cannot be parsed closes this connection only, with one log line and a counter.

No connection can make the server hold unbounded memory or hold the loop for long: reading pauses
while the transport is write-paused or too many response bytes/replies wait (two separate reasons,
as uvicorn keeps them), while all connections' unread request bytes exceed queued.max.request.bytes,
and for one loop turn after a share of frames, so other connections get theirs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groupd.coordinator.apis import ACCEPTED_VERSIONS, HANDLERS, SUPPORTED_VERSIONS
from groupd.coordinator.apis.api_versions import unsupported_version_response
from groupd.coordinator.apis.request import Request
from groupd.coordinator.observability import metrics
from groupd.coordinator.observability.log_limit import LimitedLog
from groupd.coordinator.security.authenticator import Action, Authenticator, State, Step
from groupd.coordinator.security.listeners import authenticated, authentication_failed
from groupd.coordinator.security.tls import ANONYMOUS, certificate_principal
from groupd.protocol import codec
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import MalformedRequest
from groupd.protocol.framing import FrameReader, FrameTooLarge

if TYPE_CHECKING:
    from groupd.coordinator.security.listeners import Endpoint

    from .node import Node

log = logging.getLogger("groupd.connection")
bad_frame_log = LimitedLog(log, "bad-frame")  # one client can send thousands a second

_NO_REPLY = b""
_MAX_QUEUED = 1024  # replies waiting on one connection before we stop reading from it
# (api key, version) → (handler, whether the request header is flexible), for each version served:
# filled as versions are first seen, one lookup per request after that
_ROUTES: dict[tuple[int, int], tuple[Any, bool]] = {}
_FRAMES_PER_TURN = 64  # frames one connection may dispatch before yielding the loop to the others
_TURN_S = 0.005  # ... or handler time, whichever comes first


class RequestMemory:
    """queued.max.request.bytes: request bytes held by every connection's frame reader together.
    A connection that pushes the total over the limit stops reading until it drops."""

    __slots__ = ("limit", "held", "waiting")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.waiting: dict[Connection, None] = {}  # insertion-ordered: the first to wait resumes first

    def release(self) -> None:
        while self.waiting and self.held <= self.limit:
            conn = next(iter(self.waiting))
            del self.waiting[conn]
            conn._memory_available()


class Connection(asyncio.Protocol):
    def __init__(self, node: Node, connections: set[Connection], memory: RequestMemory, endpoint: Endpoint) -> None:
        self.node = node
        self.endpoint = endpoint
        # who the client is, fixed by TLS or SASL: "User:ANONYMOUS", "User:alice", "User:CN=alice,O=..."
        self.principal = ANONYMOUS
        self._auth: Authenticator | None = None  # SASL listeners: the exchange, until and after it completes
        self._auth_failed = False  # reading stops; the failure is answered after the delay, then closed
        self._connections = connections
        self._memory = memory
        self._held = 0  # this connection's share of memory.held
        settings = node.settings
        self._frames = FrameReader(settings.socket_request_max_bytes)
        self._frame_limit = settings.socket_request_max_bytes
        # the steady classic and consumer heartbeats answered in C (fast_heartbeat.py); None: the Python path only.
        # Not on SASL listeners: there every frame may have to go through the exchange first.
        self._heartbeat = node.fast_heartbeat if not endpoint.sasl else None
        if endpoint.sasl:
            self._auth = Authenticator(settings.sasl_enabled_mechanisms, endpoint.users,
                                       settings.connections_max_reauth_ms, endpoint.oauth,
                                       versions=SUPPORTED_VERSIONS)
            self._frames.set_limit(settings.sasl_server_max_receive_size)
        self._replies: deque[bytes | asyncio.Future] = deque()
        self._queued_bytes = 0  # encoded replies in _replies, waiting behind a parked one
        self._max_queued_bytes = node.settings.connections_max_queued_response_bytes
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self.client_host = "/?"
        self.client_id: str | None = None  # of its last request (chaos drop-connections picks by it)
        self.on_close: dict[Any, Callable[[], None]] = {}  # what handlers want done when it closes (share sessions)
        # Why reading is paused; each reason is set and cleared on its own.
        self._write_paused = False  # the transport's buffer is over its high-water mark
        self._backlogged = False  # too many replies or reply bytes wait in _replies
        self._yielding = False  # this connection used its share of the loop turn
        self._waiting_memory = False  # queued.max.request.bytes is used up
        self._answering = False  # an answer of this connection is being built off the loop
        self._reading_paused = False
        self._processing = False
        self._idle_ms = node.settings.connections_max_idle_ms
        self._arrival_s = node.settings.socket_request_arrival_timeout_ms / 1000
        self._last_active = 0.0
        self._loop_time = time.monotonic  # the loop's clock once connection_made has run (its first call)
        self._partial_since: float | None = None  # when the incomplete frame at the tail began
        self._idle_timer: asyncio.TimerHandle | None = None
        self._arrival_timer: asyncio.TimerHandle | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self._peer = f"{peer[0]}:{peer[1]}"
            self.client_host = f"/{peer[0]}"  # Java's InetAddress.toString() without a host name
        if self.endpoint.protocol == "SSL":  # on SASL_SSL the principal comes from SASL
            self.principal = certificate_principal(transport.get_extra_info("peercert"))
            authenticated(self.endpoint, "TLS", self._peer, self.principal, False)
        self._connections.add(self)
        metrics.CONNECTIONS_OPENED.inc()
        metrics.CONNECTIONS_OPEN.inc()
        loop = asyncio.get_running_loop()
        self._loop_time = loop.time  # bound once: looking the loop up was ~2 % of a heartbeat
        self._last_active = loop.time()
        self._idle_timer = loop.call_at(self._last_active + self._idle_ms / 1000, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        metrics.CONNECTIONS_CLOSED.inc()
        metrics.CONNECTIONS_OPEN.dec()
        for timer in (self._idle_timer, self._arrival_timer):
            if timer:
                timer.cancel()
        for reply in self._replies:
            if isinstance(reply, asyncio.Future):
                reply.cancel()
        self._replies.clear()
        self._transport = None
        self._memory.waiting.pop(self, None)
        self._account(0)
        callbacks, self.on_close = list(self.on_close.values()), {}
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a bug in one must not leave the connection half torn down
                log.exception("close callback failed peer=%s", self._peer)

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

    def _check_arrival(self) -> None:
        # Armed when an incomplete frame begins; while frames keep completing it only re-arms.
        self._arrival_timer = None
        if self._partial_since is None or self._transport is None:
            return
        loop = asyncio.get_running_loop()
        deadline = self._partial_since + self._arrival_s
        if loop.time() < deadline or self._write_paused or self._backlogged or self._yielding:
            # not the client's fault while we do not read; waiting for queued.max.request.bytes does
            # count, so that connections which all wait for memory cannot wait forever
            self._arrival_timer = loop.call_at(max(deadline, loop.time() + 0.01), self._check_arrival)
            return
        self._reject("slow_frame", f"{self._frames.pending} bytes of a frame still incomplete after "
                                   f"socket.request.arrival.timeout.ms={self._arrival_s * 1000:.0f}")

    # -- flow control ------------------------------------------------------------------------

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()
        self._process()

    def _update_reading(self) -> None:
        paused = self._write_paused or self._backlogged or self._yielding or self._waiting_memory or self._answering \
            or self._auth_failed
        if paused != self._reading_paused and self._transport is not None and not self._transport.is_closing():
            self._reading_paused = paused
            if paused:
                self._transport.pause_reading()
            else:
                self._transport.resume_reading()

    def _end_turn(self) -> None:
        self._yielding = False
        self._update_reading()
        self._process()

    def _answered(self, _: asyncio.Future) -> None:
        self._answering = False
        self._update_reading()
        self._process()

    def _memory_available(self) -> None:
        self._waiting_memory = False
        self._update_reading()

    def _account(self, held: int) -> None:
        """Move this connection's share of queued.max.request.bytes to `held` bytes."""
        memory = self._memory
        released = held < self._held
        memory.held += held - self._held
        self._held = held
        if released and memory.waiting:
            memory.release()

    # -- requests ----------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._last_active = self._loop_time()
        frames = self._frames
        if frames.pending or self._reading_paused:
            frames.append(data)
            self._process()
            return
        if self._heartbeat is not None and self.node.intercept is None:
            answered = self._heartbeat.answer(data, self.client_id, self._frame_limit, self.client_host)
            if answered is not None:  # it did what _dispatch would have, but the write
                reply, self.client_id = answered
                if self._replies:
                    self._queue(reply)
                else:
                    self._transport.write(reply)  # type: ignore[union-attr]
                return
        if frames.whole(data):
            # The common case, one request in one read: no buffering, no turn accounting.
            try:
                self._dispatch(data[4:])
            except MalformedRequest as e:
                self._reject("malformed", str(e))
            return
        frames.append(data)
        self._process()

    def _process(self) -> None:
        """Dispatch the frames read so far, in order, until reading has to pause or this
        connection has had its share of the loop turn."""
        if self._processing or self._transport is None:
            return
        self._processing = True
        frames = self._frames
        dispatched = 0
        try:
            turn_ends = time.perf_counter() + _TURN_S
            while not (self._write_paused or self._backlogged or self._yielding or self._answering
                       or self._auth_failed):
                frame = frames.next()
                if frame is None:
                    break
                self._partial_since = None
                self._dispatch(frame)
                if self._transport is None or self._transport.is_closing():
                    return
                dispatched += 1
                if dispatched >= _FRAMES_PER_TURN or time.perf_counter() > turn_ends:
                    if frames.pending:  # let the other connections run, then carry on
                        self._yielding = True
                        self._update_reading()
                        asyncio.get_running_loop().call_soon(self._end_turn)
                    break
        except FrameTooLarge as e:
            self._reject("oversized", str(e))
            return
        except MalformedRequest as e:
            self._reject("malformed", str(e))
            return
        finally:
            self._processing = False
        pending = frames.pending
        if pending != self._held:
            self._account(pending)
            memory = self._memory
            # Only a connection that starts a frame waits: one in the middle of a frame reads on, so
            # the frames holding the memory complete (or time out) and release it.
            if memory.held > memory.limit and pending and self._partial_since is None \
                    and not self._waiting_memory:
                self._waiting_memory = True
                memory.waiting[self] = None
                self._update_reading()
        if pending and self._partial_since is None and not (self._yielding or self._answering):
            loop = asyncio.get_running_loop()
            self._partial_since = loop.time()
            if self._arrival_timer is None:
                self._arrival_timer = loop.call_at(self._partial_since + self._arrival_s, self._check_arrival)

    def eof_received(self) -> bool:
        if self._frames.pending:
            log.info("connection closed peer=%s reason=truncated-frame pending_bytes=%d",
                     self._peer, self._frames.pending)
            metrics.BAD_FRAME["malformed"].inc()
        return False

    def _reject(self, reason: str, detail: str) -> None:
        bad_frame_log.log(logging.WARNING, "connection closed peer=%s reason=%s: %s", self._peer, reason, detail)
        metrics.BAD_FRAME[reason].inc()
        self.close()

    def _dispatch(self, frame: bytes) -> None:
        auth = self._auth
        if auth is not None and (auth.state is not State.COMPLETE or auth.expires_at is not None) \
                and self._authenticate(auth, frame):
            return
        if self._heartbeat is not None and self.node.intercept is None:
            answered = self._heartbeat.answer_frame(frame, self.client_id, self.client_host)
            if answered is not None:
                reply, self.client_id = answered
                return self._queue(reply)
        api_key, version, correlation_id = codec.peek_header(frame)
        route = _ROUTES.get((api_key, version))
        if route is None:
            handler = HANDLERS.get(api_key)
            if handler is None:
                return self._reject("unknown_api", f"api key {api_key} is not served")
            lo, hi = ACCEPTED_VERSIONS[api_key]
            if not lo <= version <= hi:
                if api_key == ApiKey.API_VERSIONS:
                    # Clients probe with their newest ApiVersions; answer v0 with the table (KIP-511).
                    return self._queue(codec.encode_response(api_key, correlation_id,
                                                             unsupported_version_response(self.node.api_versions)))
                return self._reject("unsupported_version",
                                    f"{ApiKey(api_key).name} v{version} (supported {lo}-{hi})")
            route = _ROUTES[(api_key, version)] = (handler, codec.is_flexible(api_key, version))
        handler, flexible = route
        header, offset = codec.parse_header(frame, flexible)
        body = codec.decode_request(api_key, version, frame, offset)
        started = time.perf_counter()
        try:
            request = Request(header, body, self.client_host, self.endpoint.advertised, self.principal,
                              on_close=self.on_close)
            self.client_id = header.client_id
            intercept = self.node.intercept  # a fault is armed (coordinator/chaos/faults.py)
            reply = handler(self.node, request) if intercept is None else intercept(handler, api_key, request)
        except Exception:
            log.exception("handler failed api=%s version=%d peer=%s", ApiKey(api_key).name,
                          version, self._peer)
            metrics.BAD_FRAME["handler_error"].inc()
            self.close()
            return
        if reply is None:
            self._queue(_NO_REPLY)
        elif isinstance(reply, asyncio.Future):
            metrics.REQUESTS.in_flight += 1
            reply.add_done_callback(lambda f, k=api_key, c=correlation_id, t=started: self._completed(f, k, c, t))
            if request.off_loop:
                self._answering = True
                self._update_reading()
                reply.add_done_callback(self._answered)
            self._queue(reply)
        else:
            self._queue(codec.encode_response(api_key, correlation_id, reply))
            metrics.request_done(api_key, reply, time.perf_counter() - started)

    # -- SASL --------------------------------------------------------------------------------

    def _authenticate(self, auth: Authenticator, frame: bytes) -> bool:
        """Run `frame` through the SASL exchange; False when it is an ordinary request to dispatch
        (ApiVersions first, or anything once authenticated and not expired)."""
        now = asyncio.get_running_loop().time()
        if auth.state is State.COMPLETE:
            is_handshake = codec.peek_header(frame)[0] == ApiKey.SASL_HANDSHAKE
            if auth.expired(now) and not is_handshake:
                log.info("connection closed peer=%s reason=session-expired principal=%s "
                         "connections.max.reauth.ms=%d", self._peer, self.principal,
                         self.node.settings.connections_max_reauth_ms)
                metrics.EXPIRED_CLOSED.inc()
                self.close()
                return True
            if not (is_handshake and auth.may_reauthenticate(now)):
                return False
        step = auth.receive(frame, now)
        action = step.action
        if action is Action.DISPATCH:
            return False
        if action is Action.CLOSE:
            self._reject("sasl_" + step.reason, step.detail)
        elif action is Action.FAIL:
            self._fail_authentication(auth, step)
        else:
            if action is Action.DONE:  # logged before the reply goes out: the client may act on it at once
                self.principal = auth.principal
                self._frames.set_limit(self.node.settings.socket_request_max_bytes)
                authenticated(self.endpoint, auth.mechanism, self._peer, self.principal, auth.reauthenticating)
            if step.reply:
                self._queue(step.reply)
        return True

    def _fail_authentication(self, auth: Authenticator, step: Step) -> None:
        """Kafka's order: stop reading, wait connection.failed.authentication.delay.ms, answer, close."""
        authentication_failed(self.endpoint, auth.mechanism or "-", self._peer, step.reason, step.detail)
        self._auth_failed = True
        self._update_reading()

        def answer_and_close() -> None:
            if self._transport is not None:
                if step.reply:
                    self._queue(step.reply)
                self.close()

        asyncio.get_running_loop().call_later(self.node.settings.connection_failed_authentication_delay_ms / 1000,
                                              answer_and_close)

    def _queue(self, reply: bytes | asyncio.Future) -> None:
        if not self._replies and not isinstance(reply, asyncio.Future):
            if reply:  # the common case: nothing pending, answer at once
                self._transport.write(reply)  # type: ignore[union-attr]
            return
        self._replies.append(reply)
        if not isinstance(reply, asyncio.Future):
            self._queued_bytes += len(reply)
        self._check_backlog()

    def _check_backlog(self) -> None:
        backlogged = len(self._replies) >= _MAX_QUEUED or self._queued_bytes > self._max_queued_bytes
        if backlogged != self._backlogged:
            self._backlogged = backlogged
            self._update_reading()
            if not backlogged:
                self._process()

    def _completed(self, fut: asyncio.Future, api_key: int, correlation_id: int, started: float) -> None:
        metrics.REQUESTS.in_flight -= 1
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
                self._queued_bytes += len(encoded)
                break
        self._flush()

    def _flush(self) -> None:
        replies = self._replies
        out = []
        while replies and not isinstance(replies[0], asyncio.Future):
            out.append(replies.popleft())
        if out and self._transport is not None:
            data = b"".join(out)
            self._queued_bytes -= len(data)
            self._transport.write(data)  # may pause writing: reading then stays paused
            self._last_active = asyncio.get_running_loop().time()
        self._check_backlog()
