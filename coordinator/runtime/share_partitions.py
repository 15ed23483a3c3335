"""The node's share-partitions and share sessions (KIP-932, share-groups spec §3): created on the
first ShareFetch that names a partition, at its log end (`share.auto.offset.reset=latest`, Kafka's
default; groupd has no per-group override yet) unless a persisted snapshot exists. Waiting
ShareFetches register here to be woken when records are released (acknowledgement, session close)."""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from groupd.coordinator.core.share.delivery import Limits, SharePartition
from groupd.coordinator.core.share.sessions import ShareSessions

log = logging.getLogger("groupd")
Key = tuple[str, uuid.UUID, int]  # group, topic id, partition

_nodes: weakref.WeakKeyDictionary[Any, ShareDeliveries] = weakref.WeakKeyDictionary()


class ShareDeliveries:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions = ShareSessions()
        self._waiters: dict[int, Callable[[], None]] = {}
        self._next = 0

    def partition(self, key: Key, log_start: int, log_end: int) -> SharePartition:
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.partitions[key] = SharePartition(log_end, self.limits)
            log.info("share partition initialized group=%s topic_id=%s partition=%d start_offset=%d", *key, log_end)
        if log_start > sp.start:
            sp.move_start_to(log_start)
        return sp

    def release_member(self, group: str, member: str, partitions, now: int) -> None:
        changed = False
        for topic_id, index in partitions:
            sp = self.partitions.get((group, topic_id, index))
            if sp is not None:
                changed = sp.release_member(member, now) or changed
        if changed:
            self.wake()

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
                                                      s.group_share_partition_max_record_locks))
    return found
