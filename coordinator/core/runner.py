"""The sans-IO runner of one offsets partition: carries out an `Outcome` (release parked replies, arm
deadlines, append its records *and apply them at once*), then on the write's completion releases the
reply or reverts. The asyncio runtime and the unit tests' driver both plug their log and timers in.

One mutation path, Kafka's model (`CoordinatorRuntime`): records are applied to memory when they
are appended, so the next request already sees them; the reply leaves only once they are durable; a
failed write reverts what its records applied (each `apply` hands back the record that undoes it)
and, as Kafka reverts to the last committed offset, every later in-flight write of the partition
too. A write that times out is answered with the error but stays applied: it may still land.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from groupd.protocol import ErrorCode
from groupd.storage.records import Record

TIMED_OUT = ErrorCode.coordinator_not_available  # REQUEST_TIMED_OUT, as a coordinator maps it


class LogPort(Protocol):
    def append(self, records: list[Record], completed: Callable[[ErrorCode | None], None],
               timed_out: Callable[[], None]) -> None:
        """Write `records`; call `completed(None)` once durable or `completed(error)` once failed
        (a failure fails every append queued behind it too), and `timed_out()` if the write takes
        longer than the commit timeout (`completed` still follows)."""


class TimerPort(Protocol):
    def call_at(self, deadline: int, fire: Callable[[], None]) -> Any:
        """Call `fire` at `deadline` (monotonic ms); returns a handle with `cancel()`."""


class EffectPort(Protocol):
    def submit(self, effect: Any, completed: Callable[[Any, BaseException | None], None]) -> None:
        """Run `effect.work()` later, off the current request's path, then `completed(result, error)`
        on the loop that owns the partition."""


class Applier(Protocol):
    events: list

    def apply(self, record: Record) -> list[Record]: ...

    def revert(self, undo: list[Record], error: ErrorCode) -> list[tuple[Any, Any]]: ...

    def on_timer(self, key: tuple, now: Any) -> Any: ...


@dataclasses.dataclass(eq=False, slots=True)
class Write:
    out: Any  # the Outcome whose records these are
    ticket: Any
    undo: list[Record]
    answered: bool = False


class Runner:
    def __init__(self, partition: Applier, timers: TimerPort | EffectPort, resolve: Callable[[Any, Any], None],
                 now: Callable[[], Any], new_ticket: Callable[[], Any], emit: Callable[[list], None]) -> None:
        self.partition = partition
        self.log: LogPort | None = None  # set once the partition is loaded
        self._timers = timers
        self._resolve = resolve  # (ticket, reply): first answer wins
        self._now = now
        self._new_ticket = new_ticket
        self._emit = emit  # the partition's typed events, to the shell
        self.armed: dict[tuple, tuple[int, Any]] = {}  # timer key → (deadline, handle): one per key
        # appended, not yet completed, in log order; a dict (insertion-ordered) so that finding and
        # removing the write that completes costs the same however many are in flight
        self.in_flight: dict[Write, None] = {}

    def run(self, out: Any, ticket: Any = None) -> Any:
        """Carry out `out`: its reply when ready now, else the ticket its reply will be resolved on."""
        for parked, reply in out.released:
            self._resolve(parked, reply)
        for key, deadline in out.timers:
            self.arm(key, deadline)
        for effect in out.effects:
            self._submit(effect)
        self.flush_events()
        if not out.records:
            return out.reply if out.reply is not None else ticket
        if ticket is None:
            ticket = self._new_ticket()
        apply = self.partition.apply
        undo: list[Record] = []
        for record in out.records:
            undo.extend(apply(record))
        write = Write(out, ticket, undo)
        self.in_flight[write] = None
        self.log.append(out.records, lambda error: self._completed(write, error), lambda: self._answer(write, TIMED_OUT))
        return ticket

    def _submit(self, effect: Any) -> None:
        self._timers.submit(effect, lambda result, error: self.run(effect.done(result, error, self._now())))

    def flush_events(self) -> None:
        events = self.partition.events
        if events:
            batch = events[:]
            events.clear()
            self._emit(batch)

    def last_committed(self) -> dict[Any, Any]:
        """For reads at the last committed offset (Kafka's OffsetFetch): each key that an in-flight
        write changed → its value before the oldest such write (None: absent)."""
        before: dict[Any, Any] = {}
        for write in self.in_flight:
            for record in write.undo:
                before.setdefault(record.key, record.value)
        return before

    def _completed(self, write: Write, error: ErrorCode | None) -> None:
        if write not in self.in_flight:
            return  # already reverted with an earlier write that failed
        if error is None:
            del self.in_flight[write]
            self._answer(write, None)
            return
        if error is ErrorCode.record_list_too_large:  # only this write's records: it was never queued
            error = write.out.too_large
        writes = list(self.in_flight)
        failed = writes[writes.index(write):]
        for w in failed:
            del self.in_flight[w]
        for w in reversed(failed):  # newest first: each undo restores what the one before it saw
            for parked, reply in self.partition.revert(w.undo, error):
                self._resolve(parked, reply)
        for w in failed:
            self._answer(w, error)
        self.flush_events()

    def abandon(self, error: ErrorCode) -> None:
        """Answer every write in flight with `error` now, as if the oldest had failed: the partition
        is being given up and must not acknowledge records that may land after the next owner loads."""
        if self.in_flight:
            self._completed(next(iter(self.in_flight)), error)

    def _answer(self, write: Write, error: ErrorCode | None) -> None:
        """Release the reply of `write` (or its mapped error), once; reactions that are not undo —
        release parked syncs, start a rebalance — run here as the outcome's continuation."""
        if write.answered:
            return
        write.answered = True
        out = write.out
        if out.after_write is not None:
            result = self.run(out.after_write(error, self._now()), write.ticket)
            if result is not write.ticket:
                self._resolve(write.ticket, result)
        if out.reply is not None:  # a reply given with the records (no-op if answered above)
            self._resolve(write.ticket, out.reply)

    # -- timers: lazy, one armed per key; the partition re-arms one that fires early ------------

    def arm(self, key: tuple, deadline: int) -> None:
        armed = self.armed.get(key)
        if armed is not None:
            if armed[0] <= deadline:
                return  # fires first and re-arms for the later deadline
            armed[1].cancel()
        self.armed[key] = (deadline, self._timers.call_at(deadline, lambda: self.fire(key)))

    def fire(self, key: tuple) -> None:
        self.armed.pop(key, None)
        self.run(self.partition.on_timer(key, self._now()))

    def cancel_timers(self) -> None:
        for _, handle in self.armed.values():
            handle.cancel()
        self.armed.clear()
