"""The shell's clock port: the system's wall and monotonic clocks, in ms (coordinator/core/clock.py)."""

from __future__ import annotations

from time import monotonic_ns, time_ns

from groupd.coordinator.core.clock import Now


def wall_ms() -> int:
    return time_ns() // 1_000_000


def mono_ms() -> int:
    return monotonic_ns() // 1_000_000


class _SystemNow(Now):
    """The wall clock is read when first asked for: a heartbeat only needs the monotonic one."""

    __slots__ = ("_wall",)

    def __init__(self, mono: int) -> None:
        self.mono = mono
        self._wall = None

    @property
    def wall(self) -> int:  # type: ignore[override]
        if self._wall is None:
            self._wall = time_ns() // 1_000_000
        return self._wall


def now() -> Now:
    return _SystemNow(monotonic_ns() // 1_000_000)
