"""The share-partition state machine (KIP-932, share-groups spec §3.1–3.8): for one (share group,
topic id, partition) the start offset (SPSO), the in-flight offsets with their state, delivery count,
owner and lock deadline; acquisition, acknowledgement, lock expiry, the delivery-count limit and the
SPSO advance. Sans-IO: `now` is a monotonic time in ms, passed in.

Offsets are tracked one by one (franz-go kfake's model, which every share client accepts) rather than
in Kafka's log-batch-aligned ranges; the window [SPSO, end) is at most `max_locks` offsets long, so
the dict stays small. Offsets in the window without an entry are AVAILABLE with delivery count 0 (after
a restart: they were ACQUIRED, which is never persisted)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from groupd.coordinator.core.group_config import SHARE_DELIVERY_COUNT_LIMIT, SHARE_PARTITION_MAX_RECORD_LOCKS
from groupd.protocol import ErrorCode

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_TARGET = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, RELEASE: AVAILABLE, REJECT: ARCHIVED, RENEW: ACQUIRED}
TERMINAL = (ACKNOWLEDGED, ARCHIVED)


@dataclasses.dataclass(slots=True)
class InFlight:
    state: int
    delivery_count: int
    member: str | None = None
    deadline: int = 0  # ms, monotonic; meaningful while ACQUIRED


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    lock_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_limit: int = 5  # group.share.delivery.count.limit
    max_locks: int = 2000  # group.share.partition.max.record.locks

    def for_group(self, overrides: Mapping[str, int | str]) -> Limits:
        """These limits under a group's share.delivery.count.limit and share.partition.max.record.locks
        (Kafka 4.3: read at each use, so a change applies to share-partitions already loaded)."""
        delivery = overrides.get(SHARE_DELIVERY_COUNT_LIMIT, self.delivery_limit)
        locks = overrides.get(SHARE_PARTITION_MAX_RECORD_LOCKS, self.max_locks)
        if delivery == self.delivery_limit and locks == self.max_locks:
            return self
        return Limits(self.lock_ms, int(delivery), int(locks))


def _ignore(event: str, count: int) -> None:
    pass


class SharePartition:
    def __init__(self, start_offset: int, limits: Limits = Limits(), state_epoch: int = 0) -> None:
        self.start = start_offset  # SPSO
        self.end = start_offset  # one past the highest tracked offset (SPEO + 1)
        self.limits = limits
        self.state_epoch = state_epoch
        self.offsets: dict[int, InFlight] = {}
        # told of what the records' owners do not see: ("lock_timeout", n) offsets whose lock ran out,
        # ("delivery_limit", n) offsets archived at the delivery-count limit (the runtime counts them)
        self.observe = _ignore

    # -- reading ---------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first AVAILABLE offset of the window, else the first offset past it."""
        for offset in range(self.start, self.end):
            rec = self.offsets.get(offset)
            if rec is None or rec.state == AVAILABLE:
                return offset
        return self.end

    def can_acquire(self, log_end: int) -> bool:
        """Whether a fetch could acquire anything now (records available in the window, or new ones
        below `log_end` within the lock limit)."""
        nxt = self.next_fetch_offset()
        return nxt < self.end or (nxt < log_end and nxt - self.start < self.limits.max_locks)

    def in_flight(self) -> int:
        return sum(1 for r in self.offsets.values() if r.state == ACQUIRED)

    # -- transitions ----------------------------------------------------------------------------------

    def acquire(self, member: str, first: int, last: int, max_records: int, now: int,
                lock_ms: int | None = None, undeliverable: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int, int]]:
        """Acquire for `member` the AVAILABLE offsets of [first, last] (the offsets the log read
        covers), at most `max_records` of them, new offsets only within the lock limit, locked for
        `lock_ms` (the group's share.record.lock.duration.ms; default the limits'); the acquired
        ranges as (first, last, delivery count), adjacent offsets with equal counts merged. Offsets
        in an `undeliverable` range (first, last) are ARCHIVED instead when reached (transaction
        markers; aborted transactions under read_committed), never delivered."""
        self.expire(now)
        got: list[tuple[int, int, int]] = []
        taken = 0
        deadline = now + (self.limits.lock_ms if lock_ms is None else lock_ms)
        hidden, i, archived = sorted(undeliverable), 0, False
        for offset in range(max(first, self.start), last + 1):
            if taken >= max_records:
                break
            if offset >= self.end:
                if offset - self.start >= self.limits.max_locks:
                    break
                self.end = offset + 1
            rec = self.offsets.get(offset)
            if rec is None:
                rec = self.offsets[offset] = InFlight(AVAILABLE, 0)
            if rec.state != AVAILABLE:
                continue
            while i < len(hidden) and hidden[i][1] < offset:
                i += 1
            if i < len(hidden) and hidden[i][0] <= offset:
                rec.state, archived = ARCHIVED, True
                continue
            rec.state, rec.member, rec.deadline = ACQUIRED, member, deadline
            rec.delivery_count += 1
            taken += 1
            if got and got[-1][1] == offset - 1 and got[-1][2] == rec.delivery_count:
                got[-1] = (got[-1][0], offset, rec.delivery_count)
            else:
                got.append((offset, offset, rec.delivery_count))
        if archived:
            self._advance()
        return got

    def acknowledge(self, member: str, batches: Iterable[tuple[int, int, tuple[int, ...]]],
                    now: int, lock_ms: int | None = None) -> ErrorCode:
        """Apply acknowledgement batches (first, last, types: one type, or one per offset) all or
        nothing (§3.6): offsets below the SPSO are ignored; every other one must be ACQUIRED by
        `member` with its lock still held, else INVALID_RECORD_STATE and nothing changes. RENEW
        (KIP-1222) keeps the offset ACQUIRED with a fresh full-length lock."""
        self.expire(now)
        changes: list[tuple[InFlight, int]] = []
        for first, last, types in batches:
            # offsets below the SPSO are ignored without a look: a batch from offset 0 must not walk them
            for offset in range(max(first, self.start), last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                if offset >= self.end:
                    return ErrorCode.invalid_request  # past the tracked offsets
                rec = self.offsets.get(offset)
                if rec is None or rec.state != ACQUIRED or rec.member != member:
                    return ErrorCode.invalid_record_state
                changes.append((rec, _TARGET[kind]))
        for rec, target in changes:
            if target == ACQUIRED:
                rec.deadline = now + (self.limits.lock_ms if lock_ms is None else lock_ms)
            else:
                self._settle(rec, target)
        self._advance()
        return ErrorCode.none

    def release_member(self, member: str, now: int) -> bool:
        """Every offset `member` holds goes back (session closed or its connection lost)."""
        changed = False
        for rec in self.offsets.values():
            if rec.state == ACQUIRED and rec.member == member:
                self._settle(rec, AVAILABLE)
                changed = True
        self._advance()
        return changed

    def expire(self, now: int) -> bool:
        """Locks past their deadline: the offsets return to AVAILABLE (ARCHIVED at the limit)."""
        expired = 0
        for rec in self.offsets.values():
            if rec.state == ACQUIRED and rec.deadline <= now:
                self._settle(rec, AVAILABLE)
                expired += 1
        if expired:
            self.observe("lock_timeout", expired)
            self._advance()
        return expired > 0

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline for r in self.offsets.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def move_start_to(self, log_start: int) -> None:
        """The log start passed the SPSO (retention, DeleteRecords): what is below it is gone;
        ACQUIRED offsets there are archived when their lock ends (acknowledgements of them ignored)."""
        if log_start <= self.start:
            return
        for offset in [o for o in self.offsets if o < log_start and self.offsets[o].state != ACQUIRED]:
            del self.offsets[offset]
        self.start = log_start
        self.end = max(self.end, log_start)
        self._advance()

    def _settle(self, rec: InFlight, target: int) -> None:
        if target == AVAILABLE and rec.delivery_count >= self.limits.delivery_limit:
            target = ARCHIVED
            self.observe("delivery_limit", 1)
        rec.state, rec.member, rec.deadline = target, None, 0

    def _advance(self) -> None:
        """The SPSO moves over the terminal prefix; the offsets below it are forgotten."""
        while self.start < self.end:
            rec = self.offsets.get(self.start)
            if rec is None or rec.state not in TERMINAL:
                break
            del self.offsets[self.start]
            self.start += 1
        for offset in [o for o in self.offsets if o < self.start and self.offsets[o].state != ACQUIRED]:
            del self.offsets[offset]

    def copy(self) -> SharePartition:
        """An independent copy (to put back when the state write of a change fails)."""
        other = SharePartition(self.start, self.limits, self.state_epoch)
        other.end, other.observe = self.end, self.observe
        other.offsets = {o: dataclasses.replace(r) for o, r in self.offsets.items()}
        return other

    # -- persistence ------------------------------------------------------------------------------

    def snapshot(self) -> tuple[int, int, list[tuple[int, int, int, int]]]:
        """(state epoch, SPSO, batches (first, last, state, delivery count)): what Kafka's
        ShareSnapshot holds. ACQUIRED is never written: such offsets are AVAILABLE with the count
        they had before (Kafka persists the count only with the next transition)."""
        batches: list[tuple[int, int, int, int]] = []
        for offset in sorted(self.offsets):
            if offset < self.start:
                continue
            rec = self.offsets[offset]
            if rec.state == ACQUIRED:
                state, count = AVAILABLE, rec.delivery_count - 1
            else:
                state, count = rec.state, rec.delivery_count
            if state == AVAILABLE and count == 0:
                continue
            if batches and batches[-1][1] == offset - 1 and batches[-1][2:] == (state, count):
                batches[-1] = (batches[-1][0], offset, state, count)
            else:
                batches.append((offset, offset, state, count))
        return self.state_epoch, self.start, batches

    @classmethod
    def restore(cls, state_epoch: int, start: int, batches: Iterable[tuple[int, int, int, int]],
                limits: Limits = Limits()) -> SharePartition:
        """A share-partition loaded from its snapshot: no owners, nothing ACQUIRED."""
        sp = cls(start, limits, state_epoch)
        for first, last, state, count in batches:
            for offset in range(max(first, start), last + 1):
                sp.offsets[offset] = InFlight(state, count)
                sp.end = max(sp.end, offset + 1)
        sp._advance()
        return sp
