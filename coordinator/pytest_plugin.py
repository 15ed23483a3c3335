"""groupd embedded in a pytest suite (registered through the `pytest11` entry point): the fixtures
`groupd_server` (a fresh server per test) and `groupd_server_session` (one for the session), each a
`GroupdServer` — `python -m groupd.coordinator serve` in a subprocess on free loopback ports, with test-friendly
settings and the admin endpoint on, so a test can inject faults. Fixtures are opt-in by name; a suite
changes the settings by overriding the `groupd_settings` fixture (session scope)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported when a server starts: a suite that uses no fixture imports nothing of groupd's
    from groupd.coordinator.tools.chaos_client import ChaosClient

# Settings for tests: no initial rebalance delay, short session timeouts allowed, consumer-protocol
# heartbeats every 500 ms, few offsets partitions (a quick start), real messages (the memory plane).
TEST_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
    "offsets.topic.num.partitions": "5",
    "records.plane": "memory",
    "metrics.listener": "",
}

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GroupdServer:
    """One groupd process. `bootstrap_servers` ("127.0.0.1:PORT") goes into a client's
    `bootstrap.servers`; the chaos helpers arm faults through the admin endpoint (`admin_url`)."""

    def __init__(self, data_dir: str, settings: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.settings = {**TEST_SETTINGS, **(settings or {})}
        self.port = 0
        self.admin_url = ""
        self.log_path = os.path.join(data_dir, "groupd.log")
        self._proc: subprocess.Popen | None = None
        self.chaos: ChaosClient | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = START_TIMEOUT_S) -> GroupdServer:
        os.makedirs(self.data_dir, exist_ok=True)
        for _ in range(3):  # a free port can be taken between the probe and the bind: try others
            self.port, admin_port = free_port(), free_port()
            self.admin_url = f"http://127.0.0.1:{admin_port}"
            settings = {**self.settings, "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                        "admin.listener": self.admin_url, "data.dir": self.data_dir}
            # -P: the caller's cwd is not on sys.path
            args = [sys.executable, "-P", "-m", "groupd.coordinator", "serve"]
            for key, value in settings.items():
                args += ["--set", f"{key}={value}"]
            with open(self.log_path, "ab") as log:
                self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            from groupd.coordinator.tools.chaos_client import ChaosClient

            self.chaos = ChaosClient(self.admin_url, timeout=5)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self._proc.poll() is None:
                if self.chaos.ready():
                    self.chaos.timeout = 30
                    return self
                time.sleep(0.05)
            if self._proc.poll() is None:
                self.stop()
                raise RuntimeError(f"groupd did not become ready in {timeout:.0f} s; its log:\n{self.log()}")
            if "cannot listen" not in self.log():
                break
        raise RuntimeError(f"groupd exited with {self._proc.returncode}; its log:\n{self.log()}")

    def stop(self) -> int:
        """SIGTERM, then SIGKILL if it has not exited within STOP_TIMEOUT_S: its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    # -- chaos helpers (coordinator/tools/chaos_client.py; durations in seconds) -------------------------

    def rebalance(self, group: str) -> None:
        """A new generation (classic group) or group epoch (consumer group) now."""
        self.chaos.rebalance(group)

    def expire(self, group: str, members: list[str] | None = None) -> None:
        """Remove these members (default: all) as if their sessions expired."""
        self.chaos.expire(group, members)

    def error(self, api: str, code: str, group: str | None = None, *, count: int | None = None,
              seconds: float | None = None) -> dict:
        """Answer `api` (Kafka's name: "Heartbeat") with Kafka's error `code` ("REBALANCE_IN_PROGRESS")."""
        return self.chaos.error(api, code, group, count=count, for_ms=_ms(seconds))

    def delay(self, api: str, ms: int, group: str | None = None, *, count: int | None = None,
              seconds: float | None = None) -> dict:
        return self.chaos.delay(api, ms, group, count=count, for_ms=_ms(seconds))

    def move_coordinator(self, group: str, seconds: float) -> dict:
        """NOT_COORDINATOR for the group's requests for `seconds`, as a coordinator failover looks."""
        return self.chaos.move_coordinator(group, _ms(seconds))

    def drop_connections(self, client_id: str | None = None) -> int:
        return self.chaos.drop_connections(client_id)

    def faults(self) -> list[dict]:
        return self.chaos.faults()

    def clear_faults(self) -> int:
        return self.chaos.clear()


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else max(int(seconds * 1000), 1)


@pytest.fixture(scope="session")
def groupd_settings() -> dict[str, str]:
    """Settings on top of TEST_SETTINGS for every groupd fixture; override it to change them."""
    return {}


def _serve(data_dir: str, settings: dict[str, str]):
    server = GroupdServer(data_dir, settings).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def groupd_server(tmp_path_factory, groupd_settings):
    """A fresh groupd for this test (its own data dir)."""
    yield from _serve(str(tmp_path_factory.mktemp("groupd")), groupd_settings)


@pytest.fixture(scope="session")
def groupd_server_session(tmp_path_factory, groupd_settings):
    """One groupd for the whole session: tests share it, so each uses its own group ids and clears
    the faults it armed (`clear_faults()`)."""
    yield from _serve(str(tmp_path_factory.mktemp("groupd-session")), groupd_settings)
