"""Log lines that clients or the OS can cause in bulk (bad frames, EMFILE): at most N per interval,
then one line saying how many were suppressed. The metrics beside them still count every event."""

from __future__ import annotations

import logging
import time


class LimitedLog:
    __slots__ = ("_log", "_what", "_per_interval", "_interval_s", "_window_start", "_count", "_suppressed")

    def __init__(self, log: logging.Logger, what: str, per_interval: int = 20, interval_s: float = 10.0) -> None:
        self._log = log
        self._what = what  # names the suppressed lines in the summary
        self._per_interval = per_interval
        self._interval_s = interval_s
        self._window_start = float("-inf")
        self._count = 0
        self._suppressed = 0

    def log(self, level: int, msg: str, *args) -> None:
        now = time.monotonic()
        if now - self._window_start >= self._interval_s:
            self.flush()
            self._window_start, self._count = now, 0
        if self._count < self._per_interval:
            self._count += 1
            self._log.log(level, msg, *args)
        else:
            self._suppressed += 1

    def flush(self) -> None:
        """Say how many lines were suppressed since the last summary (called when a window ends,
        and by the owner's periodic check so a burst followed by silence is still reported)."""
        if self._suppressed:
            self._log.warning("suppressed %d %s lines in the last %.0f s", self._suppressed, self._what,
                              self._interval_s)
            self._suppressed = 0

    def tick(self) -> None:
        """flush() once the current window is over: for a periodic timer."""
        if time.monotonic() - self._window_start >= self._interval_s:
            self.flush()
