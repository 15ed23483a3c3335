"""Kafka Streams apps against groupd: one JVM per instance of tests/clients/java/StreamsApps.java.

The jars come from Maven Central through `.ci/install-streams` (`make clients` runs it; cached under
`$KAFKA_TEST_CLIENTS/streams/<version>/lib`). StreamsApps.java is compiled with javac against them once per
version and source hash (`$KAFKA_TEST_CLIENTS/streams/<version>/classes-<hash>`), so each instance starts
without the single-file launcher's compile. An instance prints one line per event on stdout (`STATE
RUNNING`, `ASSIGNED 0_0,1_0 STANDBY -`, `METADATA host:port=partitions ...` then `METADATA-END`, `ERROR
...`); `StreamsApp` keeps them and `wait_for` polls them with a deadline. The library's log goes to a file.
Helpers produce input and read an output topic back (last value per key, or every record) with
confluent-kafka.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from .kafka import CACHE, TEST_JVM, installed_jars
from .process import ROOT, ServerProcess, free_ports

VERSION = os.environ.get("STREAMS_VERSION", "4.3.1")
HEAP = os.environ.get("STREAMS_HEAP", "-Xmx256m")
SOURCE = os.path.join(ROOT, "tests", "clients", "java", "StreamsApps.java")
_compile_lock = threading.Lock()


def lib_dir(version: str = VERSION) -> str:
    return os.path.join(CACHE, "streams", version, "lib")


def classpath(version: str = VERSION, source: str = SOURCE) -> str:
    """The jars of Kafka Streams `version` and `source` (StreamsApps.java) compiled against them."""
    jars = installed_jars(lib_dir(version), f"kafka-streams-{version}.jar", f"Kafka Streams {version}",
                          f"STREAMS_VERSION={version} .ci/install-streams")
    return os.pathsep.join([compiled(version, jars, source), jars])


def compiled(version: str, jars: str, source: str = SOURCE) -> str:
    """The classes directory of `source` (StreamsApps.java by default) for this source and version, compiled
    if absent."""
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(CACHE, "streams", version, f"classes-{digest}")
    main = os.path.splitext(os.path.basename(source))[0]
    with _compile_lock:
        if not os.path.exists(os.path.join(out, f"{main}.class")):
            tmp = f"{out}.tmp-{os.getpid()}"
            subprocess.run(["javac", "-nowarn", "-d", tmp, "-cp", jars, source], check=True,
                           capture_output=True, timeout=300)
            try:
                os.replace(tmp, out)
            except OSError:  # another process compiled it first
                shutil.rmtree(tmp, ignore_errors=True)
    return out


class StreamsApp(ServerProcess):
    """One Kafka Streams instance (StreamsApps.java) with its own state directory and application.server."""

    stop_timeout = 60.0

    def __init__(self, data_dir: str, bootstrap: str, application_id: str, app: str = "wordcount",
                 guarantee: str = "at_least_once", group_protocol: str = "classic", name: str = "app",
                 standbys: int = 0, topics: dict[str, str] | None = None, extra: Iterable[str] = (),
                 version: str = VERSION) -> None:
        self.data_dir = data_dir
        self.name = name
        self.version = version
        self.port = free_ports(1)  # application.server: only advertised, nothing listens
        self.state_dir = os.path.join(data_dir, f"state-{name}")
        self.args = ["--bootstrap", bootstrap, "--application-id", application_id, "--app", app,
                     "--guarantee", guarantee, "--group-protocol", group_protocol, "--state-dir", self.state_dir,
                     "--application-server", self.endpoint, "--standbys", str(standbys)]
        for k, v in (topics or {}).items():
            self.args += [f"--{k}", v]
        self.args += list(extra)
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, f"streams-{name}.log")
        self.lines: list[str] = []
        self._cond = threading.Condition()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return ["java", HEAP, *TEST_JVM[1:],
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.config.AbstractConfig=warn",
                "-cp", classpath(self.version), "StreamsApps", *self.args]

    def start(self) -> StreamsApp:
        """Start the JVM; `wait_for("STATE RUNNING")` waits for its first assignment."""
        os.makedirs(self.state_dir, exist_ok=True)
        cmd = self.command()
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed by stop())
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, text=True, bufsize=1)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        return self

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, command: str) -> None:
        """A command on stdin (`KEY store key`, `GET store key`): its answer is a line on stdout."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def wait_for(self, what: str | Callable[[str], bool], timeout: float = 120.0, after: int = 0) -> str:
        """The first stdout line at index `after` or later that starts with `what` (or satisfies it)."""
        match = (lambda s: s.startswith(what)) if isinstance(what, str) else what
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines[after:]:
                    if match(line):
                        return line
                if self.proc is None or self.proc.poll() is not None:
                    self._cond.wait(0.5)  # the reader may still hold the last lines
                    if not any(match(line) for line in self.lines[after:]):
                        raise RuntimeError(f"streams {self.name} exited ({self.proc and self.proc.returncode})"
                                           f" before {what!r}:\n{self.tail()}")
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"streams {self.name}: no {what!r} within {timeout} s\n{self.tail()}")
                self._cond.wait(min(left, 1.0))

    def mark(self) -> int:
        """The number of stdout lines so far: `wait_for(..., after=mark)` looks only at later ones."""
        with self._cond:
            return len(self.lines)

    def tasks(self) -> tuple[set[str], set[str]]:
        """The active and standby tasks of the last `ASSIGNED` line."""
        with self._cond:
            last = next((s for s in reversed(self.lines) if s.startswith("ASSIGNED ")), None)
        if last is None:
            return set(), set()
        _, active, _, standby = last.split(" ")
        return ({t for t in active.split(",") if t != "-"}, {t for t in standby.split(",") if t != "-"})

    def metadata(self) -> dict[str, dict[str, set[str]]]:
        """The last complete METADATA block: {host:port: {"active": partitions, "standby": ..., "stores": ...}}."""
        with self._cond:
            lines = list(self.lines)
        if "METADATA-END" not in lines:
            return {}
        end = len(lines) - 1 - lines[::-1].index("METADATA-END")
        start = end
        while start > 0 and lines[start - 1].startswith("METADATA "):
            start -= 1
        out: dict[str, dict[str, set[str]]] = {}
        for line in lines[start:end]:
            head, standby, stores = line[len("METADATA "):].split(" ")
            endpoint, active = head.split("=", 1)
            out[endpoint] = {"active": _names(active), "standby": _names(standby.split("=", 1)[1]),
                             "stores": _names(stores.split("=", 1)[1])}
        return out

    def process_id(self, application_id: str) -> str:
        """The instance's process id, as Streams keeps it in its state directory (EOS v2 producers are
        `<application id>-<process id>-<thread>` transactional ids)."""
        import json
        with open(os.path.join(self.state_dir, application_id, "kafka-streams-process-metadata")) as f:
            return json.load(f)["processId"]

    def tail(self, n: int = 12000) -> str:
        with self._cond:
            out = "\n".join(self.lines[-50:])
        try:
            log = self.log()[-n:]
        except OSError:
            log = ""
        return f"--- {self.name} stdout ---\n{out}\n--- {self.name} log tail ---\n{log}"

    def stop(self, *args, **kwargs) -> int:
        if self.proc is not None and self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        return super().stop(*args, **kwargs)


