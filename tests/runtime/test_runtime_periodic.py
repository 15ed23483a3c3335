"""Periodic work (expiry, compaction, fsync) survives its own exception: it logs, at most once a
minute per task, and runs again (issue 10 item 8). A GroupCoordinator on a real event loop, no
server."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from groupd.coordinator.core.outcome import Effect
from groupd.coordinator.runtime import coordinator as runtime
from groupd.coordinator.runtime import housekeeping, partitions
from groupd.coordinator.runtime.coordinator import GroupCoordinator
from groupd.coordinator.settings import Settings
from tests.support.process import wait_for


@pytest.fixture
async def coordinator(tmp_path):
    started = []

    def start(*overrides: str) -> GroupCoordinator:
        settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "offsets.topic.num.partitions=1",
                                                          *overrides])
        groups = GroupCoordinator(settings)
        groups.start()
        started.append(groups)
        return groups

    yield start
    for groups in started:
        await groups.close()


def failing_first(calls: list, result=None, failures: int = 1):
    def fn(*args):
        calls.append(args)
        if len(calls) <= failures:
            raise OSError("disk gone")
        return result
    return fn


async def test_compaction_check_that_raises_runs_again(coordinator, monkeypatch, caplog):
    calls = []
    monkeypatch.setattr(housekeeping, "closed_bytes", failing_first(calls, 0))
    coordinator("log.cleaner.backoff.ms=20")
    with caplog.at_level(logging.ERROR, "groupd"):
        await wait_for(lambda: len(calls) >= 3)
    assert "periodic task failed task=compact" in caplog.text


async def test_expiry_that_raises_runs_again(coordinator, caplog):
    groups = coordinator("offsets.retention.check.interval.ms=20")
    calls = []
    groups.shards[0].expire = failing_first(calls, failures=2)
    with caplog.at_level(logging.ERROR, "groupd"):
        await wait_for(lambda: len(calls) >= 4)
    assert "periodic task failed task=expire partition=0" in caplog.text


async def test_fsync_that_keeps_failing_keeps_running_and_logs_once_a_minute(coordinator, caplog):
    groups = coordinator("log.flush.interval.ms=20")
    await wait_for(lambda: groups.writers[0] is not None)
    calls = []
    groups.writers[0].plog.sync = failing_first(calls, failures=1_000)
    with caplog.at_level(logging.ERROR, "groupd"):
        await wait_for(lambda: len(calls) >= 3)
    assert caplog.text.count("periodic task failed task=fsync") == 1
    del groups.writers[0].plog.sync  # the disk is back for the final close


@pytest.mark.parametrize("weight", [0, runtime.OFFLOAD_WEIGHT])
async def test_an_effect_runs_after_the_request_and_its_result_or_error_comes_back_on_the_loop(coordinator, weight):
    """A light effect on a later loop turn, a heavy one in a worker thread (a regex resolution over a
    big catalog); either way `completed` runs on the loop's thread."""
    groups = coordinator()
    done = []

    def completed(result, error):
        done.append((result, type(error).__name__ if error else None, threading.current_thread()))

    def fail():
        raise ValueError("bad")

    groups.submit(Effect(("test", "ok"), lambda: 42, None, weight), completed)
    groups.submit(Effect(("test", "fail"), fail, None, weight), completed)
    assert done == []  # never within the request that asked for it
    await wait_for(lambda: len(done) == 2)
    assert [(r, e) for r, e, _ in done] == [(42, None), (None, "ValueError")]
    assert {t for _, _, t in done} == {threading.current_thread()}
async def test_a_long_load_reports_progress_then_one_final_line(coordinator, monkeypatch, caplog):
    import threading

    release = threading.Event()
    load = GroupCoordinator._load

    def slow_partition_2(self, p, *shard_and_ownership):
        if p == 2:
            release.wait(30)  # until the test has seen progress reported
        return load(self, p, *shard_and_ownership)

    monkeypatch.setattr(partitions, "LOAD_PROGRESS_S", 0.05)
    monkeypatch.setattr(GroupCoordinator, "_load", slow_partition_2)
    with caplog.at_level(logging.INFO, "groupd"):
        groups = coordinator("offsets.topic.num.partitions=3")
        await wait_for(lambda: caplog.text.count("offsets log loading partitions=2/3 ") >= 2)
        release.set()
        await wait_for(lambda: "offsets log loaded" in caplog.text)
    assert "load-progress" not in groups._tasks  # no progress line can follow the final one
    assert "offsets log loaded partitions=3 active=3 failed=0 groups=0 bytes=0 records=0 records_per_s=" in caplog.text


async def test_compaction_runs_in_a_process_of_its_own(tmp_path, coordinator, caplog):
    from groupd.storage.log import PartitionLog
    from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record

    plog = PartitionLog(str(tmp_path), 0, 1024)  # small segments: every rewrite of the key closes some
    plog.load(lambda record: None)
    for i in range(200):
        plog.append([Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(i, -1, "", 1))], fsync=False)
    plog.close()
    with caplog.at_level(logging.INFO, "groupd"):
        groups = coordinator("log.cleaner.backoff.ms=20")
        await wait_for(lambda: "compacted partition=0" in caplog.text)
    assert groups._compactor.submit(os.getpid).result() != os.getpid()
    assert groups.shards[0].offsets["g"][("t", 0)].offset == 199


def test_a_compaction_process_dies_with_its_server(tmp_path):
    """A `kill -9` of the server must not leave its cleaner running beside the next server's."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "server.py"
    script.write_text(
        "import multiprocessing, os, sys\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from groupd.storage.compaction import die_with_parent\n"
        "if __name__ == '__main__':\n"
        "    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'), initializer=die_with_parent)\n"
        "    print(pool.submit(os.getpid).result(), flush=True)\n"
        "    os.kill(os.getpid(), 9)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    server = subprocess.Popen([sys.executable, str(script)], cwd=root, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": root})
    child = int(server.stdout.readline())
    assert server.wait(timeout=60) == -signal.SIGKILL

    def running() -> bool:
        try:
            with open(f"/proc/{child}/status") as f:
                return "zombie" not in f.read()
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 30
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    if running():
        os.kill(child, signal.SIGKILL)
        pytest.fail("the compaction process outlived its server")
