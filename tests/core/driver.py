"""A fake clock and a test driver around one `GroupShard`: every `Outcome` goes through the same
`Runner` the server uses (coordinator/core/runner.py), with a fake log and fake timers plugged in, so
time, write failures and writes held in flight are under the test's control. No sockets, no sleeps,
no event loop.
"""

from __future__ import annotations

import itertools
from typing import Any

from groupd.coordinator.core.classic.group import EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup
from groupd.coordinator.core.classic.requests import HeartbeatRequest, JoinRequest, LeaveRequest, SyncRequest
from groupd.coordinator.core.clock import Now
from groupd.coordinator.core.partition import GroupSettings, GroupShard
from groupd.coordinator.core.requests import OffsetCommitRequest, OffsetDeleteRequest, TxnOffsetCommitRequest
from groupd.coordinator.core.runner import Runner
from groupd.protocol import ErrorCode
from groupd.storage.records import Record

E = ErrorCode
START = 1_000_000  # the fake wall clock starts here, so timestamps are never 0 by accident


class FakeClock:
    """Drives both clocks of `Now` from one hand-moved value (ms): the monotonic clock is `now`,
    the wall clock `now + wall_offset` (a test moves `wall_offset` to step the wall clock)."""

    def __init__(self, now: int = START, wall_offset: int = 0) -> None:
        self.now = now
        self.wall_offset = wall_offset

    def read(self) -> Now:
        return Now(self.now + self.wall_offset, self.now)


class _Handle:
    def __init__(self, driver: Driver, key: int) -> None:
        self._driver, self._key = driver, key

    def cancel(self) -> None:
        self._driver._scheduled.pop(self._key, None)


