"""What every group operation hands back to the runner (coordinator/core/runner.py): records to append
(applied when appended), the reply (released once they are durable), parked replies now due, and
deadlines to arm."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from groupd.protocol import ErrorCode
from groupd.storage.records import Record

from .clock import Now

# A timer: (key, deadline in monotonic ms). Keys: ("session", group, member) for members and pending member
# ids, ("join", group), ("sync", group); a timer fires the partition's `on_timer(key)`.
Timer = tuple[tuple, int]


@dataclasses.dataclass(frozen=True, slots=True)
class Effect:
    """Work the shell carries out off the request's path (a later loop turn, or a worker thread when
    `weight` says it is big): `work()` is pure and reads only what it was given; its result comes
    back into the core as the operation `done(result, error, now)`, whose outcome the runner carries
    out like any other (records applied when appended). Kafka's `CoordinatorExecutor`."""

    key: tuple  # what it is for, e.g. ("consumer-regex", group): for logs and tests
    work: Callable[[], Any]
    done: Callable[[Any, BaseException | None, Now], "Outcome"]
    weight: int = 0  # a rough count of the steps `work` takes


@dataclasses.dataclass(slots=True)
class Outcome:
    reply: Any = None  # the reply to the request itself; sent after `records` are durable
    records: list[Record] = dataclasses.field(default_factory=list)
    released: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)  # (ticket, reply)
    timers: list[Timer] = dataclasses.field(default_factory=list)
    effects: list[Effect] = dataclasses.field(default_factory=list)  # work to run after this outcome
    # A continuation once `records` are durable (error None) or failed (the mapped error; the
    # runner has already reverted them): reactions such as releasing parked syncs, never undo.
    after_write: Callable[[ErrorCode | None, Now], Outcome] | None = None
    # what a write too large for the log (or that cannot be encoded) answers; Kafka maps it per
    # API: UNKNOWN_SERVER_ERROR for group metadata, INVALID_COMMIT_OFFSET_SIZE for offset commits
    too_large: ErrorCode = ErrorCode.unknown_server_error


def reply_when_written(out: Outcome, reply: Any, on_error: Callable[[ErrorCode], Any]) -> None:
    """Answer `reply` once `out`'s records are durable, `on_error(error)` if they failed — after the
    continuation `out` already has (a conversion's follow-up, say)."""
    then = out.after_write

    def written(error: ErrorCode | None, at: Now) -> Outcome:
        follow = then(error, at) if then is not None else Outcome()
        follow.reply = reply if error is None else on_error(error)
        return follow

    out.reply, out.after_write = None, written
