"""The disk records plane (`records.plane: disk`, the default): every data partition this node leads
is a `DataLog` (storage/records_plane/segments.py) with its `DataWriter` (group commit, fsync on the
`LogWorkers` threads), the idempotent producers' state, and the held fetches to wake.

Partitions with a directory are loaded before the node listens (`preload`, off the loop: Kafka
recovers its logs before it serves); a partition first used later is opened on the loop (it is new,
or small: a leader that changed under `--workers` loads a moved partition there). A Produce gets its
offsets at once; its answer waits for the write (acks=1) or durability (acks=all); a Fetch plans its
reads on the loop and reads the files on the node's answer thread (coordinator/apis/fetch_disk.py).
The high watermark is the durable end. Segments roll by size and by age (segment.ms, on the append
that finds the active one too old: `DataWriter`). Retention deletes whole segments of `delete` topics
(the active one too, after rolling an empty one, as Kafka does), and those wholly below a log start
that DeleteRecords moved (`log_start.py`: saved before it is answered);
`compact` topics' closed segments are compacted in a process of their own (`_maybe_clean`,
storage/records_plane/cleaner.py), as Kafka's log cleaner does (`topic_config`), never at or past the
last stable offset. Transactions (storage/records_plane/transactions.py): markers are appended by
`write_marker` (coordinator/runtime/txn_data.py), the last stable offset waits for open transactions and
for markers not yet durable, and a load rebuilds both from the batches and markers it scans.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from groupd.coordinator.core.partitioning import data_home
from groupd.coordinator.core.topic_configs import broker_defaults
from groupd.coordinator.system_clock import wall_ms
from groupd.protocol import ErrorCode
from groupd.storage.compaction import die_with_parent
from groupd.storage.files import remove_files
from groupd.storage.records_plane.batches import BatchError, split
from groupd.storage.records_plane.cleaner import compact_segments
from groupd.storage.records_plane.plane import Appended, refusal, transaction_refusal
from groupd.storage.records_plane.producers import Producers
from groupd.storage.records_plane.segments import DataLog, ScannedBatch
from groupd.storage.records_plane.traffic import Traffic
from groupd.storage.records_plane.transactions import COMMIT, marker_batch
from groupd.storage.records_plane.watchers import Watchers
from groupd.storage.topic_config import TopicConfig, effective

from .cleaner_process import died, spawn_pool
from .data_writer import DataWriter
from .log_start import LogStartWriter
from .log_workers import LogWorkers

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

log = logging.getLogger("groupd")

Key = tuple  # (topic id, partition)
DATA_WRITE_THREADS = 4
INLINE_LOAD_BYTES = 4 << 20  # a partition with more on disk is loaded off the loop
# A batch's size is checked against its topic's max.message.bytes only (refusal, as Kafka's
# LogValidator does): a topic may allow more than the broker's default. This only bounds the parse.
ANY_BATCH_SIZE = 2**31 - 1


class Unavailable(Exception):
    """A partition that cannot serve now: the error its requests get, and a message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error, self.message = error, message


def stored_bytes(directory: str) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(directory) if e.name.endswith(".log"))
    except FileNotFoundError:
        return 0


_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class DiskPartition:
    """One data partition: its log, writer and producers; what the APIs read of it."""

    def __init__(self, dlog: DataLog, writer: DataWriter, producers: Producers, starts: LogStartWriter) -> None:
        self.dlog, self.writer, self.producers, self.starts = dlog, writer, producers, starts
        self.synced = writer.written  # interval mode: the offset the last periodic fsync covered

    @property
    def log_start(self) -> int:
        return self.dlog.log_start

    @property
    def high_watermark(self) -> int:
        return self.writer.end_offset

    @property
    def size(self) -> int:
        return self.dlog.size

    @property
    def last_stable_offset(self) -> int:
        return self.producers.txns.stable_offset(self.writer.end_offset, self.dlog.log_start)