class Driver:
    """Runs shard operations at `clock.now`. Every reply, immediate or released later, lands in
    `replies[ticket]` (first answer wins, as a resolved future would); `answers` keeps every
    delivery in order, duplicates included."""

    def __init__(self, settings: GroupSettings | None = None, clock: FakeClock | None = None) -> None:
        self.settings = settings or GroupSettings()
        self.clock = clock or FakeClock()
        self._ids = itertools.count(1)
        self.replies: dict[Any, Any] = {}
        self.events: list = []  # every event the shard reported, in order
        self.answers: list[tuple[Any, Any]] = []
        self._scheduled: dict[int, tuple[int, Any]] = {}  # seq → (deadline, fire): the fake timers
        self._seq = itertools.count()
        self.written: list[Record] = []  # every record durably written, in log order
        self._fail_next: ErrorCode | None = None
        self.holding = False
        self._held: list[tuple[list[Record], Any, Any]] = []
        self._tickets: set = set()
        self._internal = itertools.count()
        self.effects: list[tuple[Any, Any]] = []  # (effect, completed) submitted, not yet run
        self.shard = self.new_shard()
        self.replayable = True  # False once a test applies records that were never written

    def new_shard(self) -> GroupShard:
        return GroupShard(0, self.settings, lambda prefix: f"{prefix}-{next(self._ids)}")

    @property
    def shard(self) -> GroupShard:
        return self._shard

    @shard.setter
    def shard(self, shard: GroupShard) -> None:
        self.replayable = not hasattr(self, "_shard")
        self._shard = shard
        self.runner = Runner(shard, self, self._resolve, self.clock.read,
                             lambda: ("internal", next(self._internal)), self.events.extend)
        self.runner.log = self

    @property
    def now(self) -> int:
        return self.clock.now

    @property
    def timers(self) -> dict[tuple, int]:
        """Armed timers: key → deadline (one per key)."""
        return {key: deadline for key, (deadline, _) in self.runner.armed.items()}

    def group(self, group_id: str = "g") -> ClassicGroup:
        return self.shard.groups[group_id]

    # -- the fake log and timers the runner is plugged into -------------------------------------

    def fail_next_write(self, error: ErrorCode) -> None:
        """The next append fails with `error` (already mapped, as the writer hands it over)."""
        self._fail_next = error

    def hold_writes(self) -> None:
        """Appends stay in flight until `finish_writes`."""
        self.holding = True

    def finish_writes(self, error: ErrorCode | None = None) -> None:
        """Complete every held append, in order, with success or `error` (a failure fails every
        append behind it too, as the writer does)."""
        self.holding = False
        held, self._held = self._held, []
        for records, completed, _ in held:
            if error is None:
                self.written.extend(records)
            completed(error)

    def time_out_writes(self) -> None:
        """Every held append outlasts the commit timeout (it stays held: it may still land)."""
        for _, _, timed_out in self._held:
            timed_out()

    @property
    def writes_in_flight(self) -> int:
        return len(self._held)

    def append(self, records: list[Record], completed, timed_out) -> None:
        if self.holding:
            self._held.append((records, completed, timed_out))
            return
        error, self._fail_next = self._fail_next, None
        if error is None:
            self.written.extend(records)
        completed(error)

    def call_at(self, deadline: int, fire) -> _Handle:
        key = next(self._seq)
        self._scheduled[key] = (deadline, fire)
        return _Handle(self, key)

    def submit(self, effect, completed) -> None:
        self.effects.append((effect, completed))

    def run_effects(self) -> int:
        """Run every submitted effect (and those they submit) to completion, in order; how many ran."""
        ran = 0
        while self.effects:
            effect, completed = self.effects.pop(0)
            try:
                result = effect.work()
            except Exception as e:
                completed(None, e)
            else:
                completed(result, None)
            ran += 1
        return ran

    def _resolve(self, ticket: Any, reply: Any) -> None:
        self.answers.append((ticket, reply))
        self.replies.setdefault(ticket, reply)

    def _op(self, ticket: Any, operation) -> Any:
        if ticket is None:
            ticket = ("internal", next(self._internal))
        assert ticket not in self._tickets, f"ticket {ticket!r} used twice"
        self._tickets.add(ticket)
        result = self.runner.run(operation(ticket), ticket)
        if result is not ticket and result is not None:
            self._resolve(ticket, result)
        return self.replies.get(ticket)

    def answers_to(self, ticket: Any) -> list:
        return [reply for t, reply in self.answers if t == ticket]

    # -- time -----------------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Move the clock by `ms`, firing every timer that falls due, in deadline order, each at
        its own deadline."""
        target = self.clock.now + ms
        while True:
            due = [(deadline, seq) for seq, (deadline, _) in self._scheduled.items() if deadline <= target]
            if not due:
                break
            deadline, seq = min(due)
            _, fire = self._scheduled.pop(seq)
            self.clock.now = max(self.clock.now, deadline)
            fire()
        self.clock.now = target

    def advance_until(self, condition, limit_ms: int = 3_600_000) -> None:
        """Fire timers one deadline at a time until `condition()` holds."""
        end = self.clock.now + limit_ms
        while not condition():
            assert self._scheduled, "nothing armed and the condition does not hold"
            step = min(deadline for deadline, _ in self._scheduled.values()) - self.clock.now
            assert self.clock.now + step <= end, "condition did not hold within the limit"
            self.advance(max(step, 0))

    # -- operations -----------------------------------------------------------------------------

    def join(self, group_id: str, member_id: str = "", *, ticket: Any, instance_id: str | None = None,
             version: int = 9, session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 20_000,
             protocol_type: str = "consumer", protocols=(("range", b"range-meta"),), client_id: str = "client",
             client_host: str = "/127.0.0.1", reason: str | None = None) -> dict | None:
        req = JoinRequest(group_id, member_id, instance_id, session_timeout_ms, rebalance_timeout_ms,
                          protocol_type, tuple(protocols), version, client_id, client_host, reason)
        return self._op(ticket, lambda t: self.shard.join(req, t, self.clock.read()))

    def sync(self, group_id: str, member_id: str, generation: int, *, ticket: Any,
             instance_id: str | None = None, assignments: dict[str, bytes] | None = None,
             protocol_type: str | None = None, protocol_name: str | None = None) -> dict | None:
        req = SyncRequest(group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments or {})
        return self._op(ticket, lambda t: self.shard.sync(req, t, self.clock.read()))

    def heartbeat(self, group_id: str, member_id: str, generation: int, instance_id: str | None = None) -> ErrorCode:
        error = self.shard.heartbeat(HeartbeatRequest(group_id, generation, member_id, instance_id), self.clock.read())
        self.runner.flush_events()
        return error

    def leave(self, group_id: str, *identities) -> dict | None:
        """Identities are member ids or (member id, instance id) pairs."""
        ids = [(i, None) if isinstance(i, str) else tuple(i) for i in identities]
        return self._op(None, lambda t: self.shard.leave(LeaveRequest(group_id, ids), self.clock.read()))

    def commit(self, group_id: str, offsets, *, generation: int = -1, member_id: str = "",
               instance_id: str | None = None, retention_ms: int = -1, version: int = 9) -> dict | None:
        """Offsets are (topic, partition, offset[, leader epoch[, metadata]])."""
        rows = [tuple(o) + (-1, None)[len(o) - 3:] for o in offsets]
        req = OffsetCommitRequest(group_id, generation, member_id, instance_id, retention_ms, rows, version)
        return self._op(None, lambda t: self.shard.commit(req, self.clock.read()))

    def txn_commit(self, group_id: str, offsets, *, producer_id: int = 1000, producer_epoch: int = 0,
                   generation: int = -1, member_id: str = "", instance_id: str | None = None,
                   version: int = 3) -> dict | None:
        """A TxnOffsetCommit; offsets are (topic, partition, offset[, leader epoch[, metadata]])."""
        rows = [tuple(o) + (-1, None)[len(o) - 3:] for o in offsets]
        req = TxnOffsetCommitRequest(group_id, "txn", producer_id, producer_epoch, generation, member_id,
                                     instance_id, rows, version)
        return self._op(None, lambda t: self.shard.txn_commit(req, self.clock.read()))

    def end_txn(self, commit: bool, *, producer_id: int = 1000, producer_epoch: int = 0,
                coordinator_epoch: int = 0) -> ErrorCode | None:
        """The transaction's COMMIT (or ABORT) marker on this partition."""
        return self._op(None, lambda t: self.shard.complete_transaction(producer_id, producer_epoch, commit,
                                                                         coordinator_epoch))

    def consumer_heartbeat(self, req, topics) -> dict | None:
        """A ConsumerGroupHeartbeat (groupd.coordinator.core.consumer.machine) against the topics image `topics`."""
        return self._op(None, lambda t: self.shard.consumer_heartbeat(req, topics, self.clock.read()))

    def share_heartbeat(self, req, topics) -> dict | None:
        """A ShareGroupHeartbeat (groupd.coordinator.core.share.machine) against the topics image `topics`."""
        return self._op(None, lambda t: self.shard.share_heartbeat(req, topics, self.clock.read()))

    def streams_heartbeat(self, req, topics) -> dict | None:
        """A StreamsGroupHeartbeat (groupd.coordinator.core.streams.machine) against the topics image `topics`."""
        return self._op(None, lambda t: self.shard.streams_heartbeat(req, topics, self.clock.read()))

    def fetch(self, group_id: str, topics=None, require_stable: bool = False):
        return self.shard.fetch_offsets(group_id, topics, self.runner.last_committed(), require_stable)

    def describe(self, group_id: str) -> dict | None:
        return self.shard.describe(group_id)

    def delete_group(self, group_id: str) -> ErrorCode | None:
        return self._op(None, lambda t: self.shard.delete_group(group_id))

    def force_rebalance(self, group_id: str) -> ErrorCode | None:
        return self._op(None, lambda t: self.shard.force_rebalance(group_id, self.clock.read()))

    def expire_members(self, group_id: str, member_ids: list[str] | None = None) -> ErrorCode | None:
        return self._op(None, lambda t: self.shard.expire_members(group_id, member_ids, self.clock.read()))

    def delete_offsets(self, group_id: str, topics) -> dict | None:
        return self._op(None, lambda t: self.shard.delete_offsets(OffsetDeleteRequest(group_id, topics)))

    # -- re-apply and compare -------------------------------------------------------------------

    def replay(self) -> GroupShard:
        """A fresh shard loaded from every record written so far."""
        fresh = self.new_shard()
        for record in self.written:
            fresh.apply(record)
        fresh.on_loaded(self.clock.read())
        return fresh

    def assert_replay_matches(self) -> None:
        """The log alone rebuilds what the live shard holds durably: every Stable or Empty group
        on its durable fields, and every committed offset."""
        fresh = self.replay()
        assert set(fresh.groups) <= set(self.shard.groups), "the log holds a group the shard has not"
        for group_id, live in self.shard.groups.items():
            if live.state not in (STABLE, EMPTY):
                continue
            assert group_id in fresh.groups, f"group {group_id} is not in the log"
            assert durable(fresh.groups[group_id]) == durable(live), f"group {group_id} differs after replay"
        assert fresh.offsets == self.shard.offsets
        assert pending_offsets(fresh) == pending_offsets(self.shard), "pending transactional offsets differ"
        assert fresh.pending.open_by_group == self.shard.pending.open_by_group


