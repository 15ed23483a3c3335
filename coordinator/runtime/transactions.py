"""The transaction coordinator's asyncio shell around its sans-IO core
(coordinator/core/transactions/machine.py): the `__transaction_state` partitions (loaded before the
node serves, written through the offsets log's group-commit writer), the markers of a Prepare*
transaction (retried until written, then Complete*), and the timeout and expiry scans.

Markers go through the two seams of the transactions contract: data partitions through
`groupd.coordinator.runtime.txn_data.write_marker(node, ...)`, `__consumer_offsets` partitions
through `node.coordinator.complete_transaction(...)`; either may be absent (a build without that
side), and then its partitions have nothing to mark. `data_marker`/`offsets_marker` can be replaced
(tests pass fakes).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.core.transactions.machine import Step, TransactionCore, Transition, TxnMetadata
from groupd.coordinator.observability import metrics
from groupd.protocol import ErrorCode
from groupd.storage.compaction import compact
from groupd.storage.transaction_log import TOPIC, TransactionPartitionLog, encode
from groupd.storage.transaction_records import TxnState

from .log_workers import LogWorkers
from .log_writer import LogWriter

log = logging.getLogger("groupd")

OFFSETS_TOPIC = "__consumer_offsets"
COORDINATOR_EPOCH = 0  # one process owns every __transaction_state partition for its whole life
RETRY_FIRST_S, RETRY_MAX_S = 0.05, 1.0
# a marker error after which the partition will never take it (the topic went away, a newer epoch)
GIVE_UP = (ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced)


def wall_ms() -> int:
    return int(time.time() * 1000)


def data_marker_seam():
    """txn_data.write_marker, where the records plane's side of transactions is built in."""
    try:
        module = importlib.import_module("groupd.coordinator.runtime.txn_data")
    except ImportError:
        return None
    return getattr(module, "write_marker", None)


