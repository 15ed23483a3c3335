"""The CI part of the conformance suites: librdkafka's test-runner (in the classic and in the
KIP-848 consumer group protocol, and its share-consumer tests), kafka-python's integration tests,
franz-go's kgo tests, Sarama's functional tests, the Java client through Kafka's verifiable producer
and consumer, and Kafka Streams' system tests (the `ci` tier of tests/conformance/*.allowlist) against groupd.

Every test must give exactly the result its allowlist line expects: a PASS that starts failing
is a regression, and a FAIL that starts passing means the allowlist (and FINDINGS.md) must be
updated. A test expected to FAIL needs a FINDINGS.md entry saying which Kafka behaviour groupd
chose not to copy or which groupd gap it hits. No xfail: these are real clients.

The first run builds librdkafka (≈ 2 min on 2 cores) and the kafka-python venv (≈ 15 s) into
~/.cache/groupd-conformance, and franz-go's test binary (≈ 3 min, .ci/install-franz-go) into
~/.cache/groupd-clients, as Sarama's (≈ 1 min, .ci/install-sarama); the Java suite uses the Kafka
jars .ci/install-kafka installs. Later runs reuse them. `make conformance-full` runs the full tier.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys

import pytest

from . import common, franz_go, java_verifiable, kafka_python, kafka_streams, librdkafka, sarama
from .common import finding_problem, read_allowlist, read_findings, select, tail
from .report import SUITES

pytestmark = pytest.mark.clients

# how many librdkafka test-runner runs at a time (CONFORMANCE_WIDTH=1: one after the other)
LIBRDKAFKA_WIDTH = int(os.environ.get("CONFORMANCE_WIDTH", "2"))
# librdkafka's three runs: the classic protocol, the consumer (KIP-848) protocol, the share consumer
LIBRDKAFKA = [e for suite in librdkafka.GROUP_PROTOCOL for e in select(read_allowlist(suite), "ci")]
KAFKA_PYTHON = select(read_allowlist("kafka-python"), "ci")
FRANZ_GO = select(read_allowlist("franz-go"), "ci")
SARAMA = select(read_allowlist("sarama"), "ci")
JAVA_VERIFIABLE = select(read_allowlist("java-verifiable"), "ci")
KAFKA_STREAMS = select(read_allowlist("kafka-streams"), "ci")
# Kafka Streams' runs at a time: each is a driver and one processor JVM at a time, mostly waiting on the
# driver's 90 s of production
KAFKA_STREAMS_WIDTH = 2


def test_every_expected_failure_is_explained():
    findings = read_findings()
    problems = [p for suite in SUITES for e in read_allowlist(suite) if (p := finding_problem(e, findings))]
    assert not problems, "\n".join(problems)


def test_log_pruning_keeps_the_directories_of_runs_still_going(tmp_path, monkeypatch):
    """Runs overlap (helpers, CI jobs): pruning the oldest must not delete a directory whose run
    still writes its tests' logs there, or that run's verdicts fail on missing files."""
    monkeypatch.setattr(common, "LOGS_ROOT", tmp_path)
    monkeypatch.setattr(common, "_run_logs", None)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    live = tmp_path / f"20000101-000000-{os.getppid()}"
    dead = tmp_path / f"20000101-000001-{gone.stdout.strip()}"
    for d in (live, dead):
        d.mkdir()
    for n in range(common.KEEP_RUNS):
        (tmp_path / f"20990101-00000{n}-1").mkdir()
    common.logs_dir("librdkafka")
    assert live.exists() and not dead.exists()


def expect(entry, result) -> None:
    """The run's result is the one its allowlist line expects (the log's tail says why not)."""
    assert result.status == entry.expect, (
        f"{entry.suite} {entry.id}: {result.status} ({result.detail}), allowlist expects {entry.expect}; "
        f"log {result.log}\n{tail(result.log)}")


def installed(runner, what: str):
    """`runner.ensure_built()`'s result, or the test fails saying what could not be set up and why (a
    toolchain or a registry missing)."""
    try:
        return runner.ensure_built()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"cannot set up {what}: {e}")


class Ahead:
    """Runs the entries of the tests selected in this session `width` at a time, in their order, from the
    first test on: the test of one entry waits for its own result while the next ones already run. Each
    run has its own groupd and random topic names, and mostly waits on its own clients' timers
    (max.poll.interval.ms, session timeouts), so runs side by side do not meet; the verdict of each is
    asserted by its own test."""

    def __init__(self, entries: list, run, width: int) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=width, thread_name_prefix="conformance")
        self.futures = {entry: self.pool.submit(run, entry) for entry in entries}

    def result(self, entry):
        return self.futures.pop(entry).result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)  # a run under way ends within its timeout


def selected(request, test) -> list:
    """The `entry` parameters of the items of `test` this session runs, in order."""
    return [item.callspec.params["entry"] for item in request.session.items
            if getattr(item, "originalname", None) == test.__name__ and hasattr(item, "callspec")]


@pytest.fixture(scope="module")
def librdkafka_runs(request):
    installed(librdkafka, "librdkafka's test-runner")
    for suite in librdkafka.GROUP_PROTOCOL:
        librdkafka.logs_dir(suite)  # created before the runs' threads start
    runs = Ahead(selected(request, test_librdkafka), librdkafka.run_entry, LIBRDKAFKA_WIDTH)
    yield runs
    runs.close()


@pytest.mark.timeout(900)  # the first test also waits for the build
@pytest.mark.parametrize("entry", LIBRDKAFKA, ids=[f"{e.suite}:{e.id}" for e in LIBRDKAFKA])
def test_librdkafka(entry, librdkafka_runs):
    result = librdkafka_runs.result(entry)
    expect(entry, result)


@pytest.fixture(scope="module")
def kafka_python_results():
    try:
        kafka_python.ensure_env()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"cannot set up kafka-python's suite: {e}")
    return {r.entry.id: r for r in kafka_python.run_entries(KAFKA_PYTHON)}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("entry", KAFKA_PYTHON, ids=[e.id for e in KAFKA_PYTHON])
def test_kafka_python(entry, kafka_python_results):
    result = kafka_python_results[entry.id]
    expect(entry, result)


@pytest.fixture(scope="module")
def franz_go_binary():
    return installed(franz_go, "franz-go's kgo tests")[0]


@pytest.mark.timeout(900)  # the first test also waits for the build
@pytest.mark.parametrize("entry", FRANZ_GO, ids=[e.id for e in FRANZ_GO])
def test_franz_go(entry, franz_go_binary):
    result = franz_go.run_entry(entry)
    expect(entry, result)


@pytest.fixture(scope="module")
def sarama_binary():
    return installed(sarama, "Sarama's functional tests")[0]


@pytest.mark.timeout(900)  # the first test also waits for the build
@pytest.mark.parametrize("entry", SARAMA, ids=[e.id for e in SARAMA])
def test_sarama(entry, sarama_binary):
    result = sarama.run_entry(entry)
    expect(entry, result)


@pytest.fixture(scope="module")
def kafka_jars():
    installed(java_verifiable, "Apache Kafka's jars")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("entry", JAVA_VERIFIABLE, ids=[e.id for e in JAVA_VERIFIABLE])
def test_java_verifiable(entry, kafka_jars):
    result = java_verifiable.run_entry(entry)
    expect(entry, result)


@pytest.fixture(scope="module")
def kafka_streams_runs(request):
    installed(kafka_streams, "Kafka Streams' test jars")
    runs = Ahead(selected(request, test_kafka_streams), kafka_streams.run_entry, KAFKA_STREAMS_WIDTH)
    yield runs
    runs.close()


@pytest.mark.timeout(1800)  # the second run waits for its turn beside the first
@pytest.mark.parametrize("entry", KAFKA_STREAMS, ids=[e.id for e in KAFKA_STREAMS])
def test_kafka_streams(entry, kafka_streams_runs):
    result = kafka_streams_runs.result(entry)
    expect(entry, result)
