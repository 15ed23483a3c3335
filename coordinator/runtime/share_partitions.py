"""The node's share-partitions and share sessions (KIP-932, share-groups spec §3): created on the
first ShareFetch that names a partition, from its persisted snapshot if there is one, else where the
group's `share.auto.offset.reset` says: the log end (`latest`, Kafka's default) or its start
(`earliest`).
Snapshots go to the share-state log (storage/share_state.py) on one writer thread, in order, and
the log is read once, off the loop, before the first share request is served. Waiting ShareFetches
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
from groupd.coordinator.system_clock import wall_ms
from groupd.storage.share_state import ShareStateLog, Snapshot

log = logging.getLogger("groupd")
Key = tuple[str, uuid.UUID, int]  # group, topic id, partition

_nodes: weakref.WeakKeyDictionary[Any, ShareDeliveries] = weakref.WeakKeyDictionary()


class ShareDeliveries:
    def __init__(self, limits: Limits, store: ShareStateLog | None = None) -> None:
        self.limits = limits
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions = ShareSessions()
        self.store = store
        self._stored: dict[Key, Snapshot] = {}  # loaded and not yet in use
        self._snapshot_epochs: dict[Key, int] = {}
        self._loading: asyncio.Future | None = None
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupd-share-state")
        self._waiters: dict[int, Callable[[], None]] = {}
        self._next = 0

    async def ready(self) -> None:
        """The share-state log read (once; every share request waits for it)."""
        if self.store is None:
            return
        if self._loading is None:
            self._loading = asyncio.get_running_loop().run_in_executor(self._writer, self._load)
        await asyncio.shield(self._loading)

    def _load(self) -> None:
        loaded = self.store.load()
        self._stored = dict(loaded)
        self._snapshot_epochs = {k: s[0] for k, s in loaded.items()}
        if loaded:
            log.info("share state loaded share_partitions=%d", len(loaded))

    def partition(self, key: Key, log_start: int, log_end: int, earliest: bool = False) -> SharePartition:
        sp = self.partitions.get(key)
        if sp is None:
            stored = self._stored.pop(key, None)
            if stored is not None:
                _, state_epoch, start, batches = stored
                sp = self.partitions[key] = SharePartition.restore(state_epoch, start, batches, self.limits)
                if start > log_end:  # the log restarted below what the state knows (memory plane)
                    sp = self.partitions[key] = SharePartition(log_end, self.limits, state_epoch + 1)
            else:
                start = log_start if earliest else log_end
                sp = self.partitions[key] = SharePartition(start, self.limits)
                log.info("share partition initialized group=%s topic_id=%s partition=%d start_offset=%d",
                         *key, start)
        if log_start > sp.start:
            sp.move_start_to(log_start)
        return sp

    async def persist(self, keys: Iterable[Key]) -> None:
        """Write the snapshots of `keys` durably (raises OSError when the write fails)."""
        if self.store is None:
            return
        snapshots = []
        for key in keys:
            sp = self.partitions.get(key)
            if sp is None:
                continue
            epoch = self._snapshot_epochs[key] = self._snapshot_epochs.get(key, -1) + 1
            state_epoch, start, batches = sp.snapshot()
            snapshots.append((key, (epoch, state_epoch, start, batches)))
        if snapshots:
            await asyncio.get_running_loop().run_in_executor(self._writer, self.store.write, snapshots, wall_ms())

    async def forget_groups(self, groups: Iterable[str]) -> None:
        """Deleted groups (DeleteGroups): their share-partitions' state goes, tombstoned in the log, so
        that a group of the same id starts again from `share.auto.offset.reset` (Kafka deletes it too)."""
        await self.ready()
        groups = set(groups)
        keys = [k for k in (*self.partitions, *self._stored) if k[0] in groups]
        for key in keys:
            self.partitions.pop(key, None)
            self._stored.pop(key, None)
            self._snapshot_epochs.pop(key, None)
        if keys and self.store is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(
                    self._writer, self.store.write, [(k, None) for k in keys], wall_ms())
            except OSError as e:  # the group is gone either way; its old state would load again at a restart
                log.error("share state not deleted groups=%s: %s", ",".join(sorted(groups)), e)

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
                                               ShareStateLog(s.data_dir, s.node_id))
    return found