class TransactionCoordinator:
    def __init__(self, settings, node: Any, new_producer_id) -> None:
        self.settings = settings
        self.node = node
        self.partitions = settings.transaction_state_log_num_partitions
        self.core = TransactionCore(settings.transaction_max_timeout_ms, settings.transactional_id_expiration_ms)
        self.new_producer_id = new_producer_id
        self.writers: list[LogWriter | None] = [None] * self.partitions
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="groupd-txn-log")
        self._workers = LogWorkers(4, "groupd-txn-write")
        self._markers: dict[str, asyncio.Task] = {}  # transactional id → its markers being written
        self._timers: list[asyncio.TimerHandle] = []
        self._compacting: asyncio.Future | None = None
        self.closing = False
        data = data_marker_seam()
        self.data_marker = None if data is None else (
            lambda topic, p, pid, epoch, commit: data(node, topic, p, pid, epoch, commit, COORDINATOR_EPOCH))
        self.offsets_marker = None
        complete = getattr(getattr(node, "coordinator", None), "complete_transaction", None)
        if complete is not None:
            self.offsets_marker = lambda p, pid, epoch, commit: complete(p, pid, epoch, commit, COORDINATOR_EPOCH)

    def partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partitions)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load every partition (before the node serves), finish what was being committed or aborted,
        and start the scans."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        records = 0
        for p in range(self.partitions):
            plog = TransactionPartitionLog(self.settings.data_dir, p, self.settings.transaction_state_log_segment_bytes)
            result = await loop.run_in_executor(self._executor, plog.load, self.core.apply)
            records += result.records
            self.writers[p] = LogWriter(plog, self._workers, self.settings.log_flush_interval_ms == 0,
                                        self.settings.offsets_commit_timeout_ms,
                                        max_message_bytes=self.settings.message_max_bytes, encoder=encode,
                                        kind=lambda _records: None)  # plain batches only
        states: dict[str, int] = {}
        for meta in self.core.txns.values():
            states[meta.state.label] = states.get(meta.state.label, 0) + 1
        if records:  # a fresh data dir says nothing (start-up errors stay one line)
            log.info("transaction log loaded partitions=%d records=%d transactional_ids=%d states=%s ms=%d",
                     self.partitions, records, len(self.core.txns),
                     ",".join(f"{k}:{v}" for k, v in sorted(states.items())) or "-",
                     (time.monotonic() - started) * 1000)
        metrics.TRANSACTIONS_OPEN.set_function(lambda: sum(
            m.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
            for m in self.core.txns.values()))
        for meta in self.core.preparing():  # its markers may not all be written: write them again
            self._start_markers(meta)
        self._every(self.settings.transaction_abort_timed_out_transaction_cleanup_interval_ms, self._abort_timed_out)
        self._every(self.settings.transaction_remove_expired_transaction_cleanup_interval_ms, self._expire)
        self._every(self.settings.log_cleaner_backoff_ms, self._compact)
        if self.settings.log_flush_interval_ms > 0:  # interval mode: written batches are fsynced this often
            self._every(self.settings.log_flush_interval_ms, self._sync_all)

    async def close(self) -> None:
        self.closing = True
        for timer in self._timers:
            timer.cancel()
        for task in list(self._markers.values()):
            task.cancel()
        for writer in self.writers:
            if writer is None:
                continue
            idle = writer.idle()
            if idle is not None:
                await idle
            writer.closed = True
            await asyncio.get_running_loop().run_in_executor(self._executor, writer.plog.close)
        self._workers.shutdown()
        self._executor.shutdown(wait=False)

    def _every(self, interval_ms: int, work) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            if self.closing:
                return
            try:
                work()
            finally:
                self._timers.append(loop.call_later(interval_ms / 1000, fire))

        self._timers.append(loop.call_later(interval_ms / 1000, fire))

    # -- writes ------------------------------------------------------------------------------------

    def write(self, transition: Transition) -> asyncio.Future:
        """A future of NONE once `transition` is durable and applied, else the error Kafka maps a failed
        transaction-log append to (the state is as before, unless a slow write lands later)."""
        fut = asyncio.get_running_loop().create_future()
        writer = self.writers[self.partition(transition.transactional_id)]

        def completed(error: ErrorCode | None) -> None:
            if error is None:
                self.core.written(transition)
            else:
                self.core.abandon(transition)
            if not fut.done():
                fut.set_result(ErrorCode.none if error is None else (
                    ErrorCode.unknown_server_error if error == ErrorCode.record_list_too_large else error))

        def timed_out() -> None:
            if not fut.done():
                fut.set_result(ErrorCode.coordinator_not_available)

        if writer is None or self.closing:
            self.core.abandon(transition)
            fut.set_result(ErrorCode.not_coordinator)
            return fut
        writer.append([(transition.transactional_id, transition.value)], completed, timed_out)
        return fut

    async def run(self, step: Step) -> ErrorCode:
        """A request's step: its error now, or once its transition is durable (and, for a Prepare*
        transition, its markers under way)."""
        if step.transition is None:
            return step.error
        error = await self.write(step.transition)
        if error != ErrorCode.none:
            return error
        value = step.transition.value
        if value is not None and value.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            meta = self.core.txns.get(step.transition.transactional_id)
            if meta is not None:
                self._start_markers(meta)
        return step.error

    # -- the requests --------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_id: int,
                               expected_epoch: int) -> tuple[ErrorCode, int, int]:
        step = self.core.init_producer_id(transactional_id, timeout_ms, expected_id, expected_epoch, wall_ms(),
                                          self.new_producer_id)
        if step.transition is not None and step.error == ErrorCode.concurrent_transactions:
            metrics.TRANSACTIONS_FENCED.inc()  # an Ongoing transaction aborted under a bumped epoch
            log.info("transaction fenced transactional_id=%s producer_id=%d producer_epoch=%d: aborting",
                     transactional_id, step.transition.value.producer_id, step.transition.value.producer_epoch)
        error = await self.run(step)
        meta = self.core.txns.get(transactional_id)
        if error != ErrorCode.none or meta is None:
            return error, -1, -1
        log.info("transactional producer initialised transactional_id=%s producer_id=%d producer_epoch=%d",
                 transactional_id, meta.producer_id, meta.producer_epoch)
        return error, meta.producer_id, meta.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]]) -> ErrorCode:
        return await self.run(self.core.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                       wall_ms()))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        return await self.run(self.core.end_txn(transactional_id, producer_id, producer_epoch, commit, wall_ms()))

    # -- markers -----------------------------------------------------------------------------------

    def _start_markers(self, meta: TxnMetadata) -> None:
        txn_id = meta.transactional_id
        if txn_id in self._markers or self.closing:
            return
        task = asyncio.get_running_loop().create_task(self._write_markers(
            txn_id, meta.producer_id, meta.producer_epoch, meta.state == TxnState.PREPARE_COMMIT,
            sorted(meta.partitions)))
        self._markers[txn_id] = task
        task.add_done_callback(lambda _t: self._markers.pop(txn_id, None))

    async def _mark(self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        try:
            if topic == OFFSETS_TOPIC:
                if self.offsets_marker is None:
                    return ErrorCode.none
                return await self.offsets_marker(partition, producer_id, epoch, commit)
            if self.data_marker is None:
                return ErrorCode.none
            error = await self.data_marker(topic, partition, producer_id, epoch, commit)
            if error == ErrorCode.unknown_topic_or_partition and not self._topic_exists(topic):
                return ErrorCode.none  # deleted since it joined the transaction: nothing to mark
            return error
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001  (a seam's failure is retried like a retriable error)
            log.error("transaction marker failed topic=%s partition=%d producer_id=%d: %r", topic, partition,
                      producer_id, e)
            return ErrorCode.unknown_server_error

    def _topic_exists(self, topic: str) -> bool:
        catalog = getattr(self.node, "catalog", None)
        return catalog is None or catalog.get(topic) is not None

    async def _write_markers(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                             partitions: list[tuple[str, int]]) -> None:
        """Every partition's marker, retried until written, then the Complete* record (retried too)."""
        remaining = list(partitions)
        delay = RETRY_FIRST_S
        while remaining:
            errors = await asyncio.gather(*(self._mark(t, p, producer_id, epoch, commit) for t, p in remaining))
            left = []
            for (topic, p), error in zip(remaining, errors):
                if error in GIVE_UP:
                    log.error("transaction marker refused transactional_id=%s topic=%s partition=%d error=%s",
                              txn_id, topic, p, error.name)
                elif error != ErrorCode.none:
                    left.append((topic, p))
            if left:
                metrics.TRANSACTION_MARKER_RETRIES.inc(len(left))
                log.warning("transaction markers retried transactional_id=%s partitions=%d first=%s-%d",
                            txn_id, len(left), *left[0])
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            remaining = left
        delay = RETRY_FIRST_S
        while not self.closing:
            transition = self.core.complete(txn_id, wall_ms())
            if transition is None:
                return
            if await self.write(transition) == ErrorCode.none:
                metrics.TRANSACTIONS_COMPLETED.labels("commit" if commit else "abort").inc()
                log.info("transaction %s transactional_id=%s producer_id=%d producer_epoch=%d partitions=%d",
                         "committed" if commit else "aborted", txn_id, producer_id, epoch, len(partitions))
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    # -- scans -------------------------------------------------------------------------------------

    def _abort_timed_out(self) -> None:
        for transition in self.core.timed_out(wall_ms()):
            metrics.TRANSACTIONS_TIMED_OUT.inc()
            log.info("transaction timed out transactional_id=%s producer_id=%d producer_epoch=%d: aborting",
                     transition.transactional_id, transition.value.producer_id, transition.value.producer_epoch)
            asyncio.get_running_loop().create_task(self.run(Step(ErrorCode.none, transition)))

    def _expire(self) -> None:
        for transition in self.core.expired(wall_ms()):
            log.info("transactional id expired transactional_id=%s", transition.transactional_id)
            self.write(transition)

    def _sync_all(self) -> None:
        for writer in self.writers:
            if writer is not None and not writer.closed:
                job = asyncio.get_running_loop().run_in_executor(self._executor, writer.plog.sync)
                job.add_done_callback(lambda f: f.exception() is None or log.error(
                    "transaction log fsync failed: %r", f.exception()))

    def _compact(self) -> None:
        """Compact the closed segments (the offsets log's cleaner: the latest record per transactional
        id, tombstones kept `log.cleaner.delete.retention.ms`), one partition after another, off the loop."""
        if self._compacting is not None and not self._compacting.done():
            return
        dirs = [w.plog.directory for w in self.writers if w is not None and len(w.plog.segments) > 1]
        if dirs:
            self._compacting = asyncio.get_running_loop().run_in_executor(self._executor, self._compact_all, dirs)

    def _compact_all(self, dirs: list[str]) -> None:
        for directory in dirs:
            try:
                result = compact(directory, wall_ms(), self.settings.log_cleaner_delete_retention_ms)
            except Exception as e:  # noqa: BLE001  (the next round tries again; renames keep the log loadable)
                log.error("transaction log compaction failed directory=%s: %r", directory, e)
                continue
            if result.segments_cleaned:
                log.info("transaction log compacted directory=%s records=%d->%d bytes=%d->%d", directory,
                         result.records_before, result.records_after, result.bytes_before, result.bytes_after)

    # -- verification (contract seam 3) --------------------------------------------------------------

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> ErrorCode:
        return self.core.verify(transactional_id, producer_id, producer_epoch, (topic, partition))

    def verify_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> ErrorCode:
        p = partition_for(group_id, self.settings.offsets_topic_num_partitions)
        return self.core.verify(transactional_id, producer_id, producer_epoch, (OFFSETS_TOPIC, p))


__all__ = ["TOPIC", "TransactionCoordinator"]