def _names(field: str) -> set[str]:
    return {p for p in field.split(",") if p and p != "-"}


# ---- input and output topics ----------------------------------------------------------------------

def create_topics(bootstrap: str, topics: dict[str, int], configs: dict[str, str] | None = None) -> None:
    """Create `topics` ({name: partitions}) with replication factor 1 and wait for them."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1, config=dict(configs or {})) for t, n in topics.items()])
    for f in futures.values():
        f.result(60)


def produce(bootstrap: str, topic: str, records: Iterable[tuple[str | None, str | None]],
            partition: int | None = None) -> None:
    """Send (key, value) string pairs to `topic` (value None: a tombstone), in order, and wait for every
    acknowledgement."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failed: list[str] = []

    def report(err, _msg):
        if err is not None:
            failed.append(str(err))
    for key, value in records:
        kwargs = {} if partition is None else {"partition": partition}
        p.produce(topic, value.encode() if value is not None else None, key.encode() if key is not None else None, on_delivery=report, **kwargs)
        p.poll(0)
    left = p.flush(60)
    assert left == 0 and not failed, (left, failed)


def read_topic(bootstrap: str, topic: str, committed: bool = False, timeout: float = 60.0,
               decode: bool = True) -> list[tuple[int, int, str | None, str | None]]:
    """Every record of `topic` as (partition, offset, key, value), up to each partition's end when read
    (its last stable offset with `committed`: isolation.level=read_committed); keys and values as UTF-8
    strings, or the bytes without `decode` (a changelog's serialized values)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted",
                  "enable.partition.eof": True})
    try:
        meta = c.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"{topic}: {meta.error}")
        parts = sorted(meta.partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        pending = set(parts)
        out: list[tuple[int, int, str | None, str | None]] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {pending} not at their end within {timeout} s")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
                    continue
                raise RuntimeError(f"reading {topic}: {m.error()}")
            key, value = m.key(), m.value()
            if decode:
                key, value = (key.decode() if key is not None else None, value.decode() if value is not None else None)
            out.append((m.partition(), m.offset(), key, value))
        return out
    finally:
        c.close()


def last_values(records: Iterable[tuple[int, int, str | None, str | None]]) -> dict[str | None, str | None]:
    """The last value per key of `read_topic`'s records (a key lives in one partition, read in order)."""
    out: dict[str | None, str | None] = {}
    for _p, _o, key, value in records:
        out[key] = value
    return out


def wait_until(condition: Callable[[], bool], timeout: float, what: str | Callable[[], str],
               apps: Iterable[StreamsApp] = ()) -> None:
    """Poll `condition` until true; on timeout the apps' output tails say why."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            desc = what() if callable(what) else what
            raise TimeoutError(f"{desc}: not within {timeout} s\n" + "\n".join(a.tail(4000) for a in apps))
        time.sleep(0.2)
