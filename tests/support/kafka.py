"""Apache Kafka itself, the reference groupd imitates: one KRaft broker+controller process on 127.0.0.1.

The jars come from Maven Central through `.ci/install-kafka` (`make clients` runs it; cached under
`$KAFKA_TEST_CLIENTS/kafka/<version>/lib`, default ~/.cache/groupd-clients). `KafkaBroker` formats a
fresh single-node log dir (kafka.tools.StorageTool, what `kafka-storage.sh format` runs) and starts
`kafka.Kafka` with a small heap and the serial collector, both listeners on loopback only, with the
group settings groupd's tests use (`SHARED_SETTINGS`, given to both servers by the differential tests).
Ready means: ApiVersions answers, Metadata lists the broker and a controller, and every
`__consumer_offsets` partition has a loaded coordinator (FindCoordinator and OffsetFetch answer a group
of each partition without a coordinator error), so a test's first request never meets a loading
coordinator.
"""

from __future__ import annotations

import base64
import glob
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence

import pytest

from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.tools.groups import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

from . import cds
from .process import ROOT, GroupdProcess, ServerProcess, free_ports

VERSION = os.environ.get("KAFKA_REF_VERSION", "4.3.1")
CACHE = os.path.expanduser(os.environ.get("KAFKA_TEST_CLIENTS", "~/.cache/groupd-clients"))
HEAP = os.environ.get("KAFKA_REF_HEAP", "-Xmx512m")
# the tests' JVM: a shared 2-core machine, so a small heap, the serial collector and the C1 compiler only
TEST_JVM = [HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]

# The settings both servers of a differential test run with (names are the same in Kafka and groupd)
OFFSETS_PARTITIONS = 5
SHARED_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    # Kafka's minimums are 45000 and 5000: lower, so that a group config may set short timers
    # (the corpus's consumer_session_expiry, the clients' 500 ms heartbeats)
    "group.consumer.min.session.timeout.ms": "2000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
}

# A Kafka broker needs these for a single node besides the listeners; groupd has no such keys
KAFKA_ONLY_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # Kafka 4.3 batches consumer-group target assignments (at most one per interval, 1 s by default) and
    # may offload them to a background thread: a member joining sees its assignment in a later heartbeat. groupd assigns at once, in the
    # heartbeat that changed the group; these make Kafka do the same, so answers compare step by step.
    "group.consumer.min.assignment.interval.ms": "0",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    # the same for share groups (KIP-1263, Kafka 4.3): assign in the heartbeat that changed the group
    "group.share.min.assignment.interval.ms": "0",
    "group.share.assignment.interval.ms": "0",
}

LOADING = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator}


def lib_dir(version: str = VERSION) -> str:
    return os.path.join(CACHE, "kafka", version, "lib")


def installed_jars(directory: str, marker: str, what: str, install: str) -> str:
    """The classpath of the jars a .ci/install-* script put in `directory`; fails the test (never
    skips: CI installs them) when `marker`, the jar that says they are there, is absent."""
    jars = sorted(glob.glob(os.path.join(directory, "*.jar")))
    if not any(os.path.basename(j) == marker for j in jars):
        pytest.fail(f"{what} is not installed in {directory}: run `{install}` (`make clients` does it; "
                    "needs Java 17 + Maven)")
    return os.pathsep.join(jars)


def classpath(version: str = VERSION) -> str:
    """The jars of Apache Kafka `version`."""
    return installed_jars(lib_dir(version), f"kafka_2.13-{version}.jar", f"Apache Kafka {version}",
                          f"KAFKA_REF_VERSION={version} .ci/install-kafka")


def java_command(main: str, *args: str, jvm: Sequence[str] | None = None, version: str = VERSION,
                 log_level: str = "warn", show_time: bool = False) -> list[str]:
    """`java` running `main` from Kafka's jars, by default with TEST_JVM (a modest heap that starts fast;
    `jvm=[]`: the JVM's defaults, as bench/kafka_reference.py measures Kafka). Log lines go to stderr
    through slf4j-simple, dated only when `show_time` (a tool's output stays comparable)."""
    cp = classpath(version)
    return ["java", *(TEST_JVM + tools_archive(cp) if jvm is None else jvm),
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
            f"-Dorg.slf4j.simpleLogger.showDateTime={str(show_time).lower()}",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
            "-cp", cp, main, *args]


