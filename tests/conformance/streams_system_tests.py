"""Kafka's ducktape streams tests besides the smoke test (see kafka_streams.py's docstring), each step and
verdict as in tests/kafkatest/tests/streams/<name>.py, against one broker."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from .streams_services import (
    SMOKE_CLASS,
    Java,
    Producer,
    Service,
    props_file,
    sink_count,
    smoke_properties,
    verify_processing,
    verify_running,
    verify_stopped,
)


def run_shutdown_deadlock(bootstrap: str, run_dir: Path, classpath: str) -> tuple[str, str]:
    from tests.support.streams import create_topics
    create_topics(bootstrap, {"source": 1})
    props = run_dir / "deadlock.properties"
    props.write_text(smoke_properties(bootstrap, "at_least_once", "classic", run_dir / "state"))
    driver = Java(classpath, run_dir, "driver", SMOKE_CLASS, str(props), "close-deadlock-test")
    try:
        driver.wait_for("StreamsTest instance started", 60)  # the service's start_node
        try:
            driver.proc.wait(60)  # driver.wait(timeout_sec=60)
        except subprocess.TimeoutExpired:
            return "FAIL", "the process did not exit within 60 s (deadlocked in close)"
    finally:
        driver.stop(crash=True)
    return "PASS", f"exited within 60 s (rc {driver.proc.returncode})"


RELATIONAL_CLASS = "org.apache.kafka.streams.tests.RelationalSmokeTest"
RELATIONAL_TOPICS = {"in-article": 3, "in-comment": 5, "out-augmented-article": 3, "out-augmented-comment": 5}


def run_relational(bootstrap: str, run_dir: Path, classpath: str, variation: str) -> tuple[str, str]:
    guarantee, crash_word, protocol, *patient = variation.split("/")
    crash = crash_word == "crash"
    # ducktape waits 60 s for the driver's first augmented record, but the 4.3 driver sends its 11,000
    # records one by one (send, flush, sleep 5 ms) before it reads any: over 60 s on Kafka too. `patient`
    # waits for that line until the driver's ten-minute verification would end instead
    first_output_wait = 60 if not patient else 900
    from tests.support.streams import create_topics
    create_topics(bootstrap, RELATIONAL_TOPICS)
    started: list[Java] = []

    def java(name: str, *args: str) -> Java:
        started.append(Java(classpath, run_dir, name, RELATIONAL_CLASS, *args))
        return started[-1]

    def application(n: int) -> Java:
        state = run_dir / f"state{n}"
        state.mkdir(exist_ok=True)
        return java(f"processor{n}", "application", bootstrap, f"processor{n}", guarantee, protocol, str(state))

    try:
        processor1, processor2 = application(1), application(2)
        processor1.wait_for("Streams has started", 60, in_log=True)
        processor2.wait_for("Streams has started", 60, in_log=True)
        driver = java("driver", "driver", bootstrap, "ignored", "ignored")
        # wait for at least one output of stream processing before injecting failures
        driver.wait_for("Consumed first Augmented", first_output_wait, in_log=True)
        processor1.stop(crash=crash)
        processor3 = application(3)
        processor3.wait_for("Streams has started", 60, in_log=True)
        processor2.stop(crash=crash)
        early = "Smoke test complete" in driver.logged()  # ducktape only logs this
        driver.proc.wait(1440)
        out = driver.logged()
    finally:
        for p in started:
            p.stop(crash=True)
    if "Smoke test complete: passed" in out:
        return "PASS", "Smoke test complete: passed" + (" (before the scenario was complete)" if early else "")
    failed = [line for line in out.splitlines() if "failed" in line.lower() or "Exception" in line]
    return "FAIL", "; ".join(failed[:3]) or f"the driver did not pass (rc {driver.proc.returncode})"


NAMED_REPARTITION_CLASS = "org.apache.kafka.streams.tests.StreamsNamedRepartitionTest"


def run_named_repartition(bootstrap: str, run_dir: Path, classpath: str, protocol: str) -> tuple[str, str]:
    """streams_named_repartition_topic_test.py: a rolling upgrade that adds operations before a named
    repartition topic keeps the application running."""
    from tests.support.streams import create_topics
    create_topics(bootstrap, {"inputTopic": 6, "aggregationTopic": 6})
    add_ops = {"value": "false"}

    def service(n: int) -> Service:
        def args() -> list[str]:
            props = props_file(run_dir / f"processor{n}.properties", {
                "state.dir": run_dir / f"state{n}", "bootstrap.servers": bootstrap, "input.topic": "inputTopic",
                "aggregation.topic": "aggregationTopic", "add.operations": add_ops["value"],
                "acceptable.recovery.lag": 9223372036854775807, "session.timeout.ms": 10000,
                "group.protocol": protocol})
            return [NAMED_REPARTITION_CLASS, str(props)]
        return Service(classpath, run_dir, f"processor{n}", args)

    processors = [service(n) for n in (1, 2, 3)]
    producer = Producer(bootstrap, "inputTopic", throughput=1000, acks="1")
    stopped = "NAMED_REPARTITION_TEST Streams Stopped"
    try:
        producer.start()
        for processor in processors:
            verify_running(processor, "REBALANCING -> RUNNING")
        verify_processing(processors, "AGGREGATED")
        add_ops["value"] = "true"  # each restarted processor adds operations before the repartition topic
        for processor in processors:
            verify_stopped(processor, stopped)
            verify_running(processor, "UPDATED Topology")
        verify_processing(processors, "AGGREGATED")
        for processor in processors:
            verify_stopped(processor, stopped)
    finally:
        producer.stop()
        for processor in processors:
            processor.stop(clean=False)
    return "PASS", "upgraded with a named repartition topic; every processor aggregated before and after"


STATIC_MEMBER_CLASS = "org.apache.kafka.streams.tests.StaticMemberTestClient"
GENERATION = re.compile(r"Successfully joined group with generation Generation\{generationId=(-?\d+),")


def run_static_membership(bootstrap: str, run_dir: Path, classpath: str) -> tuple[str, str]:
    """streams_static_membership_test.py: three rolling bounces of three static members (3 threads each)
    bump no generation."""
    from tests.support.streams import create_topics
    create_topics(bootstrap, {"inputTopic": 18})
    threads, bounces = 3, 3

    def service(instance: str) -> Service:
        def args() -> list[str]:
            props = props_file(run_dir / f"{instance}.properties", {
                "state.dir": run_dir / f"state-{instance}", "bootstrap.servers": bootstrap,
                "num.stream.threads": threads, "group.instance.id": instance, "session.timeout.ms": 60000,
                "input.topic": "inputTopic", "acceptable.recovery.lag": 9223372036854775807})
            return [STATIC_MEMBER_CLASS, str(props)]
        return Service(classpath, run_dir, instance, args)

    processors = [service(i) for i in ("consumer-A", "consumer-B", "consumer-C")]
    producer = Producer(bootstrap, "inputTopic", throughput=1000, acks="1")
    stopped, running = "Static membership test closed", "REBALANCING -> RUNNING"
    try:
        producer.start()
        for processor in processors:
            verify_running(processor, running)
        verify_processing(processors, "PROCESSED")
        for _ in range(bounces):
            for processor in processors:
                verify_stopped(processor, stopped)
                verify_running(processor, running)
        stable = None
        for processor in processors:
            # ducktape greps the client's log (ConsumerCoordinator's INFO line); slf4j-simple writes it to stderr
            log = (run_dir / f"{processor.name}.stderr").read_text(errors="replace")
            generations = [int(g) for g in GENERATION.findall(log)]
            assert len(generations) >= bounces * threads, \
                f"{processor.name}: fewer than {bounces * threads} generation messages ({len(generations)})"
            for generation in generations[-bounces * threads:]:
                stable = generation if stable is None else stable
                assert generation == stable, f"rolling bounce bumped the generation to {generation} ({stable})"
        verify_processing(processors, "PROCESSED")
        for processor in processors:
            verify_stopped(processor, stopped)
    finally:
        producer.stop()
        for processor in processors:
            processor.stop(clean=False)
    return "PASS", f"{bounces} rolling bounces, every member's last {bounces * threads} joins at generation {stable}"


STANDBY_CLASS = "org.apache.kafka.streams.tests.StreamsStandByReplicaTest"
# LegacyCheckpointingStateStore logs its checkpoints at DEBUG (ducktape runs the clients at DEBUG)
CHECKPOINT_DEBUG = "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.streams.state.internals.LegacyCheckpointingStateStore=debug"


def checkpoint_regressions(log: str) -> tuple[int, list[str]]:
    """validateMonotonicCheckpointsCmd: per changelog partition, the checkpointed offsets never decrease.
    (how many checkpointed offsets were read, the regressions)"""
    pairs = []
    for line in log.splitlines():
        if "Assigning and seeking" in line or "Writing checkpoint" in line:
            found = re.search(r"\{(.*)\}", line)
            for item in (found.group(1).split(", ") if found else []):
                if "=" in item:
                    key, value = item.split("=", 1)
                    pairs.append((key, int(value)))
    errors, last = [], {}
    for key, value in sorted(pairs, key=lambda kv: kv[0]):  # stable: keeps each key's order
        if key in last and value < last[key]:
            errors.append(f"ERROR: {key} offset regressed from {last[key]} to {value}.")
        else:
            last[key] = value
    return len(pairs), errors


def run_standby(bootstrap: str, run_dir: Path, classpath: str, protocol: str) -> tuple[str, str]:
    """streams_standby_replica_test.py: three instances (one standby replica of 6 tasks) started and stopped
    in turns, each move checked on every instance's ACTIVE_TASKS/STANDBY_TASKS line; then all 300,000
    records in both sinks and no checkpoint offset going back."""
    from tests.support.streams import create_topics
    source, sink1, sink2, total = "standbyTaskSource1", "standbyTaskSink1", "standbyTaskSink2", 300000
    create_topics(bootstrap, {source: 6, sink1: 1, sink2: 1})
    configs = ("consumer.max.poll.interval.ms=50000,producer.retries=2,producer.request.timeout.ms=15000,"
               f"producer.max.block.ms=30000,sourceTopic={source},sinkTopic1={sink1},sinkTopic2={sink2},"
               "internal.task.assignor.class=org.apache.kafka.streams.processor.internals.assignment."
               f"LegacyStickyTaskAssignor,group.protocol={protocol}")

    def service(n: int) -> Service:
        def args() -> list[str]:
            # the 4.3 client no longer sets its application.id (the 2024 one hard-coded this one)
            props = props_file(run_dir / f"processor{n}.properties",
                               {"state.dir": run_dir / f"state{n}", "bootstrap.servers": bootstrap,
                                "application.id": "kafka-streams-standby-tasks"})
            return [STANDBY_CLASS, str(props), configs]
        return Service(classpath, run_dir, f"processor{n}", args, jvm=(CHECKPOINT_DEBUG,))

    p1, p2, p3 = processors = [service(n) for n in (1, 2, 3)]
    producer = Producer(bootstrap, source, throughput=15000, acks="all", max_messages=total, repeating_keys=6)

    def expect(processor: Service, tasks: str, num_lines: int = 1) -> None:
        """wait_for_verification: `grep -E tasks stdout | wc -l` reaches num_lines within 60 s"""
        deadline = time.monotonic() + 60
        while processor.count(tasks) < num_lines:
            assert time.monotonic() < deadline, f"{processor.name} did not print {tasks!r} {num_lines} time(s)"
            time.sleep(0.2)

    all6, half, third = "ACTIVE_TASKS:6 STANDBY_TASKS:0", "ACTIVE_TASKS:3 STANDBY_TASKS:3", \
        "ACTIVE_TASKS:2 STANDBY_TASKS:[1-3]"
    try:
        producer.start()
        p1.start()
        expect(p1, all6)
        p2.start()
        expect(p1, half), expect(p2, half)
        p3.start()
        expect(p1, third), expect(p2, third), expect(p3, third)
        p1.stop()
        expect(p2, half, 2), expect(p3, half)
        p2.stop()
        expect(p3, all6)
        p1.start()
        expect(p1, half), expect(p3, half, 2)
        p2.start()
        expect(p1, third), expect(p2, third), expect(p3, third, 2)
        p3.stop()
        expect(p1, half, 2), expect(p2, half)
        p1.stop()
        expect(p2, all6)
        p3.start()
        expect(p3, half), expect(p2, half, 2)
        p1.start()
        expect(p1, third), expect(p2, third, 2), expect(p3, third)
        for sink in (sink1, sink2):
            consumed = sink_count(bootstrap, sink, total, 60)
            assert consumed >= total, f"streams did not process messages in 60 seconds: {consumed} of {total} in {sink}"
        deadline = time.monotonic() + 60
        while producer.acked < total:
            assert time.monotonic() < deadline, f"Failed to send all {total} messages ({producer.acked})"
            time.sleep(0.2)
        for processor in processors:
            processor.stop()
    finally:
        producer.stop()
        for processor in processors:
            processor.stop(clean=False)
    checked, errors = 0, []
    for p in processors:
        pairs, regressions = checkpoint_regressions((run_dir / f"{p.name}.stderr").read_text(errors="replace"))
        checked, errors = checked + pairs, errors + regressions
    if errors:
        return "FAIL", "; ".join(errors[:3])
    # Kafka 4.3's stores keep their own offsets and no longer log checkpoints: say when there was nothing to check
    checkpoints = f"checkpoints monotonic ({checked} checked)" if checked else "no checkpoint lines to check"
    return "PASS", f"every rebalance as expected on every instance, all records in both sinks, {checkpoints}"


OPTIMIZED_CLASS = "org.apache.kafka.streams.tests.StreamsOptimizedTest"
RESETTER_CLASS = "org.apache.kafka.tools.StreamsResetter"


def run_optimized(bootstrap: str, run_dir: Path, classpath: str, protocol: str) -> tuple[str, str]:
    """streams_optimized_test.py: an application run unoptimized (4 repartition topics), stopped, reset with
    Kafka's application reset tool, and run again with topology.optimization=all (1 repartition topic)."""
    from tests.support.kafka import classpath as kafka_classpath
    from tests.support.streams import create_topics
    create_topics(bootstrap, {t: 6 for t in ("inputTopic", "aggregationTopic", "reduceTopic", "joinTopic")})
    optimization = {"value": "none"}

    def service(n: int) -> Service:
        def args() -> list[str]:
            props = props_file(run_dir / f"processor{n}.properties", {
                "state.dir": run_dir / f"state{n}", "bootstrap.servers": bootstrap,
                "topology.optimization": optimization["value"], "input.topic": "inputTopic",
                "aggregation.topic": "aggregationTopic", "reduce.topic": "reduceTopic", "join.topic": "joinTopic",
                "acceptable.recovery.lag": 9223372036854775807, "session.timeout.ms": 10000,
                "group.protocol": protocol})
            return [OPTIMIZED_CLASS, str(props)]
        return Service(classpath, run_dir, f"processor{n}", args)

    def running_with(processor: Service, repartition_topics: int) -> None:
        since = processor.mark()
        processor.start()
        processor.wait_for(f"REBALANCING -> RUNNING with REPARTITION TOPIC COUNT={repartition_topics}", 120, since)

    def processed(processor: Service, pattern: str) -> None:
        """`grep --max-count 1 pattern stdout` succeeds within 60 s"""
        deadline = time.monotonic() + 60
        while processor.count(pattern) == 0:
            assert time.monotonic() < deadline, f"{processor.name} printed no {pattern!r} within 60 s"
            time.sleep(0.2)

    processors = [service(n) for n in (1, 2, 3)]
    producer = Producer(bootstrap, "inputTopic", throughput=1000, acks="1")
    stopped = "OPTIMIZE_TEST Streams Stopped"
    try:
        producer.start()
        for processor in processors:
            running_with(processor, 4)
        for processor in processors:
            processed(processor, "AGGREGATED|REDUCED|JOINED")
        for processor in processors:
            verify_stopped(processor, stopped)
        resetter = Java(kafka_classpath(), run_dir, "resetter", RESETTER_CLASS, "--bootstrap-server", bootstrap,
                        "--force", "--application-id", "StreamsOptimizedTest", "--input-topics", "inputTopic")
        try:
            resetter.wait_for("Done.", 60)
        finally:
            resetter.stop()
        for processor in processors:  # ducktape moves each instance's files aside (.1) before the second run
            for suffix in ("stdout", "stderr"):
                path = run_dir / f"{processor.name}.{suffix}"
                path.rename(path.with_name(path.name + ".1"))
        optimization["value"] = "all"
        for processor in processors:
            running_with(processor, 1)
        for processor in processors:
            for operation in ("AGGREGATED", "REDUCED", "JOINED"):
                processed(processor, operation)
        for processor in processors:
            verify_stopped(processor, stopped)
    finally:
        producer.stop()
        for processor in processors:
            processor.stop(clean=False)
    return "PASS", "4 repartition topics unoptimized, reset, 1 optimized; every operation processed on every instance"


