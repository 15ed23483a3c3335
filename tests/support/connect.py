"""Kafka Connect in distributed mode against groupd: one `ConnectDistributed` worker process per instance.

The jars come from Maven Central through `.ci/install-connect` (`make clients` runs it; cached under
`$KAFKA_TEST_CLIENTS/connect/<version>/lib`, default ~/.cache/groupd-clients): connect-runtime, connect-file
(FileStreamSource/FileStreamSink, on the classpath and found through their service manifests) and
connect-json. A worker runs with the tests' small JVM (tests/support/kafka.py TEST_JVM), its REST
listener on a free loopback port, its three internal topics with replication factor 1, short offset
flushes and heartbeats, and a short `scheduled.rebalance.max.delay.ms`, so that a dead worker's
connectors and tasks move to the others (KIP-415) within seconds rather than Kafka's default 5 minutes.
REST helpers poll with generous deadlines, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from .kafka import CACHE, TEST_JVM, installed_jars
from .process import ROOT, ServerProcess, free_ports

VERSION = os.environ.get("CONNECT_VERSION", "4.3.1")
# a worker with a few file connectors needs little: three of them and groupd share the test machine
HEAP = os.environ.get("CONNECT_HEAP", "-Xmx256m")
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


def lib_dir(version: str = VERSION) -> str:
    return os.path.join(CACHE, "connect", version, "lib")


def classpath(version: str = VERSION) -> str:
    """The jars of Kafka Connect `version`."""
    return installed_jars(lib_dir(version), f"connect-runtime-{version}.jar", f"Kafka Connect {version}",
                          f"CONNECT_VERSION={version} .ci/install-connect")


def worker_settings(bootstrap: str, group: str, rest_port: int) -> dict[str, str]:
    """A distributed worker's properties: groupd as its cluster, `group` its Connect cluster."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        # fewer partitions than Kafka's 25 and 5: the same code paths, less to read at start
        "offset.storage.partitions": "3",
        "status.storage.partitions": "2",
        "key.converter": STRING_CONVERTER,
        "value.converter": STRING_CONVERTER,
        "listeners": f"http://127.0.0.1:{rest_port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(rest_port),
        # connect-file is on the classpath with its ServiceLoader manifests: no reflective scan of 57 jars
        "plugin.discovery": "service_load",
        # source offsets flushed each second (Kafka: 60 s), so a test can wait for them
        "offset.flush.interval.ms": "1000",
        # a worker killed with -9 is noticed after the session timeout; its work is reassigned after this
        # delay (Kafka: 300000), KIP-415's grace period for a worker that comes back
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "3000",
        # a sink task's consumer stopped while groupd was down could not leave its group: its successor's
        # JoinGroup waits for that member's session to expire (consumers' default: 45 s)
        "consumer.session.timeout.ms": "6000",
        "consumer.heartbeat.interval.ms": "1000",
    }


