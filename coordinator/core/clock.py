"""Time as the core takes it: `Now(wall, mono)`. Deadlines and durations use the monotonic clock
(an NTP step must not expire every member at once or delay every expiry); the timestamps Kafka's
records store (commit, expire, state change) use the wall clock. The shell reads the system clock
(coordinator/system_clock.py); the unit tests' FakeClock drives both."""

from __future__ import annotations


class Now:
    __slots__ = ("wall", "mono")  # a plain class: built once per request, on the heartbeat's hot path

    def __init__(self, wall: int, mono: int) -> None:
        self.wall = wall  # ms since the epoch: stored in records
        self.mono = mono  # ms on a monotonic clock: deadlines and durations

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Now) and (self.wall, self.mono) == (other.wall, other.mono)

    def __repr__(self) -> str:
        return f"Now(wall={self.wall}, mono={self.mono})"
