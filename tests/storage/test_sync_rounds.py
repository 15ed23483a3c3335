"""`coordinator.runtime.sync_rounds.SyncRounds`: the fsyncs of every offsets partition written in one
loop turn are one round (one `syncfs` from SYNCFS_FROM logs on, else an fsync of each on the workers
at once), at most one round is in flight, and a failed round fails exactly the appends it covered,
each partition cut back to its last durable batch, with nothing else changed.
"""

from __future__ import annotations

import asyncio
import errno
import threading

import pytest

from groupd.coordinator.runtime import sync_rounds
from groupd.coordinator.runtime.log_workers import LogWorkers
from groupd.coordinator.runtime.log_writer import LogWriter
from groupd.coordinator.runtime.sync_rounds import SyncRounds
from groupd.protocol import ErrorCode
from groupd.storage import syncfs
from groupd.storage.log import PartitionLog
from tests.storage.test_storage_writer import append, batches_on_disk, rec

PARTITIONS = 4


class Calls:
    """Counts the syncs of each log (`fsync_active`, `sync_file_system`), each after `before()`."""

    def __init__(self, logs: list[PartitionLog], before=None) -> None:
        self.seen: list[tuple[str, int]] = []
        self.before = before
        for plog in logs:
            for name in ("fsync_active", "sync_file_system"):
                self._wrap(plog, name)

    def _wrap(self, plog: PartitionLog, name: str) -> None:
        original = getattr(plog, name)

        def counted():
            self.seen.append((name, plog.partition))
            if self.before is not None:
                self.before(name, plog.partition)
            return original()

        setattr(plog, name, counted)


@pytest.fixture
def logs(tmp_path):
    out = []
    for p in range(PARTITIONS):
        plog = PartitionLog(str(tmp_path), p, 1 << 20)
        plog.load(lambda record: None)
        out.append(plog)
    yield out
    for plog in out:
        plog.close()


@pytest.fixture
def workers():
    w = LogWorkers(PARTITIONS)
    yield w
    w.shutdown()


def writers_for(logs, rounds: SyncRounds, workers: LogWorkers) -> list[LogWriter]:
    return [LogWriter(plog, workers, fsync_each_batch=True, timeout_ms=5000, syncs=rounds) for plog in logs]


async def test_partitions_written_in_one_loop_turn_share_one_syncfs(logs, workers, tmp_path, monkeypatch):
    assert syncfs.available(), "Linux 5.8 or later: syncfs reports write-back errors"
    calls = Calls(logs)
    rounds = SyncRounds(workers, use_syncfs=True)
    writers = writers_for(logs, rounds, workers)
    results = await asyncio.gather(*(append(w, [rec(p)]) for p, w in enumerate(writers)))
    assert results == [None] * PARTITIONS
    assert rounds.rounds == 1
    assert [name for name, _ in calls.seen] == ["sync_file_system"]
    assert [batches_on_disk(str(tmp_path), p) for p in range(PARTITIONS)] == [[[0]]] * PARTITIONS


async def test_a_small_round_fsyncs_each_log(logs, workers, monkeypatch):
    calls = Calls(logs)
    rounds = SyncRounds(workers, use_syncfs=True)
    writers = writers_for(logs, rounds, workers)
    assert sync_rounds.SYNCFS_FROM > 2
    assert await asyncio.gather(append(writers[0], [rec(0)]), append(writers[1], [rec(1)])) == [None, None]
    assert rounds.rounds == 1
    assert sorted(calls.seen) == [("fsync_active", 0), ("fsync_active", 1)]


async def test_appends_during_a_round_wait_for_the_next_one(logs, workers, tmp_path):
    """One round in flight: a partition that writes while another's sync runs joins the next
    round, as batches of one partition do (nothing is acknowledged before a sync that began after
    it was written)."""
    gate = threading.Event()
    calls = Calls(logs, before=lambda name, p: gate.wait(5))
    rounds = SyncRounds(workers)
    writers = writers_for(logs, rounds, workers)
    first = append(writers[0], [rec(0)])
    await asyncio.sleep(0.05)  # written; its round is in flight
    later = [append(writers[p], [rec(p)]) for p in (0, 1, 2)]
    await asyncio.sleep(0.05)
    assert rounds.rounds == 1 and not any(f.done() for f in (first, *later))
    assert batches_on_disk(str(tmp_path), 0) == [[0], [1]], "written on the loop while the round runs"
    gate.set()
    assert await asyncio.gather(first, *later) == [None] * 4
    assert rounds.rounds == 2
    assert sorted(calls.seen) == [("fsync_active", 0), ("fsync_active", 0), ("fsync_active", 1), ("fsync_active", 2)]


@pytest.mark.parametrize("use_syncfs", [True, False])
async def test_a_failed_round_fails_the_appends_it_covered_and_cuts_each_partition_back(
        logs, workers, tmp_path, monkeypatch, use_syncfs):
    """syncfs cannot say which file it failed to write: every partition of the round fails and is cut
    back; with an fsync of each, only the partition whose fsync failed. Later appends succeed and
    reuse the failed offsets."""
    assert syncfs.available()
    monkeypatch.setattr(sync_rounds, "SYNCFS_FROM", 2)
    armed, failed = threading.Event(), []

    def fail_once(name, p):
        if armed.is_set() and not failed and (name == "sync_file_system" or p == 1):
            failed.append(name)
            raise OSError(errno.EIO, "Input/output error")

    Calls(logs, before=fail_once)
    writers = writers_for(logs, SyncRounds(workers, use_syncfs=use_syncfs), workers)
    for p, w in enumerate(writers):  # one durable batch each
        assert await append(w, [rec(p)]) is None
    armed.set()
    results = await asyncio.gather(*(append(w, [rec(10 + p)]) for p, w in enumerate(writers)))
    lost = set(range(PARTITIONS)) if use_syncfs else {1}
    assert results == [ErrorCode.not_coordinator if p in lost else None for p in range(PARTITIONS)]
    assert [w.end_offset for w in writers] == [1 if p in lost else 2 for p in range(PARTITIONS)]
    assert [batches_on_disk(str(tmp_path), p) for p in range(PARTITIONS)] == [
        [[0]] if p in lost else [[0], [1]] for p in range(PARTITIONS)]
    results = await asyncio.gather(*(append(w, [rec(20 + p)]) for p, w in enumerate(writers)))
    assert results == [None] * PARTITIONS
    assert [w.end_offset for w in writers] == [2 if p in lost else 3 for p in range(PARTITIONS)]
