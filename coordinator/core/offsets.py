"""Committed offsets of one partition's groups: OffsetCommit, OffsetFetch, OffsetDelete and
retention (spec §7, §8, §9.4, §11). It asks a group only through the `Group` interface
(coordinator/core/group.py), so every group type shares it."""

from __future__ import annotations

from groupd.protocol import ErrorCode
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record
from groupd.storage.txn_records import TxnOffsetKey

from .clock import Now
from .group import Group
from .outcome import Outcome
from .requests import OffsetCommitRequest, OffsetDeleteRequest, TxnOffsetCommitRequest
from .txn_offsets import PendingOffsets

E = ErrorCode


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


class OffsetsStore:
    def __init__(self, groups: dict[str, Group], metadata_max_bytes: int,
                 pending: PendingOffsets | None = None) -> None:
        self.groups = groups  # the partition's registry, shared
        self.pending = pending if pending is not None else PendingOffsets()  # open transactions' offsets, shared
        self.metadata_max_bytes = metadata_max_bytes
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        # one (topic, partition) tuple for all the groups that commit it: 64 bytes saved per offset
        self._partitions: dict[tuple[str, int], tuple[str, int]] = {}

    def apply(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> OffsetCommitValue | None:
        """Store or delete one offset; the previous value. (Loading calls this per record.)"""
        group_offsets = self.offsets.get(key.group)
        tp = (key.topic, key.partition)
        if value is None:
            previous = None if group_offsets is None else group_offsets.pop(tp, None)
            if previous is not None and not group_offsets:
                del self.offsets[key.group]
            return previous
        if group_offsets is None:
            group_offsets = self.offsets[key.group] = {}
        previous = group_offsets.get(tp)
        if previous is None:
            tp = self._partitions.setdefault(tp, tp)
        group_offsets[tp] = value
        return previous

    # =========================================================================================
    # OffsetCommit (spec §7)

    def commit(self, req: OffsetCommitRequest, now: Now) -> Outcome:
        """`req.offsets` passed the topic checks. Reply: {(topic, partition): error}."""
        out = Outcome()
        group = self.groups.get(req.group_id)
        if group is None:  # a commit without a generation creates a simple group (its first record does)
            error = None if req.generation < 0 else E.group_id_not_found if req.version >= 9 else E.illegal_generation
        else:
            error = group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation, req.version,
                                                 [(t, p) for t, p, *_ in req.offsets])
        if error is not None:
            out.reply = {(t, p): error for t, p, *_ in req.offsets}
            return out
        if group is not None:
            group.offset_committed_by(req.member_id, now.mono)
        reply, accepted = {}, []
        wall = now.wall
        # Kafka adds the two as Java longs: a retention near 2^63 wraps (the value holds int64s)
        expire = (wall + req.retention_ms + 2**63) % 2**64 - 2**63 if req.retention_ms != -1 else -1
        self._records(out, req, wall, expire, reply, accepted, None)
        return _answered_when_written(out, reply, accepted)

    def _records(self, out: Outcome, req, wall: int, expire: int, reply: dict, accepted: list,
                 producer: tuple[int, int] | None) -> None:
        """A record per offset whose metadata fits (else OFFSET_METADATA_TOO_LARGE); `producer`:
        (id, epoch) of a transaction's offsets."""
        limit = self.metadata_max_bytes
        for topic, partition, offset, epoch, metadata in req.offsets:
            # a string has at most two UTF-16 code units per character: only a long one is measured
            if metadata and 2 * len(metadata) > limit and _utf16_len(metadata) > limit:
                reply[(topic, partition)] = E.offset_metadata_too_large
                continue
            reply[(topic, partition)] = E.none
            accepted.append((topic, partition))
            key = OffsetCommitKey(req.group_id, topic, partition)
            out.records.append(Record(key if producer is None else TxnOffsetKey(*producer, key),
                                      OffsetCommitValue(offset, epoch, metadata or "", wall, expire)))

    # =========================================================================================
    # TxnOffsetCommit (spec transactions §2 rules 1–3)

    def txn_commit(self, req: TxnOffsetCommitRequest, now: Now) -> Outcome:
        """`req.offsets` passed the topic checks and the transaction's verification. Reply:
        {(topic, partition): error}. The membership checks are KIP-447's (`validate_txn_offset_commit`);
        without a group, a commit without a generation makes a simple one."""
        out = Outcome()
        group = self.groups.get(req.group_id)
        if group is None:
            error = None if req.generation < 0 else E.illegal_generation
        else:
            error = group.validate_txn_offset_commit(req.member_id, req.group_instance_id, req.generation,
                                                     [(t, p) for t, p, *_ in req.offsets])
        if error is not None:
            out.reply = {(t, p): error for t, p, *_ in req.offsets}
            return out
        reply, accepted = {}, []
        self._records(out, req, now.wall, -1, reply, accepted, (req.producer_id, req.producer_epoch))
        return _answered_when_written(out, reply, accepted)

    # =========================================================================================
    # OffsetFetch (spec §8)

    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
              last_committed: dict | None = None,
              require_stable: bool = False) -> list[tuple[str, int, OffsetCommitValue | ErrorCode | None]]:
        """Committed offsets of the group: for the given partitions (None where nothing is
        committed), or every committed offset when `topics` is None. Read at the last committed
        offset, as Kafka does: `last_committed` holds the durable values of keys that writes still
        in flight have changed (`Runner.last_committed`). With `require_stable` (OffsetFetch v7+) a
        partition with offsets of an open transaction answers UNSTABLE_OFFSET_COMMIT (the value)."""
        committed = {} if group_id not in self.groups else self.offsets.get(group_id, {})
        if last_committed:
            committed = dict(committed)
            for key, value in last_committed.items():
                if isinstance(key, OffsetCommitKey) and key.group == group_id:
                    if value is None:
                        committed.pop((key.topic, key.partition), None)
                    else:
                        committed[(key.topic, key.partition)] = value
        if require_stable and self.pending.has_open(group_id):
            def stable(t: str, p: int) -> OffsetCommitValue | ErrorCode | None:
                if self.pending.has_pending(OffsetCommitKey(group_id, t, p)):
                    return E.unstable_offset_commit
                return committed.get((t, p))

            if topics is None:
                return [(t, p, stable(t, p)) for t, p in committed]
            return [(t, p, stable(t, p)) for t, partitions in topics for p in partitions]
        if topics is None:
            return [(t, p, v) for (t, p), v in committed.items()]
        return [(t, p, committed.get((t, p))) for t, partitions in topics for p in partitions]

    # =========================================================================================
    # OffsetDelete (spec §9.4)

    def delete(self, req: OffsetDeleteRequest) -> Outcome:
        """Reply: {"error_code", "partitions": {(topic, partition): error}}."""
        out = Outcome()
        group = self.groups.get(req.group_id)
        error = E.group_id_not_found if group is None else group.validate_offset_delete()
        if error is not None:
            out.reply = {"error_code": error, "partitions": {}}
            return out
        committed = self.offsets.get(req.group_id, {})
        partitions = {}
        for topic, parts in req.topics:
            error = E.group_subscribed_to_topic if group.is_subscribed_to(topic) else E.none
            for p in parts:
                partitions[(topic, p)] = error
                if error is E.none and ((topic, p) in committed
                                        or self.pending.has_pending(OffsetCommitKey(req.group_id, topic, p))):
                    out.records.append(Record(OffsetCommitKey(req.group_id, topic, p), None))
        reply = {"error_code": E.none, "partitions": partitions}
        if not out.records:
            out.reply = reply
            return out

        def written(error: ErrorCode | None, at: Now) -> Outcome:
            if error is not None:
                return Outcome(reply={"error_code": error, "partitions": {}})
            return Outcome(reply=reply)

        out.after_write = written
        return out

    def tombstones(self, group_id: str) -> list[Record]:
        """A tombstone for every committed offset of the group and every pending one of its open
        transactions (DeleteGroups; one tombstone per partition, as Kafka's deleteAllOffsets)."""
        committed = self.offsets.get(group_id, {})
        out = [Record(OffsetCommitKey(group_id, t, p), None) for t, p in committed]
        if self.pending.has_open(group_id):
            keys = {k for k in self.pending.open_by_group[group_id] if (k.topic, k.partition) not in committed}
            out += [Record(k, None) for k in sorted(keys, key=lambda k: (k.topic, k.partition))]
        return out

    # =========================================================================================
    # Offset retention and group expiry (spec §11)

    def expire(self, now_wall: int, retention_ms: int) -> tuple[Outcome, int, int]:
        """Tombstones for expired offsets, and for groups left without any that the group type
        lets go (KIP-211). Also the counts: (offsets, groups)."""
        out = Outcome()
        expired_offsets = deleted_groups = 0
        for group_id, group in list(self.groups.items()):
            offsets = self.offsets.get(group_id, {})
            gone = [tp for tp, value in offsets.items() if _expired(group, tp[0], value, now_wall, retention_ms)]
            open_txns = self.pending.has_open(group_id)
            if open_txns:  # an offset with pending ones stays, and so does the group (Kafka's cleanupExpiredOffsets)
                gone = [(t, p) for t, p in gone if not self.pending.has_pending(OffsetCommitKey(group_id, t, p))]
            out.records.extend(Record(OffsetCommitKey(group_id, t, p), None) for t, p in gone)
            expired_offsets += len(gone)
            if len(gone) == len(offsets) and not open_txns and group.expirable():
                out.records += group.delete_records()
                deleted_groups += 1
        return out, expired_offsets, deleted_groups


def _expired(group: Group, topic: str, value: OffsetCommitValue, now: int, retention_ms: int) -> bool:
    commit, expire = value.timestamps()
    base = group.offset_expiry_base(topic, commit)
    if base is None:
        return False
    if expire != -1:  # an explicit retention (OffsetCommit v2–v4)
        return now >= expire
    return now - base >= retention_ms


def _answered_when_written(out: Outcome, reply: dict, accepted: list) -> Outcome:
    """A commit's outcome: `reply` at once when no record is written, else once its records are
    durable, with the write's error on every partition that was `accepted`."""
    if not out.records:
        out.reply = reply
        return out

    def written(error: ErrorCode | None, at: Now) -> Outcome:
        if error is not None:
            for tp in accepted:
                reply[tp] = error
        return Outcome(reply=reply)

    out.after_write = written
    out.too_large = E.invalid_commit_offset_size
    return out