def pending_offsets(shard: GroupShard) -> dict:
    """Each producer's pending transactional offsets (without the sequence numbers that order them)."""
    return {pid: {key: value for key, (value, _) in entries.items()}
            for pid, entries in shard.pending.by_producer.items() if entries}


def durable(group: ClassicGroup) -> dict:
    return {"state": group.state, "generation": group.generation, "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name, "leader": group.leader_id,
            "members": {m.member_id: (m.group_instance_id, m.assignment) for m in group.members.values()}}


# -- scenario builders ------------------------------------------------------------------------------

def new_member(d: Driver, group_id: str, name: str, *, ticket: Any = None, **join) -> str:
    """A dynamic v4+ member joins with an empty id, is told MEMBER_ID_REQUIRED and re-joins with
    the id it was given; that second join is parked under `ticket` (default "join-<name>")."""
    ticket = ticket or f"join-{name}"
    first = d.join(group_id, ticket=f"{ticket}:member-id", client_id=name, **join)
    assert first["error_code"] == E.member_id_required, first
    d.join(group_id, first["member_id"], ticket=ticket, client_id=name, **join)
    return first["member_id"]


def static_member(d: Driver, group_id: str, name: str, *, ticket: Any = None, **join) -> str:
    """A static member (instance id "<name>-instance") joins with an empty id; parked under `ticket`."""
    instance = f"{name}-instance"
    d.join(group_id, ticket=ticket or f"join-{name}", client_id=name, instance_id=instance, **join)
    return d.group(group_id).static_members[instance]


