"""A stand-in for toxiproxy's HTTP API, enough for Sarama's functional tests to take an existing
broker: their TestMain reads TOXIPROXY_ADDR, asks it for proxies `kafka1`..`kafka5` and then talks
to 127.0.0.1:29091..29095 (fixed in sarama's functional_test.go). groupd listens on those five
addresses itself (one listener each). No traffic passes through here: every request that
would change a proxy (disable it, add a toxic) is refused with 501, so a test that injects faults
fails at that call instead of passing without the fault."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FIRST_PORT = 29091  # sarama: 127.0.0.1:(29090 + i) for proxy kafka<i>
PROXIES = 5


class ToxiproxyStandIn:
    def __init__(self) -> None:
        self.refused: list[str] = []  # "METHOD path" of every request refused, for the verdict's detail
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.removeprefix("/proxies/")
                if self.path.startswith("/proxies/") and name in stand_in.proxies():
                    self._reply(200, stand_in.proxies()[name])
                else:
                    self._reply(404, {"error": "proxy not found"})

            def do_POST(self) -> None:
                if self.path == "/reset":  # drop every toxic and enable every proxy: there are none to drop
                    self._reply(204, None)
                else:
                    stand_in.refused.append(f"POST {self.path}")
                    self._reply(501, {"error": "groupd's toxiproxy stand-in injects no faults"})

            def _reply(self, status: int, body: dict | None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:  # quiet: the refusals are kept in `refused`
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="toxiproxy-stand-in", daemon=True)

    def proxies(self) -> dict[str, dict]:
        return {f"kafka{i}": {"name": f"kafka{i}", "listen": f"127.0.0.1:{FIRST_PORT + i - 1}",
                              "upstream": f"127.0.0.1:{FIRST_PORT + i - 1}",  # groupd, no hop between
                              "enabled": True} for i in range(1, PROXIES + 1)}

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ToxiproxyStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
