"""The shell's clock port: the system's wall and monotonic clocks, in ms (coordinator/clock.py)."""

from __future__ import annotations

import time

from .clock import Now


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def mono_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def now() -> Now:
    return Now(time.time_ns() // 1_000_000, time.monotonic_ns() // 1_000_000)
