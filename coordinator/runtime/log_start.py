"""DeleteRecords on the disk records plane: a partition's new log start is saved to its checkpoint file
(`log-start-offset-checkpoint`, fsynced, on a `LogWorkers` thread) before it takes effect and before
the request is answered, so an answered deletion survives kill -9. One save at a time per partition;
the requests that arrive meanwhile share the next one (the highest offset asked: the start only moves
up). A failed save answers KAFKA_STORAGE_ERROR and changes nothing.

Kafka moves the start in memory at once and checkpoints it every
`log.flush.start.offset.checkpoint.interval.ms`; with one replica here, waiting for the save is what
makes the answer mean "deleted" across a crash.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from groupd.protocol import ErrorCode
from groupd.storage.records_plane.segments import DataLog

from .log_workers import LogWorkers

log = logging.getLogger("groupd")


class LogStartWriter:
    def __init__(self, dlog: DataLog, workers: LogWorkers, rolling: Callable[[], bool],
                 remove: Callable[[list[str]], None]) -> None:
        self.dlog = dlog
        self._workers = workers
        self._rolling = rolling  # a roll or a clean runs off the loop: the segment list must not change then
        self._remove = remove  # removes the files of dropped segments off the loop
        self._waiting: list[tuple[int, asyncio.Future]] = []
        self._saving = False
        self.released = False  # the partition was let go (another leader): answer NOT_LEADER_OR_FOLLOWER

    @property
    def saving(self) -> bool:
        """A save runs: no roll for retention starts meanwhile (its deletion would race the save's)."""
        return self._saving

    def move_to(self, offset: int) -> asyncio.Future:
        """A future of the error (ErrorCode.none once `offset`, or more, is the durable log start)."""
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((offset, done))
        if not self._saving:
            self._save()
        return done

    def _save(self) -> None:
        group, self._waiting = self._waiting, []
        target = max(offset for offset, _ in group)
        if target <= self.dlog.log_start:
            self._answer(group, ErrorCode.none)
            return
        self._saving = True
        self._workers.run(lambda: self.dlog.save_log_start(target), lambda error: self._saved(error, target, group))

    def _saved(self, error: BaseException | None, target: int, group: list) -> None:
        self._saving = False
        if error is not None:
            log.error("log start not saved partition=%s log_start=%d error=%s", self.dlog.name, target, error)
            self._answer(group, ErrorCode.kafka_storage_error)
        elif self.released:
            self._answer(group, ErrorCode.not_leader_or_follower)
        else:
            before = self.dlog.log_start
            self.dlog.start_checkpoint = max(self.dlog.start_checkpoint, target)
            dropped = [] if self._rolling() else self.dlog.advance_log_start(target)
            if dropped:  # else the next retention check removes them
                self._remove(dropped)
            log.info("log start moved partition=%s from=%d to=%d segments_deleted=%d reason=delete-records",
                     self.dlog.name, before, self.dlog.log_start, len(dropped))
            self._answer(group, ErrorCode.none)
        if self._waiting and self.released:
            self._answer(self._waiting, ErrorCode.not_leader_or_follower)
            self._waiting = []
        elif self._waiting:
            self._save()

    @staticmethod
    def _answer(group: list, error: ErrorCode) -> None:
        for _, done in group:
            if not done.done():
                done.set_result(error)
