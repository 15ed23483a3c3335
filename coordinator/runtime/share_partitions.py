"""The node's share-partitions and share sessions (KIP-932, share-groups spec §3): created on the
first ShareFetch that names a partition, from its persisted snapshot if there is one, else where the
group's `share.auto.offset.reset` says: the log end (`latest`, Kafka's default), its start
(`earliest`), or the first offset whose timestamp is at or after now minus the duration
(`by_duration:<ISO-8601 duration>`; the log end when no record is that recent).

A share-partition's state lives with its data partition's leader (every worker and cluster node
leads its own data partitions): the first share request for a data partition here, or the first
after its leadership changed (a new stamp), takes its state over from the share-state log of that
data partition (storage/share_state.py `take_over`), dropping whatever this node still held from an
earlier leadership; ACQUIRED is never persisted, so records in flight at the old leader are
delivered again. Snapshots go to the log on one writer thread, in order. Waiting ShareFetches
register here to be woken when records are released (acknowledgement, session close)."""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from groupd.coordinator.core.share.delivery import Limits, SharePartition
from groupd.coordinator.core.share.sessions import ShareSessions
from groupd.coordinator.observability import metrics
from groupd.coordinator.system_clock import wall_ms
from groupd.protocol import ErrorCode
from groupd.storage.share_state import Deposed, ShareStateLog, Snapshot, partition_directory, take_over

log = logging.getLogger("groupd")
Key = tuple[str, uuid.UUID, int]  # group, topic id, partition
DataKey = tuple[uuid.UUID, int]  # topic id, partition

_nodes: weakref.WeakKeyDictionary[Any, ShareDeliveries] = weakref.WeakKeyDictionary()



def _counted(sp: SharePartition) -> SharePartition:
    """`sp`, its lock expiries and delivery-limit archivings counted in the metrics."""
    sp.observe = _count
    return sp


def _count(event: str, n: int) -> None:
    (metrics.SHARE_LOCK_TIMEOUTS if event == "lock_timeout" else metrics.SHARE_DELIVERY_LIMIT).inc(n)

