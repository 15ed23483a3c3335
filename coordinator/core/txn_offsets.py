"""Offsets committed inside producers' transactions (KIP-98/447; Kafka's OffsetMetadataManager
`pendingTransactionalOffsets` and `openTransactionsByGroup`): held per producer until its COMMIT
marker moves them into the committed offsets or its ABORT marker drops them.

On a COMMIT, a pending offset replaces the committed one only if it came later in the log: a
non-transactional commit of the same partition after the transactional one wins (Kafka keeps the
entry with the higher record offset, so the outcome does not depend on compaction). The log order
is the order records are applied in (loads replay the log; live writes are applied as appended),
so a sequence number stands in for the record offset: every pending offset carries the one it was
applied at, and a partition with pending offsets remembers the one of its committed value.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from groupd.protocol import ErrorCode
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue


@dataclasses.dataclass(frozen=True, slots=True)
class TxnUndo:
    """The record that undoes a change of the pending offsets (a failed write's revert): it puts
    back the state it captured."""

    group: str
    restore: Callable[[], None]


class PendingOffsets:
    def __init__(self) -> None:
        # producer id → key → (value, sequence)
        self.by_producer: dict[int, dict[OffsetCommitKey, tuple[OffsetCommitValue, int]]] = {}
        self.producers_of_key: dict[OffsetCommitKey, set[int]] = {}
        # group → its partitions with pending offsets (Kafka's openTransactions: a tombstone of a
        # partition closes it there, the marker everywhere)
        self.open_by_group: dict[str, set[OffsetCommitKey]] = {}
        self.committed_seq: dict[OffsetCommitKey, int] = {}  # for keys with pending offsets only
        # producer id → (its latest epoch, the coordinator epoch of its last marker) seen in this
        # partition's log: what fences a marker of an older producer or transaction coordinator
        self.producers: dict[int, tuple[int, int]] = {}
        self._seq = itertools.count()

    # -- reads ----------------------------------------------------------------------------------

    def has_pending(self, key: OffsetCommitKey) -> bool:
        return key in self.producers_of_key

    def has_open(self, group_id: str) -> bool:
        return group_id in self.open_by_group

    # -- changes (each returns the undo, see TxnUndo) -----------------------------------------------

    def undo(self, group_id: str, producer_ids, keys) -> TxnUndo:
        """What puts back the state of these producers and keys as it is now: what a change of
        only them (a record applied) needs to be undone."""
        producers = {pid: (dict(self.by_producer[pid]) if pid in self.by_producer else None, self.producers.get(pid))
                     for pid in producer_ids}
        saved_keys = {key: (set(self.producers_of_key[key]) if key in self.producers_of_key else None,
                            self.committed_seq.get(key), key in self.open_by_group.get(key.group, ()))
                      for key in keys}

        def restore() -> None:
            for pid, (entries, epochs) in producers.items():
                _put(self.by_producer, pid, None if entries is None else dict(entries))
                _put(self.producers, pid, epochs)
            for key, (pids, seq, is_open) in saved_keys.items():
                _put(self.producers_of_key, key, None if pids is None else set(pids))
                _put(self.committed_seq, key, seq)
                if is_open:
                    self.open_by_group.setdefault(key.group, set()).add(key)
                else:
                    self._closed(key)

        return TxnUndo(group_id, restore)

    def marker_error(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> ErrorCode | None:
        """Kafka's producer-state checks of a marker: not from an older producer epoch, nor from a
        transaction coordinator older than the one of the producer's last marker."""
        epoch, last_coordinator = self.producers.get(producer_id, (-1, -1))
        if producer_epoch < epoch:
            return ErrorCode.invalid_producer_epoch
        if coordinator_epoch < last_coordinator:
            return ErrorCode.transaction_coordinator_fenced
        return None

    def ended(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """A marker was applied: the producer's epochs as of it."""
        epoch, last_coordinator = self.producers.get(producer_id, (-1, -1))
        self.producers[producer_id] = (max(epoch, producer_epoch), max(last_coordinator, coordinator_epoch))

    def add(self, producer_id: int, producer_epoch: int, key: OffsetCommitKey, value: OffsetCommitValue) -> None:
        epoch, last_coordinator = self.producers.get(producer_id, (-1, -1))
        self.producers[producer_id] = (max(epoch, producer_epoch), last_coordinator)
        self.by_producer.setdefault(producer_id, {})[key] = (value, next(self._seq))
        self.producers_of_key.setdefault(key, set()).add(producer_id)
        self.open_by_group.setdefault(key.group, set()).add(key)

    def committed(self, key: OffsetCommitKey) -> None:
        """A non-transactional commit of `key` (which has pending offsets) was applied."""
        self.committed_seq[key] = next(self._seq)

    def deleted(self, key: OffsetCommitKey) -> None:
        """A tombstone of `key`: its pending offsets go too."""
        for producer_id in self.producers_of_key.pop(key, ()):
            self.by_producer[producer_id].pop(key, None)
        self.committed_seq.pop(key, None)
        self._closed(key)

    def _closed(self, key: OffsetCommitKey) -> None:
        """`key` has no pending offsets any more."""
        keys = self.open_by_group.get(key.group)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.open_by_group[key.group]

    def end(self, producer_id: int, commit: bool) -> list[tuple[OffsetCommitKey, OffsetCommitValue]]:
        """The producer's transaction ended: forget its pending offsets; on commit, the ones that
        replace the committed value (newer in the log than it)."""
        pending = self.by_producer.pop(producer_id, {})
        winners = []
        for key, (value, seq) in pending.items():
            if commit and self.committed_seq.get(key, -1) < seq:
                winners.append((key, value))
                self.committed_seq[key] = seq
            producers = self.producers_of_key.get(key)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.producers_of_key[key]
                    self.committed_seq.pop(key, None)
                    self._closed(key)
        return winners


def _put(d: dict, key, value) -> None:
    """`d[key] = value`, or no `key` at all for None."""
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value
