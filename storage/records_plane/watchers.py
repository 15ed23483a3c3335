"""Held fetches waiting on partitions: a fetch registers a callback for the partitions it reads, an
append (memory plane) or a durable write (disk plane) wakes the callbacks of its partition. Sans-IO:
the asyncio side (the max wait) is the Fetch handler's."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable


class Watchers:
    def __init__(self) -> None:
        self._watchers: dict[tuple, dict[int, Callable[[], None]]] = {}
        self._tokens = itertools.count(1)
        self._watching: dict[int, tuple] = {}

    def watch(self, keys: Iterable[tuple], callback: Callable[[], None]) -> int:
        token = next(self._tokens)
        keys = tuple(keys)
        self._watching[token] = keys
        for key in keys:
            self._watchers.setdefault(key, {})[token] = callback
        return token

    def unwatch(self, token: int) -> None:
        for key in self._watching.pop(token, ()):
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(token, None)
                if not watchers:
                    del self._watchers[key]

    def _wake(self, key: tuple) -> None:
        watchers = self._watchers.get(key)
        if watchers:
            for callback in list(watchers.values()):
                callback()