class ShareDeliveries:
    def __init__(self, limits: Limits, data_dir: str | None = None) -> None:
        self.limits = limits
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions = ShareSessions()
        self.data_dir = data_dir  # None: nothing persisted
        self._held: dict[DataKey, tuple[int, ShareStateLog | None]] = {}  # the stamp taken over, its log
        self._taking: dict[DataKey, asyncio.Future] = {}
        self._stored: dict[Key, Snapshot] = {}  # loaded and not yet in use
        self._snapshot_epochs: dict[Key, int] = {}
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupd-share-state")
        self._waiters: dict[int, Callable[[], None]] = {}
        self._next = 0

    def open_log(self, topic_id: uuid.UUID, index: int, stamp: int) -> ShareStateLog:
        """Blocking (the writer thread): the data partition's share-state log, taken over for `stamp`."""
        return take_over(partition_directory(self.data_dir, topic_id, index), stamp, wall_ms())

    async def hold(self, topic_id: uuid.UUID, index: int, stamp: int) -> ErrorCode | None:
        """The data partition's share state loaded here for leadership `stamp` (taken over once per
        stamp; every share request for the partition waits for it). NOT_LEADER_OR_FOLLOWER when a
        later leader wrote it already, KAFKA_STORAGE_ERROR when it cannot be read."""
        data = (topic_id, index)
        while True:
            held = self._held.get(data)
            if held is not None and held[0] == stamp:
                return None
            pending = self._taking.get(data)
            if pending is None:
                pending = self._taking[data] = asyncio.ensure_future(self._take_over(data, stamp))
                pending.add_done_callback(lambda f: self._taking.pop(data, None) if self._taking.get(data) is f
                                          else None)
            error = await asyncio.shield(pending)
            if error is not None:
                return error

    async def _take_over(self, data: DataKey, stamp: int) -> ErrorCode | None:
        self.let_go(data)
        if self.data_dir is None:
            self._held[data] = (stamp, None)
            return None
        try:
            store = await asyncio.get_running_loop().run_in_executor(self._writer, self.open_log, *data, stamp)
        except Deposed as e:
            log.info("share state not taken over topic_id=%s partition=%d: %s", *data, e)
            return ErrorCode.not_leader_or_follower
        except OSError as e:
            log.error("share state not loaded topic_id=%s partition=%d: %s", *data, e)
            return ErrorCode.kafka_storage_error
        self._held[data] = (stamp, store)
        for key, snapshot in store.live.items():
            self._stored[key] = snapshot
            self._snapshot_epochs[key] = snapshot[0]
        if store.live:
            log.info("share state loaded topic_id=%s partition=%d stamp=%d share_partitions=%d", *data, stamp,
                     len(store.live))
        return None

    def let_go(self, data: DataKey) -> None:
        """Forget the data partition's share state here (led elsewhere now, or about to be taken over
        again): what this node's members held there is delivered again by its leader."""
        self._held.pop(data, None)
        for keys in (self.partitions, self._stored, self._snapshot_epochs):
            for key in [k for k in keys if k[1:] == data]:
                del keys[key]

    def stamp(self, data: DataKey) -> int | None:
        """The leadership stamp the data partition's state was taken over for, None if not held."""
        held = self._held.get(data)
        return None if held is None else held[0]

    def initialized(self, key: Key) -> bool:
        """Whether the share-partition has a start offset here already (in use, or loaded)."""
        return key in self.partitions or key in self._stored

    def partition(self, key: Key, log_start: int, log_end: int, earliest: bool = False, start: int | None = None,
                  limits: Limits | None = None) -> SharePartition:
        """The share-partition, created if need be at its snapshot, else at `start` (by_duration's
        offset), else at the log start (`earliest`) or end; under the group's `limits` when given."""
        sp = self.partitions.get(key)
        if sp is not None and limits is not None:
            sp.limits = limits
        if sp is None:
            limits = limits or self.limits
            stored = self._stored.pop(key, None)
            if stored is not None:
                _, state_epoch, spso, batches = stored
                sp = self.partitions[key] = _counted(SharePartition.restore(state_epoch, spso, batches, limits))
                if spso > log_end:  # the log restarted below what the state knows (memory plane)
                    sp = self.partitions[key] = _counted(SharePartition(log_end, limits, state_epoch + 1))
            else:
                if start is None:
                    start = log_start if earliest else log_end
                start = min(max(start, log_start), log_end)
                sp = self.partitions[key] = _counted(SharePartition(start, limits))
                log.info("share partition initialized group=%s topic_id=%s partition=%d start_offset=%d",
                         *key, start)
        if log_start > sp.start:
            sp.move_start_to(log_start)
        return sp

    async def persist(self, keys: Iterable[Key]) -> None:
        """Write the snapshots of `keys` durably, each to its data partition's log (raises OSError
        when a write fails)."""
        if self.data_dir is None:
            return
        by_log: dict[Any, list] = {}
        for key in keys:
            sp = self.partitions.get(key)
            held = self._held.get(key[1:])
            if sp is None or held is None or held[1] is None:
                continue
            epoch = self._snapshot_epochs[key] = self._snapshot_epochs.get(key, -1) + 1
            state_epoch, start, batches = sp.snapshot()
            by_log.setdefault(held[1], []).append((key, (epoch, state_epoch, start, batches)))
        loop = asyncio.get_running_loop()
        for store, snapshots in by_log.items():
            await loop.run_in_executor(self._writer, store.write, snapshots, wall_ms())

    async def forget_groups(self, groups: Iterable[str], held: Iterable[tuple[DataKey, int]] = ()) -> set[str]:
        """Groups being deleted (DeleteGroups): their share-partitions' state goes from the data
        partitions this node leads (`held`: each with its stamp, taken over first), tombstoned in their
        logs, so that a group of the same id starts again from `share.auto.offset.reset` (Kafka deletes
        it too). Returns the groups whose state may remain (a log that could not be read or written:
        what this node held of them is kept as it was)."""
        groups = set(groups)
        failed: set[str] = set()
        for data, stamp in held:
            if await self.hold(*data, stamp) is ErrorCode.kafka_storage_error:
                failed |= groups  # its state could not be read: any of them may have some there
        for data, (_stamp, store) in list(self._held.items()):
            keys = [k for k in {*self.partitions, *self._stored} if k[0] in groups and k[1:] == data]
            saved = [(k, self.partitions.pop(k, None), self._stored.pop(k, None), self._snapshot_epochs.pop(k, None))
                     for k in keys]
            if keys and store is not None:
                try:
                    await asyncio.get_running_loop().run_in_executor(
                        self._writer, store.write, [(k, None) for k in keys], wall_ms())
                except OSError as e:
                    log.error("share state not deleted groups=%s: %s", ",".join(sorted(groups)), e)
                    for key, sp, stored, epoch in saved:
                        for target, value in ((self.partitions, sp), (self._stored, stored),
                                              (self._snapshot_epochs, epoch)):
                            if value is not None:
                                target[key] = value
                    failed.update(k[0] for k in keys)
        return failed

    async def reset(self, key: Key, start: int | None) -> None:
        """AlterShareGroupOffsets (`start`) or DeleteShareGroupOffsets (None) at the data partition's
        leader (its state held here): the share-partition starts afresh at `start`, its in-flight
        offsets and acquisitions dropped, under the next state epoch; or its state goes (the next
        ShareFetch starts it where `share.auto.offset.reset` says). Durable before this returns; a
        failed write (OSError, raised) leaves the state as it was."""
        before = (self.partitions.get(key), self._stored.get(key), self._snapshot_epochs.get(key))
        old, stored, _ = before
        state_epoch = (old.state_epoch if old is not None else stored[1] if stored is not None else 0) + 1
        self._stored.pop(key, None)
        try:
            if start is None:
                self.partitions.pop(key, None)
                self._snapshot_epochs.pop(key, None)
                held = self._held.get(key[1:])
                if held is not None and held[1] is not None:
                    await asyncio.get_running_loop().run_in_executor(self._writer, held[1].write, [(key, None)],
                                                                     wall_ms())
            else:
                self.partitions[key] = _counted(SharePartition(start, self.limits, state_epoch))
                await self.persist([key])
        except OSError:
            for target, value in zip((self.partitions, self._stored, self._snapshot_epochs), before):
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
            raise
        self.wake()

    def release_member(self, group: str, member: str, partitions, now: int) -> list[Key]:
        changed = []
        for topic_id, index in partitions:
            key = (group, topic_id, index)
            sp = self.partitions.get(key)
            if sp is not None and sp.release_member(member, now):
                changed.append(key)
        if changed:
            self.wake()
        return changed

    def wait(self, callback: Callable[[], None]) -> int:
        self._next += 1
        self._waiters[self._next] = callback
        return self._next

    def unwait(self, token: int) -> None:
        self._waiters.pop(token, None)

    def wake(self) -> None:
        for callback in list(self._waiters.values()):
            callback()


def deliveries_for(node: Any) -> ShareDeliveries:
    """The node's share deliveries, created on first use."""
    found = _nodes.get(node)
    if found is None:
        s = node.settings
        found = _nodes[node] = ShareDeliveries(Limits(s.group_share_record_lock_duration_ms,
                                                      s.group_share_delivery_count_limit,
                                                      s.group_share_partition_max_record_locks),
                                               s.data_dir)
    return found