class ConnectWorker(ServerProcess):
    """One Kafka Connect worker (`org.apache.kafka.connect.cli.ConnectDistributed`) on loopback."""

    stop_timeout = 60.0

    def __init__(self, data_dir: str, bootstrap: str, group: str = "connect", name: str = "worker",
                 settings: dict[str, str] | None = None, version: str = VERSION) -> None:
        self.data_dir = data_dir
        self.name = name
        self.version = version
        # below the ephemeral range (free_ports): the JVM binds seconds after the choice
        self.rest_port = free_ports(1)
        self.settings = {**worker_settings(bootstrap, group, self.rest_port), **(settings or {})}
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, f"connect-{name}-{self.rest_port}.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def worker_id(self) -> str:
        """The id the status API names this worker by (its advertised REST host:port)."""
        return f"127.0.0.1:{self.rest_port}"

    def command(self, config: str) -> list[str]:
        return ["java", HEAP, *TEST_JVM[1:],
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
                # the reflections library and the worker's config dumps are loud at info
                "-Dorg.slf4j.simpleLogger.log.org.reflections=warn",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.config.AbstractConfig=warn",
                "-cp", classpath(self.version), "org.apache.kafka.connect.cli.ConnectDistributed", config]

    def launch(self) -> ConnectWorker:
        """Start the JVM; `wait_ready` waits for its REST API and first assignment."""
        os.makedirs(self.data_dir, exist_ok=True)
        config = os.path.join(self.data_dir, f"connect-{self.name}.properties")
        with open(config, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in self.settings.items())
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed by stop())
        self.proc = subprocess.Popen(self.command(config), cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout: float = 180.0) -> ConnectWorker:
        """Ready: the REST API answers /connectors, which a distributed worker does only once it has joined
        its group and read the config topic to the assignment's offset (else 500 or a timeout)."""
        try:
            wait_until(lambda: self._listed(), timeout, f"worker {self.name} ready", self)
        except BaseException:
            self.kill()  # no fixture stops a worker that never became ready
            raise
        return self

    def start(self, timeout: float = 180.0) -> ConnectWorker:
        return self.launch().wait_ready(timeout)

    def _listed(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"connect worker {self.name} exited with {self.proc.returncode}:\n{self.log()[-20000:]}")
        try:
            return isinstance(self.get("/connectors"), list)
        except (OSError, RestError):
            return False

    # ---- REST ---------------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: object | None = None, timeout: float = 30.0):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise RestError(e.code, e.read().decode(errors="replace")) from None
        return json.loads(raw) if raw else None

    def get(self, path: str):
        return self.request("GET", path)

    def create_connector(self, name: str, config: dict[str, str], timeout: float = 120.0) -> None:
        """POST /connectors, retried while the worker answers that a rebalance is under way (409) or the
        leader is not known yet (a request forwarded to it fails): Kafka's own tools retry the same way."""
        def created() -> bool:
            try:
                self.request("POST", "/connectors", {"name": name, "config": config})
                return True
            except RestError as e:
                if e.status == 409 and "already exists" in e.body:
                    return True
                if e.status in (409, 500, 503):
                    return False
                raise
        wait_until(created, timeout, f"connector {name} created", self)

    def status(self, name: str) -> dict | None:
        try:
            return self.get(f"/connectors/{name}/status")
        except RestError as e:
            if e.status == 404:
                return None
            raise

    def runs(self, *names: str) -> set[str]:
        """The workers running the connectors `names` or one of their tasks, as this worker's status
        store has it (empty while the worker cannot answer)."""
        ids: set[str] = set()
        for name in names:
            try:
                status = self.status(name)
            except (OSError, RestError):
                return set()
            if status:
                ids |= {status["connector"].get("worker_id"), *(t.get("worker_id") for t in status["tasks"])}
        return ids

    def offsets(self, name: str) -> list[dict]:
        """GET /connectors/{name}/offsets (KIP-875): a source's partitions and offsets as stored."""
        return self.get(f"/connectors/{name}/offsets")["offsets"]

    def wait_running(self, name: str, tasks: int = 1, timeout: float = 180.0) -> dict:
        """The connector and `tasks` tasks RUNNING; the status it ended with."""
        last: dict = {}

        def running() -> bool:
            nonlocal last
            try:
                last = self.status(name) or {}
            except (OSError, RestError):
                return False
            return (last.get("connector", {}).get("state") == "RUNNING" and len(last.get("tasks", [])) == tasks
                    and all(t["state"] == "RUNNING" for t in last["tasks"]))
        wait_until(running, timeout, lambda: f"connector {name} running: last status {last}", self)
        return last


class RestError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


def wait_until(condition: Callable[[], bool], timeout: float, what: str | Callable[[], str],
               worker: ConnectWorker | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            desc = what() if callable(what) else what
            tail = f"\n--- {worker.name} log tail ---\n{worker.log()[-8000:]}" if worker else ""
            raise TimeoutError(f"{desc}: not within {timeout} s{tail}")
        time.sleep(0.2)
