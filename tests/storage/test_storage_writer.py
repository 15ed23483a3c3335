"""`groupd.coordinator.runtime.log_writer.LogWriter` and `storage.log.PartitionLog` appends, without a server:
group commit (everything appended in one loop turn is one batch; one fsync covers every batch
written before it started), the error mapping of
spec §10.3 (storage error → NOT_COORDINATOR, timeout → COORDINATOR_NOT_AVAILABLE), and a failed
append leaving nothing behind in the segment.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest

from groupd.coordinator.runtime.log_workers import LogWorkers
from groupd.coordinator.runtime.log_writer import LogWriter
from groupd.protocol import ErrorCode
from groupd.storage.log import PartitionLog, list_segments, partition_dir
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record
from groupd.storage.scanner import scan


def rec(n: int) -> Record:
    return Record(OffsetCommitKey("g", "t", n), OffsetCommitValue(n, -1, "", 1))


def batches_on_disk(data_dir: str, p: int = 0) -> list[list[int]]:
    """The offsets of every batch of partition `p`, per batch."""
    out = []
    for _, path in list_segments(partition_dir(data_dir, p)):
        with open(path, "rb") as f:
            found = scan(f.read())
        assert found.tail is None and not found.damage
        out += [[r.offset for r in b.batch] for b in found.batches]
    return out


def append(writer: LogWriter, records: list[Record]) -> asyncio.Future:
    """The first answer the writer gives for `records`: COORDINATOR_NOT_AVAILABLE when it times
    out, else its completion (None or the mapped error)."""
    fut = asyncio.get_running_loop().create_future()

    def answer(error):
        if not fut.done():
            fut.set_result(error)

    writer.append(records, answer, lambda: answer(ErrorCode.coordinator_not_available))
    return fut


@pytest.fixture
def plog(tmp_path):
    log = PartitionLog(str(tmp_path), 0, 1 << 20)
    log.load(lambda record: None)
    yield log
    log.close()


@pytest.fixture
def executor():
    workers = LogWorkers(2)
    yield workers
    workers.shutdown()


def count_calls(plog, name: str, calls: list, before=None) -> None:
    """Record each call of `plog.<name>` in `calls` (after `before()`, when given)."""
    original = getattr(plog, name)

    def counted(*args):
        if before is not None:
            before()
        calls.append((name, *args))
        return original(*args)

    setattr(plog, name, counted)


async def test_appends_of_one_loop_turn_are_one_batch(plog, executor, tmp_path):
    calls = []
    count_calls(plog, "write", calls)
    count_calls(plog, "fsync_active", calls)
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000)
    results = await asyncio.gather(append(writer, [rec(0)]), append(writer, [rec(1), rec(2)]), append(writer, [rec(3)]))
    assert results == [None, None, None]
    assert [(c[0], *c[2:]) for c in calls] == [("write", 4), ("fsync_active",)]
    assert batches_on_disk(str(tmp_path)) == [[0, 1, 2, 3]]


async def test_appends_while_an_fsync_is_in_flight_form_the_next_batch_and_wait_for_the_next_fsync(
        plog, executor, tmp_path):
    gate, calls = threading.Event(), []
    count_calls(plog, "fsync_active", calls, before=lambda: gate.wait(5))
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000)
    first = append(writer, [rec(0)])
    await asyncio.sleep(0.05)  # the first batch is written, its fsync is under way
    later = [append(writer, [rec(n)]) for n in (1, 2, 3)]
    await asyncio.sleep(0.05)
    assert batches_on_disk(str(tmp_path)) == [[0], [1, 2, 3]], "written on the loop while the fsync runs"
    assert not any(f.done() for f in (first, *later)), "no answer before the fsync"
    gate.set()
    assert await asyncio.gather(first, *later) == [None] * 4
    assert len(calls) == 2


async def test_the_log_end_readers_see_moves_once_a_batch_is_durable(plog, executor):
    """Fetch and ListOffsets of __consumer_offsets read up to `end_offset`: never records that a
    failed fsync could still cut."""
    gate = threading.Event()
    count_calls(plog, "fsync_active", [], before=lambda: gate.wait(5))
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000)
    first = append(writer, [rec(0), rec(1)])
    await asyncio.sleep(0.05)
    assert (plog.next_offset, writer.end_offset) == (2, 0), "written, not yet durable"
    gate.set()
    assert await first is None
    assert writer.end_offset == 2


async def test_interval_mode_answers_once_written_without_fsync(plog, executor, tmp_path):
    calls = []
    count_calls(plog, "fsync_active", calls)
    writer = LogWriter(plog, executor, fsync_each_batch=False, timeout_ms=5000)
    assert await asyncio.gather(append(writer, [rec(0)]), append(writer, [rec(1)])) == [None, None]
    assert calls == []
    assert batches_on_disk(str(tmp_path)) == [[0, 1]]


async def test_a_batch_that_rolls_the_segment_is_written_after_the_fsync_in_flight(tmp_path, executor):
    plog = PartitionLog(str(tmp_path), 0, segment_bytes=300)
    plog.load(lambda record: None)
    gate = threading.Event()
    count_calls(plog, "fsync_active", [], before=lambda: gate.wait(5))
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000)
    try:
        first = append(writer, [rec(0), rec(1), rec(2)])
        await asyncio.sleep(0.05)
        rolling = append(writer, [rec(3), rec(4), rec(5)])  # over 300 bytes with the first: a new segment
        await asyncio.sleep(0.05)
        assert len(plog.segments) == 1, "no roll while the fsync of the active segment runs"
        gate.set()
        assert await asyncio.gather(first, rolling) == [None, None]
        assert [base for base, _ in plog.segments] == [0, 3]
        assert batches_on_disk(str(tmp_path)) == [[0, 1, 2], [3, 4, 5]]
    finally:
        gate.set()
        plog.close()


async def test_storage_error_is_not_coordinator_and_leaves_nothing_behind(plog, executor, tmp_path):
    errors = []
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000,
                       on_error=lambda p, reason: errors.append((p, reason)))
    assert await append(writer, [rec(0)]) is None

    class FullDisk:
        """The segment file accepts 10 bytes of the batch, then reports ENOSPC."""

        def __init__(self, f):
            self.f, self.budget = f, 10

        def write(self, data):
            if self.budget == 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            n = self.f.write(bytes(data[:self.budget]))
            self.budget -= n
            return n

        def __getattr__(self, name):
            return getattr(self.f, name)

    segment = plog._active
    plog._active = FullDisk(segment)
    assert await append(writer, [rec(1), rec(2)]) is ErrorCode.not_coordinator
    assert errors == [(plog.partition, "failed")]  # groupd_log_write_errors_total
    plog._active = segment
    assert batches_on_disk(str(tmp_path)) == [[0]], "the partial batch was cut off"
    assert await append(writer, [rec(3)]) is None
    # the failed batch's offsets are reused: the log has no gap and no duplicate
    assert batches_on_disk(str(tmp_path)) == [[0], [1]]


async def test_write_slower_than_the_commit_timeout_is_coordinator_not_available(plog, executor):
    gate = threading.Event()
    count_calls(plog, "fsync_active", [], before=lambda: gate.wait(5))
    errors = []
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=50,
                       on_error=lambda p, reason: errors.append((p, reason)))
    try:
        assert await asyncio.wait_for(append(writer, [rec(0)]), 5) is ErrorCode.coordinator_not_available
        assert errors == [(plog.partition, "timed_out")]
    finally:
        gate.set()
    idle = writer.idle()
    if idle is not None:
        await asyncio.wait_for(idle, 5)


async def test_write_that_lands_after_its_timeout_is_timed_out_then_completed(plog, executor, tmp_path):
    """The request is answered COORDINATOR_NOT_AVAILABLE, but the log gets the records: the writer
    then reports the write complete, so the runner keeps them applied (as after a restart)."""
    gate = threading.Event()
    count_calls(plog, "fsync_active", [], before=lambda: gate.wait(5))
    loop = asyncio.get_running_loop()
    timed_out, completed = loop.create_future(), loop.create_future()
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=50)
    writer.append([rec(0), rec(1)], completed.set_result, lambda: timed_out.set_result(True))
    await asyncio.wait_for(timed_out, 5)
    assert not completed.done()
    gate.set()
    assert await asyncio.wait_for(completed, 5) is None
    assert batches_on_disk(str(tmp_path)) == [[0, 1]]


async def test_failed_fsync_fails_every_batch_written_after_the_last_durable_one(plog, executor, tmp_path):
    """The runner applied the later records on top of the failed ones, so they fail with them; the
    segment is cut back to the first batch that is not durable, and its offsets are reused."""
    gate, failed = threading.Event(), []

    def failing_first():
        gate.wait(5)
        if not failed:
            failed.append(True)
            raise OSError(errno.EIO, "I/O error")

    count_calls(plog, "fsync_active", [], before=failing_first)
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000)
    first = append(writer, [rec(0)])
    await asyncio.sleep(0.05)  # the first batch is written, its fsync in flight
    queued = append(writer, [rec(1)])
    await asyncio.sleep(0.05)
    assert batches_on_disk(str(tmp_path)) == [[0], [1]]
    gate.set()
    assert await asyncio.wait_for(first, 5) is ErrorCode.not_coordinator
    assert await asyncio.wait_for(queued, 5) is ErrorCode.not_coordinator
    assert await asyncio.wait_for(append(writer, [rec(2)]), 5) is None
    assert batches_on_disk(str(tmp_path)) == [[0]]


async def test_a_request_that_cannot_be_encoded_fails_alone(plog, executor, tmp_path):
    """A group id over 32,767 bytes: its request gets RECORD_LIST_TOO_LARGE (each API maps it); the
    request appended beside it in the same loop turn is written."""
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000)
    too_long = Record(OffsetCommitKey("g" * 40_000, "t", 0), OffsetCommitValue(1, -1, "", 1))
    results = await asyncio.gather(append(writer, [rec(0)]), append(writer, [too_long]), append(writer, [rec(1)]))
    assert results == [None, ErrorCode.record_list_too_large, None]
    assert batches_on_disk(str(tmp_path)) == [[0, 1]]


async def test_a_request_over_message_max_bytes_fails_alone(plog, executor, tmp_path):
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000, max_message_bytes=1000)
    big = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "m" * 2000, 1))
    results = await asyncio.gather(append(writer, [big]), append(writer, [rec(1)]))
    assert results == [ErrorCode.record_list_too_large, None]
    assert batches_on_disk(str(tmp_path)) == [[0]]


async def test_closed_writer_answers_not_coordinator(plog, executor):
    writer = LogWriter(plog, executor, fsync_each_batch=True, timeout_ms=5000)
    writer.closed = True
    assert await append(writer, [rec(0)]) is ErrorCode.not_coordinator


def test_segments_roll_at_segment_bytes_and_offsets_continue_across_a_reload(tmp_path):
    log = PartitionLog(str(tmp_path), 0, segment_bytes=400)
    log.load(lambda record: None)
    for n in range(10):
        log.append([rec(n)], fsync=False)
    log.close()
    segments = list_segments(partition_dir(str(tmp_path), 0))
    assert len(segments) > 2
    assert all(os.path.getsize(path) <= 400 for _, path in segments)
    assert [base for base, _ in segments] == sorted(base for base, _ in segments)
    assert [o for b in batches_on_disk(str(tmp_path)) for o in b] == list(range(10))
    loaded = []
    again = PartitionLog(str(tmp_path), 0, segment_bytes=400)
    result = again.load(loaded.append)
    assert (result.records, again.next_offset, result.truncated) == (10, 10, None)
    assert loaded == [rec(n) for n in range(10)]
    again.append([rec(10)], fsync=True)
    again.close()
    assert batches_on_disk(str(tmp_path))[-1] == [10]