def assignment_of(name: str) -> bytes:
    return f"assignment-of-{name}".encode()


def completing_group(d: Driver, group_id: str = "g", names=("a", "b"), *, static: bool = False,
                     **join) -> dict[str, str]:
    """Members join an Empty group together; the initial delay runs out → CompletingRebalance,
    generation 1, join replies released (tickets "join-<name>"). Returns name → member id."""
    add = static_member if static else new_member
    ids = {name: add(d, group_id, name, **join) for name in names}
    d.advance_until(lambda: d.group(group_id).state is not PREPARING_REBALANCE)
    return ids


def stable_group(d: Driver, group_id: str = "g", names=("a", "b"), *, static: bool = False,
                 **join) -> dict[str, str]:
    """`completing_group`, then the leader and every follower send SyncGroup (tickets
    "sync-<name>-1"); the leader gives each member `assignment_of(name)` → Stable, generation 1."""
    ids = completing_group(d, group_id, names, static=static, **join)
    group = d.group(group_id)
    by_id = {member_id: name for name, member_id in ids.items()}
    leader = by_id[group.leader_id]
    d.sync(group_id, ids[leader], group.generation, ticket=f"sync-{leader}-1",
           assignments={member_id: assignment_of(name) for name, member_id in ids.items()})
    for name in names:
        if name != leader:
            d.sync(group_id, ids[name], group.generation, ticket=f"sync-{name}-1")
    assert group.state is STABLE
    return ids


def preparing_group(d: Driver, group_id: str = "g", names=("a", "b"), **join) -> dict[str, str]:
    """`stable_group`, then the leader (the first name) re-joins with unchanged metadata (ticket
    "rejoin-<leader>") → PreparingRebalance at generation 1, the followers not yet re-joined."""
    ids = stable_group(d, group_id, names, **join)
    leader = names[0]
    assert d.group(group_id).leader_id == ids[leader]
    d.join(group_id, ids[leader], ticket=f"rejoin-{leader}", client_id=leader, **join)
    assert d.group(group_id).state is PREPARING_REBALANCE
    return ids


def empty_group(d: Driver, group_id: str = "g", **join) -> dict[str, str]:
    """A consumer group whose only member "a" reached generation 1 and then left → Empty,
    generation 2."""
    ids = stable_group(d, group_id, ("a",), **join)
    d.leave(group_id, ids["a"])
    assert d.group(group_id).state is EMPTY
    return ids