class DiskPlane(Watchers):
    DISK = True

    def __init__(self, settings, leads: Callable[[str, int], bool], topics: Callable[[], Iterable],
                 stamp: Callable[[str, int], int] = lambda _topic, _p: 0,
                 config: Callable[[str], Any] | None = None) -> None:
        self.settings = settings
        # a topic's effective configs (storage/topic_config.py TopicConfig: its own over the broker's)
        defaults = TopicConfig.of(effective({}, broker_defaults(settings)))
        self._config = config or (lambda _topic: defaults)
        self._leads = leads
        self._stamp = stamp  # cluster mode: the claim a data partition's leader writes its segments under
        self._topics = topics  # the catalog's topics (name, topic_id, partitions)
        self._parts: dict[Key, DiskPartition] = {}
        self._workers = LogWorkers(DATA_WRITE_THREADS, "groupd-data")
        self.traffic = Traffic()
        # progress, exposed at scrape time: segments retention removed, cleans done and the bytes they freed
        self.retention_segments_removed = self.compactions = self.compaction_reclaimed_bytes = 0
        super().__init__()
        self._flush_timer: asyncio.TimerHandle | None = None
        self._leaders_timer: asyncio.TimerHandle | None = None
        self.storage_errors = 0
        self._loading: set[Key] = set()
        self._failures: set[str] = set()
        self.closed = False
        # compaction: one partition at a time, in a process of its own (started at the first clean)
        self._cleaner: ProcessPoolExecutor | None = None
        self._clean_timer: asyncio.TimerHandle | None = None
        self._cleaning: Key | None = None
        self._clean_job: tuple[DiskPartition, asyncio.Future] | None = None  # the partition being cleaned
        self._cleaned_to: dict[Key, int] = {}  # where the last clean stopped: segments from there are dirty
        self._horizons: dict[Key, int] = {}  # the earliest delete horizon of a tombstone kept: clean again then

    # -- partitions ------------------------------------------------------------------------------

    def _new_log(self, topic, partition: int) -> DataLog:
        return DataLog(self.settings.data_dir, topic.name, partition, topic.topic_id,
                       self._config(topic.name).segment_bytes, self._stamp(topic.name, partition))

    @staticmethod
    def _load(dlog: DataLog) -> Producers:
        producers = Producers()

        def seen(b: ScannedBatch) -> None:
            if b.marker is not None:  # open transactions and aborted ranges come back with the markers
                producers.marker(b.producer_id, b.producer_epoch, b.marker[1], b.base_offset, b.marker[0] == COMMIT,
                                 b.max_timestamp)
            elif b.producer_id >= 0:
                producers.record(b.producer_id, b.producer_epoch, b.base_sequence, b.count, b.base_offset,
                                 b.max_timestamp, b.transactional, b.max_timestamp)

        result = dlog.load_batches(seen)
        producers.txns.trim_before(dlog.log_start)
        log.info("data partition loaded partition=%s log_start=%d log_end=%d bytes=%d segments=%d%s",
                 dlog.name, dlog.log_start, dlog.next_offset, result.bytes, len(dlog.segments),
                 f" truncated={result.truncated}" if result.truncated else "")
        return producers

    def _opened(self, key: Key, dlog: DataLog, producers: Producers) -> DiskPartition:
        part: DiskPartition

        def cut(offset: int) -> None:
            part.producers.forget_from(offset)

        def durable() -> None:
            self._wake(key)

        def failed(_name: str) -> None:
            self.storage_errors += 1

        def roll_policy() -> tuple[int, int]:
            config = self._config(dlog.topic)
            return config.max_segment_ms, config.segment_jitter_ms

        writer = DataWriter(dlog, self._workers, self.settings.log_flush_interval_ms == 0,
                            self.settings.offsets_commit_timeout_ms, cut, durable, failed, roll_policy)
        # a segment roll or a clean rewrites the segment list off the loop: deletions wait for the next check
        starts = LogStartWriter(dlog, self._workers, lambda: writer.rolling or self._cleaning == key,
                                self._remove_files)
        part = self._parts[key] = DiskPartition(dlog, writer, producers, starts)
        return part

    @staticmethod
    def _remove_files(paths: list[str]) -> None:
        asyncio.get_running_loop().run_in_executor(None, remove_files, paths)

    async def preload(self) -> None:
        """Load every partition with a directory in the data dir that this node leads, off the loop."""
        wanted = {}
        for topic in self._topics():
            for p in range(topic.partitions):
                wanted[f"{topic.name}-{p}"] = (topic, p)
        found = []
        for name in sorted(os.listdir(self.settings.data_dir)):
            if name in wanted and os.path.isdir(os.path.join(self.settings.data_dir, name)):
                topic, p = wanted[name]
                if self._leads(topic.name, p):
                    found.append((topic, p))
        loop = asyncio.get_running_loop()
        for topic, p in found:
            dlog = self._new_log(topic, p)
            try:
                producers = await loop.run_in_executor(None, self._load, dlog)
            except OSError as e:
                self._failed(dlog, e)  # once: the requests that open it again are not logged again
                continue
            self._opened((topic.topic_id, p), dlog, producers)
        self._arm_flush()
        self._check_leaders()
        self._arm_clean()

    def partition(self, topic, index: int) -> DiskPartition:
        """The partition, opened on first use: at once when its directory is new or small, else
        loaded off the loop (`Unavailable`, NOT_LEADER_OR_FOLLOWER, meanwhile: clients retry). Raises
        `Unavailable` with KAFKA_STORAGE_ERROR when it cannot be opened (logged once)."""
        key = (topic.topic_id, index)
        part = self._parts.get(key)
        if part is not None:
            return part
        if self.closed or key in self._loading:
            raise Unavailable(ErrorCode.not_leader_or_follower, "The partition's log is loading")
        self.forget_topics_except({t.topic_id for t in self._topics()})  # a deleted topic's logs close
        dlog = self._new_log(topic, index)
        if self._clean_job is not None and self._clean_job[0].dlog.directory == dlog.directory:
            # a deleted topic of the same name is still being cleaned there: its directory is replaced after
            raise Unavailable(ErrorCode.not_leader_or_follower, "The partition's log is loading")
        if stored_bytes(dlog.directory) > INLINE_LOAD_BYTES:
            self._loading.add(key)
            loop = asyncio.get_running_loop()
            loop.run_in_executor(None, self._load, dlog).add_done_callback(
                lambda f: self._loaded(key, dlog, f))
            raise Unavailable(ErrorCode.not_leader_or_follower, "The partition's log is loading")
        try:
            producers = self._load(dlog)
        except OSError as e:
            self._failed(dlog, e)
            raise Unavailable(ErrorCode.kafka_storage_error, "The partition's log cannot be opened") from None
        return self._opened(key, dlog, producers)

    def _loaded(self, key: Key, dlog: DataLog, f: asyncio.Future) -> None:
        self._loading.discard(key)
        if f.exception() is not None:
            self._failed(dlog, f.exception())
        elif self.closed or not self._leads(dlog.topic, dlog.partition) or key in self._parts:
            dlog.close()  # let go meanwhile: the next access loads it again
        else:
            self._opened(key, dlog, f.result())

    def _failed(self, dlog: DataLog, error: BaseException) -> None:
        if dlog.name not in self._failures:  # once per partition: clients retry
            self._failures.add(dlog.name)
            log.error("data partition not opened partition=%s: %s", dlog.name, error)

    def peek(self, key: Key) -> DiskPartition | None:
        return self._parts.get(key)

    def __len__(self) -> int:
        return len(self._parts)

    def partitions(self) -> list[tuple[Key, DiskPartition]]:
        return list(self._parts.items())

    def high_watermarks(self) -> list[tuple[Key, int]]:
        return [(key, part.high_watermark) for key, part in self._parts.items()]

    def forget_topics_except(self, live: set) -> None:
        for key in [k for k in self._parts if k[0] not in live]:
            part = self._parts.pop(key)
            part.writer.closed = part.starts.released = True
            part.dlog.close()

    # -- produce ---------------------------------------------------------------------------------

    def append(self, topic, index: int, records: bytes | None, produce_version: int, now_ms: int,
               acks: int, transactional_id: str | None = None,
               verify: Callable[[int, int], ErrorCode] | None = None) -> tuple[Appended, asyncio.Future | None]:
        """Validate and accept one partition's batches: the answer, and (acks ≠ 0) a future for when
        it may be sent (its result: None, or the error that replaces the answer's). `transactional_id`
        and `verify`: the request's, for transactional batches (plane.py `transaction_refusal`)."""
        answer, last = self._accept(topic, index, records, produce_version, now_ms, acks, transactional_id, verify)
        if last is None:
            return answer, None
        done = asyncio.get_running_loop().create_future()

        def finished(error: ErrorCode | None) -> None:
            if not done.done():
                done.set_result(error)

        last.done = finished
        return answer, done

    def append_then(self, topic, index: int, records: bytes | None, produce_version: int, now_ms: int, acks: int,
                    then: Callable[[ErrorCode | None], None], transactional_id: str | None = None,
                    verify: Callable[[int, int], ErrorCode] | None = None) -> tuple[Appended, bool]:
        """`append` for Produce's hot path: `then(None or the error)` is called on the loop when the answer
        may be sent instead of a future being made and resolved a loop turn later; the second value
        says whether it will be called (False: answer at once)."""
        answer, last = self._accept(topic, index, records, produce_version, now_ms, acks, transactional_id, verify)
        if last is None:
            return answer, False
        last.done = then
        return answer, True

    def _accept(self, topic, index: int, records: bytes | None, produce_version: int, now_ms: int, acks: int,
                transactional_id: str | None, verify: Callable[[int, int], ErrorCode] | None):
        """(the answer, the last write to wait for or None); the checks and the appends of `append`."""
        try:
            batches = split(records, produce_version, ANY_BATCH_SIZE)
        except BatchError as e:
            return Appended(e.error, message=e.message), None
        try:
            part = self.partition(topic, index)
        except Unavailable as e:
            return Appended(e.error, message=e.message), None
        config = self._config(topic.name)
        refused = transaction_refusal(batches, transactional_id, part.producers, verify) or \
            refusal(batches, f"{topic.name}-{index}", config, now_ms, part.log_start)
        if refused is not None:
            return refused, None
        writer, producers = part.writer, part.producers
        first = None
        last_written = None
        for batch in batches:
            try:
                duplicate_of = producers.check(batch)
            except BatchError as e:
                if first is None:
                    return Appended(e.error, message=e.message), None
                break
            if duplicate_of is None:
                last_written = writer.append(batch.data, batch.count, None, acks == -1)
                base = last_written.base
                if batch.producer_id >= 0:
                    producers.record(batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count,
                                     base, now_ms, batch.transactional, batch.max_timestamp)
            else:
                base = duplicate_of
            if first is None:
                first = base
        answer = Appended(ErrorCode.none, first, part.log_start, log_append_time=now_ms
                          if config.message_timestamp_type == "LogAppendTime" else -1,
                          records=sum(b.count for b in batches))
        return answer, None if acks == 0 else last_written

    # -- transaction markers ----------------------------------------------------------------------

    def write_marker(self, topic, index: int, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, now_ms: int) -> tuple[ErrorCode, str | None] | asyncio.Future:
        """Append the producer's COMMIT or ABORT marker (WriteTxnMarkers): (error, message) at once when
        it is refused, else a future of (error, message) once the marker is durable (a failed write:
        KAFKA_STORAGE_ERROR, and the cut back reopens the transaction)."""
        try:
            part = self.partition(topic, index)
        except Unavailable as e:
            return e.error, e.message
        refused = part.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if refused is not None:
            return refused
        data = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        item = part.writer.append(data, 1, None, True)
        part.producers.marker(producer_id, producer_epoch, coordinator_epoch, item.base, commit, now_ms)
        done = asyncio.get_running_loop().create_future()

        def finished(error: ErrorCode | None) -> None:
            if not done.done():
                done.set_result((ErrorCode.none, None) if error is None else
                                (error, "The marker could not be written (see the server's log)"))

        item.done = finished
        return done

    # -- delete records ---------------------------------------------------------------------------

    def delete_records(self, topic, index: int, offset: int) -> tuple[ErrorCode, int] | asyncio.Future:
        """DeleteRecords on one partition (Kafka's `UnifiedLog.maybeIncrementLogStartOffset`): -1 is the
        high watermark; beyond it, or below 0, OFFSET_OUT_OF_RANGE; at or below the log start nothing
        changes; else the log start moves to `offset` once saved (`LogStartWriter`). (error, low
        watermark), at once or as a future; the low watermark is -1 with an error."""
        try:
            part = self.partition(topic, index)
        except Unavailable as e:
            return e.error, -1
        if offset == -1:
            offset = part.high_watermark
        if offset < 0 or offset > part.high_watermark:
            return ErrorCode.offset_out_of_range, -1
        if offset <= part.log_start:
            return ErrorCode.none, part.log_start
        out = asyncio.get_running_loop().create_future()

        def saved(f: asyncio.Future) -> None:
            error = f.result()
            if not out.done():
                out.set_result((error, part.log_start if error is ErrorCode.none else -1))

        part.starts.move_to(offset).add_done_callback(saved)
        return out

    # -- leadership -----------------------------------------------------------------------------

    LEADERS_CHECK_S = 1.0

    def _check_leaders(self) -> None:
        """Close the partitions this node no longer leads (cluster mode: its home offsets partition
        moved): Produce and Fetch already refuse them (NOT_LEADER_OR_FOLLOWER); the writes in flight
        finish, the log is fsynced and closed, and the new leader loads the directory."""
        for key, part in list(self._parts.items()):
            if not self._leads(part.dlog.topic, part.dlog.partition):
                del self._parts[key]
                part.starts.released = True
                asyncio.get_running_loop().create_task(self._release(part))
        if not self.closed:
            self._leaders_timer = asyncio.get_running_loop().call_later(self.LEADERS_CHECK_S, self._check_leaders)

    async def release_home(self, home: int, fenced: bool) -> None:
        """Cluster mode: offsets partition `home` is being lost. Before its claim goes, the data
        partitions it is home to let go: a clean hand-over lets their writes in flight finish (the next
        leader loads them); `fenced` (this node may no longer lead) answers those writes
        NOT_LEADER_OR_FOLLOWER at once, since they may land after the next leader loaded."""
        partitions = self.settings.offsets_topic_num_partitions
        for key, part in list(self._parts.items()):
            if data_home(part.dlog.topic, part.dlog.partition, partitions) == home:
                del self._parts[key]
                part.starts.released = True
                if fenced:
                    part.writer.abandon(ErrorCode.not_leader_or_follower)
                await self._release(part)

    async def _release(self, part: DiskPartition) -> None:
        if self._clean_job is not None and self._clean_job[0] is part:  # the next leader loads it once cleaned
            await asyncio.wait([self._clean_job[1]])
        idle = part.writer.idle()
        if idle is not None:
            try:
                await asyncio.wait_for(idle, self.settings.offsets_commit_timeout_ms / 1000)
            except asyncio.TimeoutError:
                part.writer.abandon(ErrorCode.not_leader_or_follower)
        part.writer.closed = True
        await asyncio.get_running_loop().run_in_executor(None, part.dlog.close)
        log.info("data partition released partition=%s log_end=%d (no longer its leader)", part.dlog.name,
                 part.dlog.next_offset)

    # -- flush policy, retention, close ----------------------------------------------------------

    def _arm_flush(self) -> None:
        interval = self.settings.log_flush_interval_ms
        if interval > 0 and not self.closed:
            self._flush_timer = asyncio.get_running_loop().call_later(interval / 1000, self._flush_all)

    def _flush_all(self) -> None:
        """Interval mode: fsync every partition written since (the writes were answered already)."""
        for part in self._parts.values():
            if part.writer.written > part.synced:  # written since the last round
                part.synced = part.writer.written
                self._workers.run(part.writer.sync_now,
                                  lambda error, name=part.dlog.name: error and log.error(
                                      "fsync failed partition=%s: %s", name, error))
        self._arm_flush()

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the segments retention no longer keeps (files removed off the loop): topics whose
        cleanup.policy has `delete` only (Kafka's), not while a roll or a clean changes the partition's
        segment list (its turn comes at the next check). When the active segment goes too, an empty
        one is rolled first and the deletion follows the roll (Kafka's `deleteSegments`): the log start
        moves to the log end, which stays."""
        paths = []
        for key, part in self._parts.items():
            dlog = part.dlog
            config = self._config(dlog.topic)
            if not config.delete or key == self._cleaning or part.writer.rolling:
                continue
            expired = dlog.expired_segments(config.retention_bytes, config.retention_ms, now_ms, part.high_watermark)
            if expired and len(expired) == len(dlog.segments):
                if not part.starts.saving and part.writer.roll_empty(
                        lambda error, key=key, part=part: self._rolled_for_retention(key, part, now_ms, error)):
                    continue
                expired = expired[:-1]  # the writer is busy: the active segment waits for the next check
            if expired:
                paths += self._drop_expired(part, len(expired))
        if paths:
            asyncio.get_running_loop().run_in_executor(None, remove_files, paths)
        return len(paths)

    def _rolled_for_retention(self, key: Key, part: DiskPartition, now_ms: int, error: BaseException | None) -> None:
        if error is not None:
            log.error("retention roll failed partition=%s: %s (retried at the next check)", part.dlog.name, error)
            return
        if self.closed or self._parts.get(key) is not part or key == self._cleaning:
            return  # let go or being cleaned meanwhile: the next check (or leader) deletes them
        config = self._config(part.dlog.topic)
        expired = part.dlog.expired_segments(config.retention_bytes, config.retention_ms, now_ms,
                                             part.high_watermark)
        if expired:
            self._remove_files(self._drop_expired(part, len(expired)))

    def _drop_expired(self, part: DiskPartition, count: int) -> list[str]:
        paths = part.dlog.drop_segments(count)
        part.producers.txns.trim_before(part.dlog.log_start)
        self.retention_segments_removed += count
        log.info("retention removed segments partition=%s segments=%d log_start=%d log_end=%d", part.dlog.name,
                 count, part.dlog.log_start, part.high_watermark)
        return paths

    # -- compaction (cleanup.policy=compact) ----------------------------------------------------

    def _arm_clean(self, delay_s: float | None = None) -> None:
        """The next check after `log.cleaner.backoff.ms` (or `delay_s`: at once after a clean, as
        Kafka's cleaner thread takes the next filthiest log and backs off only when none is due)."""
        if not self.closed:
            delay = self.settings.log_cleaner_backoff_ms / 1000 if delay_s is None else delay_s
            self._clean_timer = asyncio.get_running_loop().call_later(delay, self._maybe_clean)

    def _maybe_clean(self) -> None:
        """Compact the filthiest compacted partition that is due (Kafka's
        `grabFilthiestCompactedLog`), in the cleaner's process; the next check once it is over."""
        self._clean_timer = None
        if self.closed or self._cleaning is not None:
            return
        now = wall_ms()
        try:
            due = self._filthiest(now)
        except Exception as e:  # noqa: BLE001 -- a check that failed runs again after the backoff
            log.error("compaction check failed: %r", e)
            due = None
        if due is None:
            self._arm_clean()
            return
        key, part, paths, end, older_kept = due
        config = self._config(part.dlog.topic)
        if self._cleaner is None:
            self._cleaner = spawn_pool(die_with_parent)
        self._cleaning = key
        started = time.perf_counter()
        job = asyncio.get_running_loop().run_in_executor(self._cleaner, compact_segments, part.dlog.directory, paths,
                                                         now, config.delete_retention_ms, None, older_kept,
                                                         list(part.producers.txns.aborted))
        self._clean_job = (part, job)
        job.add_done_callback(lambda f: self._cleaned(key, part, end, f, started))

    def _filthiest(self, now_ms: int) -> tuple[Key, DiskPartition, list[str], int, bool] | None:
        """(key, partition, the closed segments to clean, the offset they end at, whether earlier
        segments stay out of the clean) of the compacted
        partition with the largest dirty ratio among those due (closed segments wholly below the last
        stable offset): dirty bytes (written since the last
        clean) / cleanable bytes > min.cleanable.dirty.ratio (Kafka's strict test); or a dirty
        segment's first batch older than max.compaction.lag.ms; or a tombstone's delete horizon
        passed. A dirty segment holding a record newer than min.compaction.lag.ms is not cleanable,
        nor any after it. In cluster mode a leader cleans only the closed segments of its own stamp
        (the last run of the chain: earlier leaders' segments are read, never rewritten), keeping
        every tombstone since older values may lie in the segments before them."""
        best = None
        for key, part in self._parts.items():
            dlog = part.dlog
            config = self._config(dlog.topic)
            if not config.compact or len(dlog.segments) < 2:
                continue
            closed = dlog.segments[:-1]
            skip = 0  # earlier leaders' segments, before this one's own
            if dlog.stamp:
                while skip < len(closed) and not (dlog.own(closed[skip][1]) and closed[skip][1] not in dlog.caps):
                    skip += 1
                closed = closed[skip:]
            # never past the first unstable offset (Kafka's cleaner bound): an open transaction's records
            # may still be aborted, and read_committed readers must find them and their marker intact
            stable = part.last_stable_offset
            closed = [seg for i, seg in enumerate(closed) if dlog.segments[skip + i + 1][0] <= stable]
            since = self._cleaned_to.get(key, -1)
            if config.min_compaction_lag_ms > 0:  # Kafka's first uncleanable dirty segment
                newest = now_ms - config.min_compaction_lag_ms
                young = [i for i, (base, path) in enumerate(closed) if base >= since and (
                    (index := dlog.indexes.get(path)) is None or index.largest_ts > newest)]
                closed = closed[:young[0]] if young else closed
            if not closed:
                continue
            sizes = [os.path.getsize(path) for _, path in closed]
            total = sum(sizes)
            dirty = [(base, path, size) for (base, path), size in zip(closed, sizes) if base >= since]
            dirty_bytes = sum(size for _, _, size in dirty)
            ratio = dirty_bytes / total if total else 0.0
            first = dlog.indexes.get(dirty[0][1]) if dirty else None
            overdue = first is not None and first.first_ts >= 0 and \
                now_ms - first.first_ts > config.max_compaction_lag_ms
            horizon = self._horizons.get(key)
            if (dirty_bytes and ratio > config.min_cleanable_dirty_ratio) or overdue or \
                    (horizon is not None and now_ms >= horizon):
                rank = (overdue, ratio)
                if best is None or rank > best[0]:
                    end = dlog.segments[skip + len(closed)][0]
                    best = (rank, key, part, [path for _, path in closed], end, skip > 0)
        return None if best is None else best[1:]

    def _cleaned(self, key: Key, part: DiskPartition, end: int, f: asyncio.Future, started: float) -> None:
        self._cleaning = self._clean_job = None
        name = part.dlog.name
        cleaned = False
        self._cleaned_to[key] = end  # a failure is not retried before new data or the backoff
        try:
            if died(f.exception()):  # the process died: the next clean starts one
                self._cleaner = None
            result = f.result()
        except Exception as e:  # noqa: BLE001
            log.error("compaction failed partition=%s: %r (retried when the partition is dirty again)", name, e)
        else:
            if self._parts.get(key) is part:  # the rewritten segments' own index (unless retention dropped them)
                for path, index in result.indexes.items():
                    if path in part.dlog.indexes:
                        part.dlog.indexes[path] = index
            if result.horizon is None:
                self._horizons.pop(key, None)
            else:
                self._horizons[key] = result.horizon
            self.compactions += 1
            self.compaction_reclaimed_bytes += max(result.bytes_before - result.bytes_after, 0)
            log.info("compacted partition=%s segments=%d records=%d->%d bytes=%d->%d corrupt_segments=%d ms=%d",
                     name, result.segments_cleaned, result.records_before, result.records_after,
                     result.bytes_before, result.bytes_after, result.segments_corrupt,
                     (time.perf_counter() - started) * 1000)
            cleaned = True
        finally:
            self._arm_clean(0 if cleaned else None)

    async def close(self) -> None:
        """Finish the writes in flight, fsync and close every log."""
        self.closed = True
        for timer in (self._flush_timer, self._leaders_timer, self._clean_timer):
            if timer is not None:
                timer.cancel()
        for part in list(self._parts.values()):
            idle = part.writer.idle()
            if idle is not None:
                try:
                    await asyncio.wait_for(idle, self.settings.offsets_commit_timeout_ms / 1000)
                except asyncio.TimeoutError:
                    log.error("data partition still writing at close partition=%s", part.dlog.name)
            part.writer.closed = True
        loop = asyncio.get_running_loop()
        for part in list(self._parts.values()):
            try:
                await loop.run_in_executor(None, part.dlog.close)
            except OSError as e:
                log.error("data partition close failed partition=%s: %s", part.dlog.name, e)
        self._workers.shutdown()
        if self._cleaner is not None:  # a clean under way finishes (each segment's rewrite is atomic anyway)
            await loop.run_in_executor(None, self._cleaner.shutdown, True)