RESILIENCE_CLASS = "org.apache.kafka.streams.tests.StreamsBrokerDownResilienceTest"
# BaseStreamsTest.get_configs: the producer gives up within (retries + 1) * request timeout = 45 s
RESILIENCE_CONFIGS = ("consumer.max.poll.interval.ms=50000,producer.retries=2,producer.request.timeout.ms=15000,"
                      "producer.max.block.ms=30000")
BROKER_DOWN_SECONDS = 70  # the test's downtime: over twice the clients' retries × timeout


def produce_consume(bootstrap: str, source: str, sink: str, what: str, timeout: float, n: int = 5) -> None:
    """BaseStreamsTest.assert_produce_consume: `n` records into `source` acknowledged, then `n` records read
    from `sink` by a consumer of the verifier's group (VerifiableConsumer: committing what it reads)."""
    from confluent_kafka import Consumer
    producer = Producer(bootstrap, source, throughput=1000, acks="all", max_messages=n)
    producer.start()
    deadline = time.monotonic() + timeout
    while producer.acked < n:
        assert time.monotonic() < deadline, f"At {what} failed to send messages ({producer.acked} of {n})"
        time.sleep(0.2)
    producer.stop()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test_group_id",
                         "client.id": "streams-broker-resilience-verify-consumer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([sink])
        consumed, deadline = 0, time.monotonic() + timeout
        while consumed < n:
            assert time.monotonic() < deadline, \
                f"At {what} streams did not process messages in {timeout:.0f} seconds ({consumed} of {n})"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                consumed += 1
                consumer.commit(msg, asynchronous=False)
    finally:
        consumer.close()


