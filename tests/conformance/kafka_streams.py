"""Kafka Streams' own system tests against groupd: the clients Apache Kafka's ducktape suite drives
(`org.apache.kafka.streams.tests.*` in the `kafka-streams` test jar of Maven Central, fetched by
`.ci/install-streams`), run here as Kafka's tests/kafkatest/tests/streams/*.py run them, with groupd as the
cluster.

`smoke` is streams_smoke_test.py: StreamsSmokeTest's driver (`run`) produces 20 keys × up to 1,000
values over 90 s into `data` and then verifies every output topic of the processors' topology
(windowed and suppressed aggregations, joins, counts; with exactly_once_v2 also that every
transaction finished); three processors (`process`, 3 threads, 2 standbys) run one after the other, each
stopped (or killed -9 with `crash`) once it has processed records, so every task moves twice with its
state. The verdict is the driver's: SUCCESS (with at_least_once and a crash, duplicates are allowed:
PROCESSED-MORE-THAN-GENERATED). An entry's subtests name the variation: `<guarantee>/<crash|clean>/
<classic|streams>` (the group protocol the processors use; with `streams` groupd assigns the tasks).

Timers as in Kafka's services: session.timeout.ms 10 s for classic members; for streams groups the same
10 s through groupd's group.streams.session.timeout.ms (Kafka's default minimum, 45 s, would only make a
crash variation wait longer).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.kafka import TEST_JVM
from tests.support.streams import VERSION, lib_dir

from .common import Entry, Result, logs_dir, safe_name, start_groupd, stop_groupd, tail

SETTINGS = (
    "records.plane=disk",
    "auto.create.topics.enable=false",
    "group.streams.min.session.timeout.ms=2000",
    "group.streams.session.timeout.ms=10000",
    "group.streams.initial.rebalance.delay.ms=0",
)
# the topics the 4.3 driver and processors name (5 partitions each, as streams_smoke_test.py creates them)
SMOKE_TOPICS = ("echo", "data", "min", "min-suppressed", "min-raw", "max", "sum", "sws-raw", "sws-suppressed", "dif",
                "cnt", "avg", "tagg", "uwin-cnt", "uwin-max", "uwin-min", "win-sum", "fk")
SMOKE_CLASS = "org.apache.kafka.streams.tests.StreamsSmokeTest"


def ensure_built(say=print) -> tuple[str, float]:
    """The classpath: Kafka Streams with its test jar and the clients' (installed by .ci/install-streams on
    first use, cached afterwards)."""
    started = time.monotonic()
    lib = Path(lib_dir(VERSION))
    needed = lib / f"kafka-streams-{VERSION}-test.jar"
    if not needed.exists():
        say(f"kafka-streams: installing Kafka Streams {VERSION} with its test jar into {lib}")
        script = Path(__file__).resolve().parents[2] / ".ci" / "install-streams"
        out = subprocess.run([str(script)], env={**os.environ, "STREAMS_VERSION": VERSION}, capture_output=True,
                             text=True, stdin=subprocess.DEVNULL)
        if out.returncode != 0 or not needed.exists():
            raise RuntimeError(f"install-streams failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return os.pathsep.join(sorted(str(p) for p in lib.glob("*.jar"))), time.monotonic() - started


class Java:
    """One of the test's JVMs, its stdout (the events the ducktape test watches) in a file of its own."""

    def __init__(self, classpath: str, run_dir: Path, name: str, *args: str) -> None:
        self.name = name
        self.out = run_dir / f"{name}.stdout"
        self.err = run_dir / f"{name}.stderr"
        cmd = ["java", "-Xmx512m", *TEST_JVM[1:], "-cp", classpath, *args]
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(cmd, cwd=run_dir, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if self.proc.poll() is not None:
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


def smoke_properties(bootstrap: str, guarantee: str, protocol: str, state_dir: Path) -> str:
    """streams.py's StreamsSmokeTestBaseService.prop_file, with one broker's replication factor."""
    props = {"bootstrap.servers": bootstrap, "processing.guarantee": guarantee, "num.stream.threads": 3,
             "replication.factor": 1, "num.standby.replicas": 2, "buffered.records.per.partition": 100,
             "commit.interval.ms": 1000, "auto.offset.reset": "earliest", "acks": "all",
             "acceptable.recovery.lag": 9223372036854775807, "session.timeout.ms": 10000,
             "state.dir": state_dir, "group.protocol": protocol}
    return "".join(f"{k}={v}\n" for k, v in props.items())


def run_smoke(bootstrap: str, run_dir: Path, classpath: str, variation: str) -> tuple[str, str]:
    guarantee, crash_word, protocol = variation.split("/")
    crash = crash_word == "crash"
    from tests.support.streams import create_topics
    create_topics(bootstrap, {t: 5 for t in SMOKE_TOPICS})
    props = run_dir / "smoke.properties"
    props.write_text(smoke_properties(bootstrap, guarantee, protocol, run_dir / "state"))
    started: list[Java] = []

    def java(name: str, command: str) -> Java:
        started.append(Java(classpath, run_dir, name, SMOKE_CLASS, str(props), command))
        return started[-1]

    def not_verified_yet(driver: Java) -> None:
        assert "Result Verification" not in driver.text(), "the driver finished before the processors' bounces"

    try:
        driver = None
        for n in (1, 2, 3):
            processor = java(f"processor{n}", "process")
            processor.wait_for("REBALANCING -> RUNNING", 180)
            if driver is None:
                driver = java("driver", "run")
            processor.wait_for("processed", 90)
            not_verified_yet(driver)
            if n < 3:
                processor.stop(crash=crash)
        driver.proc.wait(600)
        out = driver.text()
        for p in started:
            p.stop()
    finally:
        for p in started:
            p.stop(crash=True)
    if "SUCCESS" in out:
        return "PASS", "SUCCESS"
    if crash and guarantee == "at_least_once" and "PROCESSED-MORE-THAN-GENERATED" in out:
        return "PASS", "PROCESSED-MORE-THAN-GENERATED (duplicates: allowed with at_least_once and a crash)"
    failed = [line for line in out.splitlines() if "FAIL" in line or "LESS" in line or "EXCEPTION" in line]
    return "FAIL", "; ".join(failed[:3]) or f"the driver printed no SUCCESS (rc {driver.proc.returncode})"


def run_entry(entry: Entry, run_dir: Path | None = None) -> Result:
    run_dir = (run_dir or logs_dir(entry.suite)) / safe_name(entry.id)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    server, data_dir = start_groupd(SETTINGS)
    try:
        classpath, _ = ensure_built()
        if entry.target != "smoke":
            raise ValueError(f"unknown Kafka Streams system test {entry.target!r}")
        status, detail = run_smoke(server.bootstrap, run_dir, classpath, entry.subtests or "")
    except AssertionError as e:
        status, detail = "FAIL", str(e)
    finally:
        stop_groupd(server, data_dir, keep_log=run_dir / "groupd.log")
    log = run_dir / "driver.stdout"
    if status == "FAIL":
        detail += "\n" + "\n".join(f"--- {p.name}\n{tail(p, 1500)}" for p in sorted(run_dir.glob("*.stdout")))
    return Result(entry, status, time.monotonic() - started, detail, str(log))
