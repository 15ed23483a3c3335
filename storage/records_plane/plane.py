"""The in-memory records plane: one `TopicPartitionLog` per (topic id, partition), producer ids for
idempotent producers, and watchers that a held Fetch registers to be woken by an append.

Sans-IO like the rest of the package: the time comes in as an argument, and a watcher is a plain
callback that the append calls; the asyncio side (holding a Fetch for its max wait) lives in
`coordinator/apis/fetch.py`. Logs are keyed by topic id, so a topic deleted and created again
starts empty; logs of topics that no longer exist are dropped when a new log is created.

Memory is bounded twice: per partition by `records.retention.bytes` (the log's own check), and
over all partitions by `records.memory.max.bytes`: past it, the oldest batches of any partition
go first (a heap of each log's first batch, by append order) and that log's start offset moves.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Callable, Iterable

from groupd.protocol import ErrorCode

from ..topic_config import TopicConfig
from .batches import BatchError, ProducedBatch, split
from .log import TopicPartitionLog
from .traffic import Traffic
from .transactions import marker_batch
from .validator import check
from .watchers import Watchers

Key = tuple  # (topic id, partition)

NO_TRANSACTIONAL_ID = "Transactional records were sent without a transactional id"


@dataclasses.dataclass(frozen=True, slots=True)
class Appended:
    """The outcome of one partition of a Produce request."""

    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()  # (index of the record refused, why)
    log_append_time: int = -1  # the broker's time stamped on the batches (a LogAppendTime topic)
    records: int = 0  # records accepted (retried duplicates included)


def transaction_refusal(batches, transactional_id: str | None, producers,
                        verify: Callable[[int, int], ErrorCode] | None) -> Appended | None:
    """Kafka's checks of a partition's transactional batches before anything else: none may come
    without a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as KafkaApis answers), and a
    producer without an open transaction on the partition is verified with the transaction
    coordinator first (KIP-890's verification: `verify(producer id, epoch)`, the coordinator's error)."""
    for batch in batches:
        if not batch.transactional:
            continue
        if transactional_id is None:
            return Appended(ErrorCode.transactional_id_authorization_failed, message=NO_TRANSACTIONAL_ID)
        if verify is not None and not producers.in_transaction(batch.producer_id, batch.producer_epoch):
            error = verify(batch.producer_id, batch.producer_epoch)
            if error is not ErrorCode.none:
                return Appended(error)  # no message, as Kafka answers
        return None
    return None


def refusal(batches, partition: str, config: TopicConfig | None, now_ms: int, log_start: int) -> Appended | None:
    """The topic's checks of `validator.check` (none without a config), as the partition's answer
    (Kafka's carries the log start offset with record errors); None when the batches may go in."""
    refused = check(batches, partition, config, now_ms) if config is not None else None
    if refused is None:
        return None
    return Appended(refused.error, log_start_offset=log_start if refused.record_errors else -1,
                    message=refused.message, record_errors=refused.record_errors)


class MemoryPlane(Watchers):
    def __init__(self, retention_bytes: int, retention_ms: int, message_max_bytes: int,
                 max_bytes: int = 1 << 62, resume: dict[Key, int] | None = None,
                 reserve: Callable[[dict[Key, int]], None] | None = None, reserve_step: int = 1 << 16) -> None:
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms
        self.message_max_bytes = message_max_bytes
        self.max_bytes = max_bytes
        self.size = 0  # bytes of every log together
        self._logs: dict[Key, TopicPartitionLog] = {}
        self._seq = itertools.count()
        self._oldest: list[tuple[int, Key]] = []  # (seq of a log's first batch, key); stale entries skipped
        self.traffic = Traffic()
        super().__init__()
        # where each partition resumes after a restart (checkpoint.py), and the offsets reserved ahead
        self._resume = dict(resume or {})
        self._reserved: dict[Key, int] = dict(self._resume)
        self._reserve, self._reserve_step = reserve, reserve_step

    # -- logs ----------------------------------------------------------------------------------

    def peek(self, key: Key) -> TopicPartitionLog | None:
        """The partition's log, or None when it holds nothing and never did (a partition resumed
        after a restart is there, empty, at its log end)."""
        log = self._logs.get(key)
        if log is None and key in self._resume:
            log = self.log(key)
        return log

    def log(self, key: Key, live_topic_ids: Callable[[], Iterable] | None = None) -> TopicPartitionLog:
        log = self._logs.get(key)
        if log is None:
            if live_topic_ids is not None:
                self.forget_topics_except(set(live_topic_ids()))
            log = self._logs[key] = TopicPartitionLog(self.retention_bytes, self.retention_ms)
            log.log_start = log.high_watermark = self._resume.pop(key, 0)
        return log

    def forget_topics_except(self, live: set) -> None:
        for key in [k for k in self._logs if k[0] not in live]:
            self.size -= self._logs.pop(key).size
            self._reserved.pop(key, None)
        for key in [k for k in self._resume if k[0] not in live]:
            del self._resume[key]
            self._reserved.pop(key, None)

    def enforce_retention(self, now_ms: int) -> int:
        """Kafka's periodic retention check (`log.retention.check.interval.ms`) over every log;
        the number of batches dropped."""
        dropped = 0
        for key, log in self._logs.items():
            before = log.size
            n = log.enforce_retention(now_ms)
            if n:
                dropped += n
                self.size -= before - log.size
                self._head_changed(key, log)
        return dropped

    def _head_changed(self, key: Key, log: TopicPartitionLog) -> None:
        if log.batches:
            heapq.heappush(self._oldest, (log.batches[0].seq, key))
        if len(self._oldest) > 2 * len(self._logs) + 64:  # drop the stale entries
            self._oldest = [(lg.batches[0].seq, k) for k, lg in self._logs.items() if lg.batches]
            heapq.heapify(self._oldest)

    def _enforce_max_bytes(self) -> None:
        """Past `max_bytes` over all logs, drop the oldest batches of any partition."""
        while self.size > self.max_bytes and self._oldest:
            seq, key = heapq.heappop(self._oldest)
            log = self._logs.get(key)
            if log is None or not log.batches or log.batches[0].seq != seq:
                continue  # that batch went already (its partition's own retention)
            self.size -= log.drop_oldest()
            self._head_changed(key, log)

    def __len__(self) -> int:
        return len(self._logs)

    def checkpoint(self, reserved: dict[Key, int] | None = None) -> dict[Key, int]:
        """What `records-log-ends` holds: per partition the offset it resumes at after a restart
        (with `reserved`: the offsets reserved ahead; without: the exact log ends, at a clean stop)."""
        ends = dict(self._resume)
        for key, log in self._logs.items():
            ends[key] = log.high_watermark if reserved is None else max(reserved.get(key, 0), log.high_watermark)
        if reserved is not None:
            for key, end in reserved.items():
                ends[key] = max(ends.get(key, 0), end)
        return ends

    def partitions(self) -> list[tuple[Key, TopicPartitionLog]]:
        return list(self._logs.items())

    def high_watermarks(self) -> list[tuple[Key, int]]:
        return [(key, log.high_watermark) for key, log in self._logs.items()] + list(self._resume.items())

    # -- delete records --------------------------------------------------------------------------

    def delete_records(self, key: Key, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords on one partition (Kafka's `UnifiedLog.maybeIncrementLogStartOffset`): -1 is the
        high watermark; beyond it, or below 0, OFFSET_OUT_OF_RANGE; else the log start moves up to
        `offset` (never back). The error and the low watermark (-1 with an error). Nothing to make
        durable: after a restart the partition resumes empty at its log end, past any log start."""
        log = self.peek(key)
        high_watermark = log.high_watermark if log is not None else 0
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            return ErrorCode.offset_out_of_range, -1
        if log is None:
            return ErrorCode.none, 0
        if offset > log.log_start:
            head = log.batches[0] if log.batches else None
            self.size -= log.delete_records_before(offset)
            if log.batches and log.batches[0] is not head:
                self._head_changed(key, log)
        return ErrorCode.none, log.log_start

    # -- produce -------------------------------------------------------------------------------

    def append(self, key: Key, records: bytes | None, produce_version: int, now_ms: int,
               live_topic_ids: Callable[[], Iterable] | None = None, name: str = "",
               config: TopicConfig | None = None, transactional_id: str | None = None,
               verify: Callable[[int, int], ErrorCode] | None = None) -> Appended:
        """Validate and append one partition's batches; wakes the fetches watching it. `name` and
        `config`: the partition's name and its topic's configs, which the batches are checked against;
        `transactional_id` and `verify`: the request's, for transactional batches (`transaction_refusal`)."""
        try:
            batches = split(records, produce_version, self.message_max_bytes)
        except BatchError as e:
            return Appended(e.error, message=e.message)
        log = self.log(key, live_topic_ids)
        refused = transaction_refusal(batches, transactional_id, log.producers, verify) or \
            refusal(batches, name, config, now_ms, log.log_start)
        if refused is not None:
            return refused
        failed = self._reserve_offsets(key, log, sum(b.count for b in batches))
        if failed is not None:
            return Appended(ErrorCode.kafka_storage_error, message=failed)
        first = None
        for batch in batches:
            try:
                duplicate_of = log.check_producer(batch)
            except BatchError as e:
                if first is None:
                    return Appended(e.error, message=e.message)
                break  # earlier batches of this request are in; report them
            if duplicate_of is None:
                before, head = log.size, log.batches[0] if log.batches else None
                batch.seq = next(self._seq)
                base = log.append(batch, now_ms)
                self.size += log.size - before
                if not log.batches or log.batches[0] is not head:
                    self._head_changed(key, log)
            else:
                base = duplicate_of
            if first is None:
                first = base
        self._enforce_max_bytes()
        self._wake(key)
        stamped = now_ms if config is not None and config.message_timestamp_type == "LogAppendTime" else -1
        return Appended(ErrorCode.none, first, log.log_start, log_append_time=stamped,
                        records=sum(b.count for b in batches))

    def _reserve_offsets(self, key: Key, log: TopicPartitionLog, count: int) -> str | None:
        """Store the log ends reserved ahead before `count` more offsets are given out (a restart
        resumes past them); why not, when they could not be stored."""
        if self._reserve is not None:
            needed = log.high_watermark + count
            if needed > self._reserved.get(key, 0):
                reserved = dict(self._reserved)
                reserved[key] = needed + self._reserve_step
                try:
                    self._reserve(self.checkpoint(reserved))
                except OSError as e:
                    return f"the records plane's log ends could not be stored: {e}"
                self._reserved = reserved
        return None

    # -- transaction markers ---------------------------------------------------------------------

    def write_marker(self, key: Key, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                     now_ms: int) -> tuple[ErrorCode, str | None]:
        """Append the producer's COMMIT or ABORT marker to the partition (WriteTxnMarkers); in memory it is
        as durable as anything here once appended. Wakes the fetches watching the partition (its last
        stable offset moved)."""
        log = self.log(key)
        refused = log.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if refused is not None:
            return refused
        failed = self._reserve_offsets(key, log, 1)
        if failed is not None:
            return ErrorCode.kafka_storage_error, failed
        data = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        batch = ProducedBatch(data, 1, now_ms, 0, producer_id, producer_epoch, -1, True)
        before, head = log.size, log.batches[0] if log.batches else None
        batch.seq = next(self._seq)
        log.append_marker(batch, commit, coordinator_epoch, now_ms)
        self.size += log.size - before
        if not log.batches or log.batches[0] is not head:
            self._head_changed(key, log)
        self._enforce_max_bytes()
        self._wake(key)
        return ErrorCode.none, None


class ProducerIds:
    """Producer ids for InitProducerId: without a transactional id Kafka hands out a fresh id
    with epoch 0 on every request (it never bumps the epoch of an idempotent producer's id).

    Id k of this process is `first + k * step` (workers share the id space by residues). With a
    `save_block(n)` callback, ids are reserved in blocks of `block` from `next_block` on, as Kafka's
    producer-id blocks: the block is stored before any id in it is handed out, so a restart, which
    starts at the stored next block, never hands out an id again."""

    def __init__(self, first: int = 0, step: int = 1, next_block: int = 0, block: int = 1000,
                 save_block: Callable[[int], None] | None = None) -> None:
        self._first, self._step, self._block = first, step, block
        self._next = next_block * block
        self._limit = self._next if save_block is not None else 1 << 62
        self._save = save_block

    def allocate(self) -> int:
        """The next id; raises OSError when a new block cannot be stored (no id is handed out)."""
        if self._next >= self._limit:
            block = self._next // self._block + 1
            self._save(block)
            self._limit = block * self._block
        k, self._next = self._next, self._next + 1
        return self._first + k * self._step
