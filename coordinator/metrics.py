"""Prometheus series of the connection layer. Label children are bound once here so that the
hot path only calls `.inc()`."""

from prometheus_client import Counter, Gauge

CONNECTIONS_OPENED = Counter("groupd_connections_opened_total", "Client connections accepted")
CONNECTIONS_CLOSED = Counter("groupd_connections_closed_total", "Client connections closed")
CONNECTIONS_OPEN = Gauge("groupd_connections_open", "Client connections open now")
_BAD_FRAMES = Counter("groupd_bad_frames_total",
                      "Requests that closed their connection, by reason", ["reason"])
BAD_FRAME = {reason: _BAD_FRAMES.labels(reason) for reason in
             ("oversized", "malformed", "unknown_api", "unsupported_version", "handler_error")}
IDLE_CLOSED = Counter("groupd_connections_idle_closed_total",
                      "Connections closed after connections.max.idle.ms without traffic")
