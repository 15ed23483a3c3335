"""TLS between the socket and a connection, for SSL and SASL_SSL listeners: the ssl module's
memory BIOs over a plain asyncio transport, presented to the connection as its transport.

asyncio's own TLS layer drops the TLS alert of a failed handshake (it aborts the transport with
the alert still unsent), so a client without a valid certificate sees only a closed connection.
Kafka sends the alert first, and clients then report why (Java: SslAuthenticationException,
librdkafka: "SSL handshake failed: ... certificate ..."). This layer does the same."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any

HANDSHAKE_TIMEOUT_S = 60.0  # asyncio's default ssl_handshake_timeout
_READ_SIZE = 262144


class TlsTransport(asyncio.Protocol):
    """The protocol of the raw socket and the transport of the connection (`app`) above it; the
    connection is made once the handshake has succeeded."""

    def __init__(self, context: ssl.SSLContext, app_factory: Callable[[], asyncio.Protocol],
                 on_handshake_failed: Callable[[str, Exception], None]) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._app_factory = app_factory
        self._on_handshake_failed = on_handshake_failed
        self._app: asyncio.Protocol | None = None
        self._transport: asyncio.Transport | None = None
        self._timeout: asyncio.TimerHandle | None = None
        self._peer = "?"

    # -- the raw socket's protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self._peer = f"{peer[0]}:{peer[1]}"
        self._timeout = asyncio.get_running_loop().call_later(HANDSHAKE_TIMEOUT_S, self._handshake_timed_out)

    def data_received(self, data: bytes) -> None:
        self._incoming.write(data)
        if self._app is None and not self._handshake():
            return
        chunks = []
        incoming, tls = self._incoming, self._ssl
        try:
            while True:
                chunk = tls.read(_READ_SIZE)
                if not chunk:
                    break
                chunks.append(chunk)
                if not incoming.pending and not tls.pending():
                    break  # everything read: spares the SSLWantReadError of one more read
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:  # the client's close_notify
            self._flush()
            self._transport.close()  # type: ignore[union-attr]
        except ssl.SSLError:
            self._transport.close()  # type: ignore[union-attr]
            return
        self._flush()  # TLS 1.3 session tickets, key updates
        if chunks and self._app is not None:
            self._app.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def _handshake(self) -> bool:
        try:
            self._ssl.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return False
        except (ssl.SSLError, OSError) as e:
            self._flush()  # the alert: the client learns why
            self._cancel_timeout()
            self._transport.close()  # type: ignore[union-attr]
            self._on_handshake_failed(self._peer, e)
            return False
        self._flush()
        self._cancel_timeout()
        self._app = self._app_factory()
        self._app.connection_made(self)  # type: ignore[arg-type]
        return True

    def _handshake_timed_out(self) -> None:
        self._timeout = None
        if self._app is None and self._transport is not None:
            self._transport.close()
            self._on_handshake_failed(self._peer, TimeoutError(f"no TLS handshake within {HANDSHAKE_TIMEOUT_S:.0f} s"))

    def _cancel_timeout(self) -> None:
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout = None

    def eof_received(self) -> bool | None:
        return self._app.eof_received() if self._app is not None else False

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timeout()
        if self._app is not None:
            self._app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._app is not None:
            self._app.pause_writing()

    def resume_writing(self) -> None:
        if self._app is not None:
            self._app.resume_writing()

    def _flush(self) -> None:
        if self._outgoing.pending:
            self._transport.write(self._outgoing.read())  # type: ignore[union-attr]

    # -- the connection's transport ------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        self._ssl.write(data)
        self._flush()

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            try:
                self._ssl.unwrap()  # close_notify
            except ssl.SSLError:
                pass
            self._flush()
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def pause_reading(self) -> None:
        self._transport.pause_reading()  # type: ignore[union-attr]

    def resume_reading(self) -> None:
        self._transport.resume_reading()  # type: ignore[union-attr]

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peercert":
            return self._ssl.getpeercert()
        if name == "ssl_object":
            return self._ssl
        return self._transport.get_extra_info(name, default) if self._transport is not None else default
