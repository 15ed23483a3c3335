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

`shutdown_deadlock` is streams_shutdown_deadlock_test.py: StreamsSmokeTest's `close-deadlock-test` starts an
application on a one-partition `source` topic whose uncaught-exception handler closes the instance from a
stream thread; the process must exit within 60 s (it takes its own properties: classic group protocol only).

`relational` is streams_relational_smoke_test.py: RelationalSmokeTest's driver produces articles and comments
for one minute and then reads the joined output for up to ten minutes; two applications start, the first is
stopped (or killed -9 with `crash`) once the driver has read augmented output, a third starts, the second is
stopped too. The verdict is the driver's `Smoke test complete: passed`. Subtests:
`<guarantee>/<crash|clean>/<classic|streams>[/patient]` (Kafka 4 has only exactly_once_v2 of the test's
guarantees; `patient`: see run_relational).

`named_repartition` (streams_named_repartition_topic_test.py), `static_membership`
(streams_static_membership_test.py) and `standby` (streams_standby_replica_test.py) run three instances of
their client against a producer at the ducktape rate and check what those tests check: aggregation before and
after a rolling topology upgrade; no generation bump over three rolling bounces of static members; the exact
ACTIVE_TASKS/STANDBY_TASKS lines after each of eleven starts and stops, all 300,000 records in both sinks, and
checkpoint offsets that never decrease (with 4.3's stores, which keep their own offsets, the legacy checkpoint
lines that check reads are no longer logged, so that last part finds nothing to check, on Kafka as here).
`optimized` (streams_optimized_test.py) runs three instances unoptimized (4 repartition topics), resets the
application with Kafka 4.3.1's StreamsResetter, and runs them with topology.optimization=all (1).
`broker_down` is streams_broker_down_resilience_test.py's first test: five records through the application,
groupd killed -9 for 70 s and restarted on its data dir and port, the application finds its coordinator again
and five more records go through.
Subtests name the group protocol where the client reads it from its properties. The broker bounce test, the
other broker-down tests and the EOS test are not wired (FINDINGS.md).

The waits are on the lines the ducktape tests wait for, in stdout or (for what the clients log through
slf4j, which ducktape reads from its log4j file) stderr.

Timers as in Kafka's services: session.timeout.ms 10 s for classic members; for streams groups the same
10 s through groupd's group.streams.session.timeout.ms (Kafka's default minimum, 45 s, would only make a
crash variation wait longer).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.support.streams import VERSION, lib_dir

from .common import Entry, Result, install_once, logs_dir, safe_name, start_groupd, stop_groupd, tail
from .streams_services import SMOKE_CLASS, Java, smoke_properties
from .streams_system_tests import (
    run_broker_down,
    run_named_repartition,
    run_optimized,
    run_relational,
    run_shutdown_deadlock,
    run_standby,
    run_static_membership,
)

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


def ensure_built(say=print) -> tuple[str, float]:
    """The classpath: Kafka Streams with its test jar and the clients' (installed by .ci/install-streams on
    first use, cached afterwards)."""
    started = time.monotonic()
    lib = Path(lib_dir(VERSION))
    install_once("install-streams", lib / f"kafka-streams-{VERSION}-test.jar", {"STREAMS_VERSION": VERSION}, say,
                 f"kafka-streams: installing Kafka Streams {VERSION} with its test jar into {lib}")
    return os.pathsep.join(sorted(str(p) for p in lib.glob("*.jar"))), time.monotonic() - started


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

# GROUPD_STREAMS_BROKER=kafka runs an entry against Apache Kafka 4.3.1 (tests/support/kafka.py) instead, to
# tell a groupd difference from a test's own limits; its log is kept as groupd.log all the same.
KAFKA_STREAMS_SETTINGS = {"group.coordinator.rebalance.protocols": "classic,consumer,streams",
                          "group.streams.min.session.timeout.ms": "2000", "group.streams.session.timeout.ms": "10000",
                          "group.streams.initial.rebalance.delay.ms": "0"}


# streams_standby_replica_test.py wants one standby replica of each task; a streams group takes that number
# from the broker (a group config), never from the client's num.standby.replicas, and both default to 0
TARGET_SETTINGS = {"standby": {"group.streams.num.standby.replicas": "1"}}


def start_broker(target: str):
    extra = TARGET_SETTINGS.get(target, {})
    if os.environ.get("GROUPD_STREAMS_BROKER") != "kafka":
        return start_groupd((*SETTINGS, *(f"{k}={v}" for k, v in extra.items())))
    import tempfile

    from tests.support.kafka import KafkaBroker
    data_dir = tempfile.mkdtemp(prefix="kafka-conformance-")
    return KafkaBroker(data_dir, {**KAFKA_STREAMS_SETTINGS, **extra}).start(), data_dir


def stop_broker(server, data_dir: str, keep_log: Path) -> None:
    if os.environ.get("GROUPD_STREAMS_BROKER") != "kafka":
        return stop_groupd(server, data_dir, keep_log=keep_log)
    import shutil
    server.stop()
    shutil.copy(server.log_path, keep_log)
    shutil.rmtree(data_dir, ignore_errors=True)


def run_entry(entry: Entry, run_dir: Path | None = None) -> Result:
    run_dir = (run_dir or logs_dir(entry.suite)) / safe_name(entry.id)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    server, data_dir = start_broker(entry.target)
    try:
        classpath, _ = ensure_built()
        if entry.target == "smoke":
            status, detail = run_smoke(server.bootstrap, run_dir, classpath, entry.subtests or "")
        elif entry.target == "shutdown_deadlock":
            status, detail = run_shutdown_deadlock(server.bootstrap, run_dir, classpath)
        elif entry.target == "named_repartition":
            status, detail = run_named_repartition(server.bootstrap, run_dir, classpath, entry.subtests or "")
        elif entry.target == "static_membership":
            status, detail = run_static_membership(server.bootstrap, run_dir, classpath)
        elif entry.target == "standby":
            status, detail = run_standby(server.bootstrap, run_dir, classpath, entry.subtests or "")
        elif entry.target == "broker_down":
            status, detail = run_broker_down(server, run_dir, classpath, entry.subtests or "")
        elif entry.target == "optimized":
            status, detail = run_optimized(server.bootstrap, run_dir, classpath, entry.subtests or "")
        elif entry.target == "relational":
            status, detail = run_relational(server.bootstrap, run_dir, classpath, entry.subtests or "")
        else:
            raise ValueError(f"unknown Kafka Streams system test {entry.target!r}")
    except (AssertionError, subprocess.TimeoutExpired) as e:  # a verdict, or a driver that never ended
        status, detail = "FAIL", str(e)
    finally:
        stop_broker(server, data_dir, keep_log=run_dir / "groupd.log")
    log = run_dir / "driver.stdout"
    if status == "FAIL":
        detail += "\n" + "\n".join(f"--- {p.name}\n{tail(p, 1500)}" for p in sorted(run_dir.glob("*.stdout")))
    return Result(entry, status, time.monotonic() - started, detail, str(log))