def tools_archive(cp: str) -> list[str]:
    """The TEST_JVM's class-data-sharing options for Kafka's jars (tests/support/cds.py), trained once on
    kafka-configs (Scala and the admin client, which most tools load) describing a topic of a groupd."""
    if found := cds.flags(CACHE, cp, TEST_JVM):
        return found
    with tempfile.TemporaryDirectory() as tmp:
        server = GroupdProcess(tmp, "topics=t1:1").start()
        try:
            cds.ensure(CACHE, cp, TEST_JVM, ["kafka.admin.ConfigCommand", "--bootstrap-server", server.bootstrap,
                                             "--entity-type", "topics", "--entity-name", "t1", "--describe"])
        finally:
            server.stop()
    return cds.flags(CACHE, cp, TEST_JVM)


def group_for_partition(partition: int, partitions: int = OFFSETS_PARTITIONS, prefix: str = "ready") -> str:
    """A group id whose offsets partition is `partition`."""
    i = 0
    while partition_for(f"{prefix}-{i}", partitions) != partition:
        i += 1
    return f"{prefix}-{i}"


class KafkaBroker(ServerProcess):
    """One Apache Kafka process in KRaft combined mode (broker and controller, node id 1) on loopback."""

    stop_timeout = 60.0

    def __init__(self, data_dir: str, settings: dict[str, str] | None = None, port: int | None = None,
                 version: str = VERSION, jvm: Sequence[str] | None = None) -> None:
        self.data_dir = data_dir
        self.jvm = jvm
        self.version = version
        # below the ephemeral range (free_ports): the JVM binds seconds after the choice, and a port the
        # kernel hands out to outgoing connections could be taken by one of them meanwhile
        self.port = port or free_ports(1)
        self.controller_port = free_ports(1)
        while self.controller_port == self.port:
            self.controller_port = free_ports(1)
        self.settings = {**SHARED_SETTINGS, **(settings or {})}
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, f"kafka-{self.port}.log")
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        return {
            **KAFKA_ONLY_SETTINGS,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "log.dirs": os.path.join(self.data_dir, "logs"),
            **self.settings,
        }

    def start(self, timeout: float = 180.0) -> KafkaBroker:
        os.makedirs(self.data_dir, exist_ok=True)
        config = os.path.join(self.data_dir, "server.properties")
        with open(config, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in self.properties().items())
        self._log = open(self.log_path, "ab")
        fmt = subprocess.run(java_command("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", config,
                                          "--ignore-formatted", version=self.version),
                             cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, timeout=timeout)
        if fmt.returncode:
            raise RuntimeError(f"kafka-storage format failed ({fmt.returncode}):\n{self.log()}")
        self.proc = subprocess.Popen(java_command("kafka.Kafka", config, jvm=self.jvm, version=self.version,
                                                  log_level="info", show_time=True),
                                     cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready(time.monotonic() + timeout)
        except BaseException:
            self.kill()  # no fixture stops a broker that never became ready
            raise
        return self

    def _wait_ready(self, deadline: float) -> None:
        conn = None
        partitions = int(self.settings["offsets.topic.num.partitions"])
        pending = {group_for_partition(p, partitions) for p in range(partitions)}
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka exited with {self.proc.returncode}:\n{self.log()[-20000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka was not ready in time:\n{self.log()[-20000:]}")
            try:
                if conn is None:
                    conn = AdminConnection(self.bootstrap, client_id="kafka-ready", timeout=10)
                if self._ready_step(conn, pending):
                    conn.close()
                    return
            except OSError:  # not listening yet, or a connection it closed while starting
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(0.1)

    def _ready_step(self, conn: AdminConnection, pending: set[str]) -> bool:
        if conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "groupd-tests",
                                                 "client_software_version": "1"}).error_code != ErrorCode.none:
            return False
        meta = conn.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        if not meta.brokers or meta.controller_id < 0:
            return False
        for group in sorted(pending):
            found = conn.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
            if found.coordinators[0].error_code != ErrorCode.none:
                return False
            fetched = conn.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                                          "require_stable": False})
            if fetched.groups[0].error_code in LOADING:
                return False
            pending.discard(group)
        return True


def groupd_settings(extra: dict[str, str] | None = None) -> list[str]:
    """SHARED_SETTINGS (and `extra`) as `groupd serve --set` arguments."""
    return [f"{k}={v}" for k, v in {**SHARED_SETTINGS, **(extra or {})}.items()]
