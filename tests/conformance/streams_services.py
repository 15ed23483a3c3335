"""The pieces of Kafka's tests/kafkatest/services/streams.py and verifiable_producer.py that the Kafka Streams
system tests need here: a client JVM with its stdout and log in files, a restartable service, ducktape's
verify_running/verify_stopped, a paced producer."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.kafka import TEST_JVM


class Java:
    """One of the test's JVMs, its stdout (the events the ducktape test watches) in a file of its own."""

    def __init__(self, classpath: str, run_dir: Path, name: str, *args: str, append: bool = False,
                 jvm: tuple[str, ...] = ()) -> None:
        self.name = name
        self.out = run_dir / f"{name}.stdout"
        self.err = run_dir / f"{name}.stderr"
        cmd = ["java", "-Xmx512m", *TEST_JVM[1:], *jvm, "-cp", classpath, *args]
        mode = "ab" if append else "wb"  # a restarted service appends to its files, as ducktape's do
        with open(self.out, mode) as out, open(self.err, mode) as err:
            self.proc = subprocess.Popen(cmd, cwd=run_dir, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def logged(self) -> str:
        """stdout and the log (slf4j-simple writes to stderr; ducktape greps its log4j file)."""
        return self.text() + self.err.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float, in_log: bool = False, since: int = 0) -> None:
        """Wait for `needle` in stdout from offset `since` on (ducktape's monitor_log), or with `in_log` in
        stdout and stderr."""
        def seen() -> bool:
            return needle in (self.logged() if in_log else self.text()[since:])
        deadline = time.monotonic() + timeout
        while not seen():
            if self.proc.poll() is not None and not seen():  # read once more: it may have printed and exited
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}) before printing {needle!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not print {needle!r} within {timeout:.0f} s")
            time.sleep(0.2)

    def stop(self, crash: bool = False, timeout: float = 120.0) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL if crash else signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Service:
    """A ducktape streams service: one JVM at a time, restartable, its output files appended across starts;
    start() waits for the line its start_node waits for."""

    def __init__(self, classpath: str, run_dir: Path, name: str, args: Callable[[], list[str]],
                 started: str = "StreamsTest instance started", jvm: tuple[str, ...] = ()) -> None:
        self.classpath, self.run_dir, self.name, self.args, self.started, self.jvm = \
            classpath, run_dir, name, args, started, jvm
        self.java: Java | None = None

    def mark(self) -> int:
        out = self.run_dir / f"{self.name}.stdout"
        return len(out.read_text(errors="replace")) if out.exists() else 0

    def start(self) -> None:
        since = self.mark()
        self.java = Java(self.classpath, self.run_dir, self.name, *self.args(), append=True, jvm=self.jvm)
        self.java.wait_for(self.started, 60, since=since)

    def stop(self, clean: bool = True) -> None:
        if self.java is not None:
            self.java.stop(crash=not clean)

    def wait_for(self, needle: str, timeout: float = 60, since: int = 0) -> None:
        assert self.java is not None
        self.java.wait_for(needle, timeout, since=since)

    def count(self, pattern: str) -> int:
        """`grep -E pattern stdout | wc -l`"""
        out = self.run_dir / f"{self.name}.stdout"
        return sum(1 for line in out.read_text(errors="replace").splitlines() if re.search(pattern, line))


def verify_running(service: Service, message: str) -> None:
    """utils.verify_running: start, and see `message` within 60 s."""
    since = service.mark()
    service.start()
    service.wait_for(message, 60, since=since)


def verify_stopped(service: Service, message: str) -> None:
    """utils.verify_stopped: stop cleanly; `message` printed on the way out."""
    since = service.mark()
    service.stop()
    out = (service.run_dir / f"{service.name}.stdout").read_text(errors="replace")[since:]
    assert message in out, f"{service.name} did not print {message!r} while stopping"


def verify_processing(services: list[Service], pattern: str) -> None:
    """Each service prints `pattern` within 60 s (from now on)."""
    marks = [s.mark() for s in services]
    for service, since in zip(services, marks):
        service.wait_for(pattern, 60, since=since)


class Producer:
    """kafkatest's VerifiableProducer: values "0", "1", ... at `throughput` per second (keys cycling through
    "0".."repeating_keys-1" when given, else none), up to `max_messages` (forever when None)."""

    def __init__(self, bootstrap: str, topic: str, throughput: int, acks: str, max_messages: int | None = None,
                 repeating_keys: int | None = None) -> None:
        from confluent_kafka import Producer as Client
        self.client = Client({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "retries": 10})
        self.topic, self.throughput, self.max, self.keys = topic, throughput, max_messages, repeating_keys
        self.acked = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{topic}", daemon=True)

    def _delivered(self, err, _msg) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        started, sent = time.monotonic(), 0
        while not self._stop.is_set() and (self.max is None or sent < self.max):
            due = int((time.monotonic() - started) * self.throughput) + 1
            while sent < due and (self.max is None or sent < self.max):
                key = None if self.keys is None else str(sent % self.keys).encode()
                try:
                    self.client.produce(self.topic, str(sent).encode(), key, on_delivery=self._delivered)
                except BufferError:
                    break
                sent += 1
            self.client.poll(0.01)
        self.client.flush(60)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)


SMOKE_CLASS = "org.apache.kafka.streams.tests.StreamsSmokeTest"


def smoke_properties(bootstrap: str, guarantee: str, protocol: str, state_dir: Path) -> str:
    """streams.py's StreamsSmokeTestBaseService.prop_file, with one broker's replication factor."""
    props = {"bootstrap.servers": bootstrap, "processing.guarantee": guarantee, "num.stream.threads": 3,
             "replication.factor": 1, "num.standby.replicas": 2, "buffered.records.per.partition": 100,
             "commit.interval.ms": 1000, "auto.offset.reset": "earliest", "acks": "all",
             "acceptable.recovery.lag": 9223372036854775807, "session.timeout.ms": 10000,
             "state.dir": state_dir, "group.protocol": protocol}
    return "".join(f"{k}={v}\n" for k, v in props.items())


def props_file(path: Path, props: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def sink_count(bootstrap: str, topic: str, want: int, timeout: float) -> int:
    """How many records `topic` holds (its partitions' high watermarks; no transactions here), once it holds
    `want` or at `timeout`."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stream-broker-resilience-verify-consumer"})
    try:
        deadline, count = time.monotonic() + timeout, 0
        while True:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            count = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
            if count >= want or time.monotonic() > deadline:
                return count
            time.sleep(0.5)
    finally:
        consumer.close()
