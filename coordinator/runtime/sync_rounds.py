"""Sync rounds: the fsyncs of every offsets partition that wrote in a loop turn, as one round, with
one hand-off to the workers and one back to the loop, and at most one round in flight.

A log writer (log_writer.py) asks for a sync once it has written a batch and has no sync in flight;
the requests of one loop turn form a round. While a round runs, new requests wait for the next one,
which starts as the running one ends (Kafka 4.2's adaptive `group.coordinator.append.linger.ms=-1`:
flush when the queue drains, so a slow disk makes rounds bigger, never more frequent). A round
fsyncs each log on the workers at once, the last to finish waking the loop (the loop used to wake
once per partition). With `use_syncfs` (`log.flush.syncfs`, off by default) a round of
`SYNCFS_FROM` logs or more is one `syncfs` of their file system instead, where the kernel reports
write-back errors through it (storage/syncfs.py): less kernel CPU per round, but it also waits for
whatever else is dirty on that file system, so it pays only on a volume of the data dir's own.

Durability is each log's own fsync's: a request's batches were written before its round started, so
the round's sync covers them. A failed fsync fails the requests of its log; a failed syncfs those
of every log of the round (it cannot say which file it could not write); each writer cuts its
batches back as after any failed fsync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from groupd.storage import syncfs
from groupd.storage.log import PartitionLog

from .log_workers import LogWorkers

# below this many logs a round fsyncs each: one fdatasync costs less kernel CPU than one syncfs
SYNCFS_FROM = 3

Done = Callable[[BaseException | None], None]


class SyncRounds:
    def __init__(self, workers: LogWorkers, use_syncfs: bool = False) -> None:
        self._workers = workers
        self._syncfs = use_syncfs and syncfs.available()
        self._waiting: list[tuple[PartitionLog, Done]] = []
        self._scheduled = False
        self._running = False
        self.rounds = 0  # rounds started, for tests and the bench's syncs-per-commit figure

    def sync(self, plog: PartitionLog, done: Done) -> None:
        """Make what `plog` has written so far durable, then `done(None)` or `done(error)` on the loop."""
        self._waiting.append((plog, done))
        if not self._scheduled and not self._running:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start)  # gather the requests of this loop turn

    def _start(self) -> None:
        self._scheduled = False
        if self._running or not self._waiting:
            return
        members, self._waiting = self._waiting, []
        self._running = True
        self.rounds += 1
        if self._syncfs and len(members) >= SYNCFS_FROM:
            self._workers.run(members[0][0].sync_file_system,
                              lambda error: self._ended(members, [error] * len(members)))
        else:
            self._workers.run_all([plog.fsync_active for plog, _ in members],
                                  lambda errors: self._ended(members, errors))

    def _ended(self, members: list[tuple[PartitionLog, Done]], errors: list[BaseException | None]) -> None:
        self._running = False
        for (_, done), error in zip(members, errors):
            done(error)
        if self._waiting and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start)
