"""Test support: the real groupd process on 127.0.0.1, and a small blocking wire client."""

from __future__ import annotations

import asyncio
import datetime
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

from groupd.coordinator.tools.client import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.consumer import encode_assignment, encode_subscription

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def groupd_cli(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """The real CLI, `python -m groupd.coordinator ARGS` from this checkout, with no GROUPD_* variables
    unless given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GROUPD_")}
    return subprocess.run([sys.executable, "-m", "groupd.coordinator", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**clean, **(env or {})})


def groupd_cli_output(*args: str) -> str:
    """What the CLI prints, once it succeeded."""
    r = groupd_cli(*args)
    assert r.returncode == 0, r.stderr
    return r.stdout

async def wait_for(condition, timeout: float = 20.0) -> None:
    """Poll `condition` on the running event loop until it holds (in-process tests)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition did not hold in time"
        await asyncio.sleep(0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> int:
    """A port p with p .. p + n - 1 all free now (`groupd serve --workers n` listens on all), below the
    ephemeral range, so that no client connection takes one of them before the workers bind."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    while True:
        port = random.randrange(10_000, low - n)
        try:
            for i in range(n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + i))
            return port
        except OSError:
            continue


class ServerProcess:
    """A server started as a child process whose output goes to `log_path`: read it, stop it."""

    proc: subprocess.Popen | None
    log_path: str
    stop_timeout = 15.0

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self, sig: int = signal.SIGTERM, timeout: float | None = None) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(self.stop_timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self._log.close()
        self.proc = None
        return rc

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class GroupdProcess(ServerProcess):
    """`groupd serve` as a child process, bound to a free loopback port."""

    def __init__(self, data_dir: str, *settings: str, port: int | None = None,
                 ready: str | tuple[str, ...] = ("groupd ready", "offsets log loaded")) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        # the log lines that say it listens and every offsets partition is loaded (workers: "workers ready");
        # the disk records plane recovers after the offsets partitions start loading, before it listens
        self.ready = (ready,) if isinstance(ready, str) else ready
        self.settings = list(settings)
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, f"groupd-{self.port}.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> GroupdProcess:
        os.makedirs(self.data_dir, exist_ok=True)
        args = [sys.executable, "-m", "groupd.coordinator", "serve",
                "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--set", f"data.dir={self.data_dir}",
                "--set", "metrics.listener="]  # off unless a test asks for it (ports would collide)
        for s in self.settings:
            args += ["--set", s]
        self._log = open(self.log_path, "ab")
        seen = len(self.log())  # a restart appends: look for "ready" only past this point
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"groupd exited with {self.proc.returncode}:\n{self.log()}")
            # ready, and every offsets partition loaded (or failed): requests no longer meet
            # COORDINATOR_LOAD_IN_PROGRESS
            if all(line in self.log()[seen:] for line in self.ready):
                return self
            time.sleep(0.05)
        self.kill()  # no fixture will stop a server that never started: it would outlive the test run
        raise TimeoutError(f"groupd did not start in {timeout} s:\n{self.log()}")



def groupd_fixture(*settings: str, scope: str = "module", name: str | None = None):
    """A fixture of a test module's server: `groupd serve` with `settings` in a fresh data dir,
    stopped at the end, which must exit cleanly. `server = groupd_fixture("topics=t:4")`."""

    @pytest.fixture(scope=scope, name=name)
    def server(tmp_path_factory):
        s = GroupdProcess(str(tmp_path_factory.mktemp(name or "groupd")), *settings).start()
        yield s
        assert s.stop() == 0, s.log()

    return server


class WireClient(AdminConnection):
    """Blocking Kafka client for tests: build a request from plain values, get the decoded
    kio response back. Speaks whatever (api, version) it is asked to, so tests can also send
    what a server must refuse. (The wire part is the operations CLI's, coordinator/tools/groups.py.)"""

    def __init__(self, bootstrap: str, client_id: str | None = "wire-test", timeout: float = 10.0) -> None:
        super().__init__(bootstrap, client_id, timeout)

    def __enter__(self) -> WireClient:
        return self

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def closed_at_a_request(self, rounds: int = 300) -> bool:
        """Send Metadata requests until the server closes the connection (an expired SASL session),
        at most `rounds` of them; each round waits up to 0.1 s for the close."""
        for _ in range(rounds):
            _, data = self.frame(ApiKey.METADATA, 1, {"topics": []})
            try:
                self.send_raw(data)
                self.read_frame()
            except ConnectionError:
                return True
            if self.closed_by_server(timeout=0.1):
                return True
            self.sock.settimeout(10)
        return False


def join_and_sync(c: WireClient, group: str, topic: str = "t",
                  session: datetime.timedelta = datetime.timedelta(seconds=60)) -> tuple[str, int]:
    """One consumer joins `group` alone (JoinGroup v9: MEMBER_ID_REQUIRED, then again with the
    id) and syncs an empty assignment: (member id, generation)."""
    join = {"group_id": group, "session_timeout": session, "rebalance_timeout": session, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription([topic])}], "reason": None}
    first = c.request(ApiKey.JOIN_GROUP, 9, join)
    assert first.error_code is ErrorCode.member_id_required, first
    second = c.request(ApiKey.JOIN_GROUP, 9, {**join, "member_id": first.member_id})
    assert second.error_code is ErrorCode.none, second
    sync = c.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": second.generation_id, "member_id": second.member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": second.member_id, "assignment": encode_assignment({})}]})
    assert sync.error_code is ErrorCode.none, sync
    return second.member_id, second.generation_id


def commit_offsets(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit {partition: offset} as a simple consumer does (generation -1, no member)."""
    with WireClient(bootstrap) as w:
        reply = w.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": ""}
                for p, o in offsets.items()]}]})
    assert all(p.error_code == ErrorCode.none for t in reply.topics for p in t.partitions), reply


def established_peers(port: int) -> set[int]:
    """Client ports of the ESTABLISHED TCP connections to 127.0.0.1:`port`, from /proc: a client
    stuck in a reconnect loop shows up as a changing set."""
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                peers.add(int(remote.rsplit(":", 1)[1], 16))
    return peers
