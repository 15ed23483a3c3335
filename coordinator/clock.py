"""Time as the core takes it: `Now(wall, mono)`. Deadlines and durations use the monotonic clock
(an NTP step must not expire every member at once or delay every expiry); the timestamps Kafka's
records store (commit, expire, state change) use the wall clock. The shell reads the system clock
here; the unit tests' FakeClock drives both."""

from __future__ import annotations

from typing import NamedTuple


class Now(NamedTuple):
    wall: int  # ms since the epoch: stored in records
    mono: int  # ms on a monotonic clock: deadlines and durations