def run_broker_down(server, run_dir: Path, classpath: str, protocol: str) -> tuple[str, str]:
    """streams_broker_down_resilience_test.py test_streams_resilient_to_broker_down: records flow, the broker
    goes down for 70 s (here: groupd killed -9, restarted on its data dir and port), the application finds
    its group coordinator again and records flow again."""
    from tests.support.streams import create_topics
    source, sink = "streamsResilienceSource", "streamsResilienceSink"
    create_topics(server.bootstrap, {source: 3, sink: 1})

    def args() -> list[str]:
        props = props_file(run_dir / "processor.properties",
                           {"state.dir": run_dir / "state", "bootstrap.servers": server.bootstrap})
        return [RESILIENCE_CLASS, str(props), f"{RESILIENCE_CONFIGS},group.protocol={protocol}"]

    processor = Service(classpath, run_dir, "processor", args)
    try:
        processor.start()
        produce_consume(server.bootstrap, source, sink, "before_broker_stop", 60)
        server.kill()
        time.sleep(BROKER_DOWN_SECONDS)  # the scenario's downtime, not a wait for a client
        log = run_dir / "processor.stderr"
        since = len(log.read_text(errors="replace"))
        server.start()
        deadline = time.monotonic() + 120
        while "Discovered group coordinator" not in log.read_text(errors="replace")[since:]:
            assert time.monotonic() < deadline, "Never saw output 'Discovered group coordinator'"
            time.sleep(0.2)
        produce_consume(server.bootstrap, source, sink, "after_broker_stop", 120)
    finally:
        processor.stop(clean=False)
    return "PASS", f"records flowed before and after {BROKER_DOWN_SECONDS} s with groupd down (killed -9, restarted)"
