"""The in-memory records plane: one `TopicPartitionLog` per (topic id, partition), producer ids for
idempotent producers, and watchers that a held Fetch registers to be woken by an append.

Sans-IO like the rest of the package: the time comes in as an argument, and a watcher is a plain
callback that the append calls; the asyncio side (holding a Fetch for its max wait) lives in
`coordinator/apis/fetch.py`. Logs are keyed by topic id, so a topic deleted and created again
starts empty; logs of topics that no longer exist are dropped when a new log is created.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable

from protocol import ErrorCode

from .batches import BatchError, split
from .log import TopicPartitionLog

Key = tuple  # (topic id, partition)

TRANSACTIONS_UNSUPPORTED = ("groupd's records plane does not support transactions "
                            "(idempotent producers are supported)")


@dataclasses.dataclass(frozen=True, slots=True)
class Appended:
    """The outcome of one partition of a Produce request."""

    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None


class MemoryPlane:
    def __init__(self, retention_bytes: int, retention_ms: int, message_max_bytes: int) -> None:
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms
        self.message_max_bytes = message_max_bytes
        self._logs: dict[Key, TopicPartitionLog] = {}
        self._watchers: dict[Key, dict[int, Callable[[], None]]] = {}
        self._tokens = itertools.count(1)
        self._watching: dict[int, tuple[Key, ...]] = {}

    # -- logs ----------------------------------------------------------------------------------

    def peek(self, key: Key) -> TopicPartitionLog | None:
        return self._logs.get(key)

    def log(self, key: Key, live_topic_ids: Callable[[], Iterable] | None = None) -> TopicPartitionLog:
        log = self._logs.get(key)
        if log is None:
            if live_topic_ids is not None:
                self.forget_topics_except(set(live_topic_ids()))
            log = self._logs[key] = TopicPartitionLog(self.retention_bytes, self.retention_ms)
        return log

    def forget_topics_except(self, live: set) -> None:
        for key in [k for k in self._logs if k[0] not in live]:
            del self._logs[key]

    def __len__(self) -> int:
        return len(self._logs)

    # -- produce -------------------------------------------------------------------------------

    def append(self, key: Key, records: bytes | None, produce_version: int, now_ms: int,
               live_topic_ids: Callable[[], Iterable] | None = None) -> Appended:
        """Validate and append one partition's batches; wakes the fetches watching it."""
        try:
            batches = split(records, produce_version, self.message_max_bytes)
        except BatchError as e:
            return Appended(e.error, message=e.message)
        if any(b.transactional for b in batches):
            return Appended(ErrorCode.unsupported_for_message_format, message=TRANSACTIONS_UNSUPPORTED)
        log = self.log(key, live_topic_ids)
        log.enforce_retention(now_ms)
        first = None
        for batch in batches:
            try:
                duplicate_of = log.check_producer(batch)
            except BatchError as e:
                if first is None:
                    return Appended(e.error, message=e.message)
                break  # earlier batches of this request are in; report them
            base = duplicate_of if duplicate_of is not None else log.append(batch, now_ms)
            if first is None:
                first = base
        self._wake(key)
        return Appended(ErrorCode.none, first, log.log_start)

    # -- watchers ------------------------------------------------------------------------------

    def watch(self, keys: Iterable[Key], callback: Callable[[], None]) -> int:
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

    def _wake(self, key: Key) -> None:
        watchers = self._watchers.get(key)
        if watchers:
            for callback in list(watchers.values()):
                callback()


class ProducerIds:
    """Producer ids for InitProducerId: without a transactional id Kafka hands out a fresh id
    with epoch 0 on every request (it never bumps the epoch of an idempotent producer's id)."""

    def __init__(self, first: int = 0) -> None:
        self._next = itertools.count(first)

    def allocate(self) -> int:
        return next(self._next)
