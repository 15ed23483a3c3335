"""Lag in seconds (`groupd_consumergroup_group_lag_seconds`): how long the oldest record a group has
not consumed has waited, = now − the timestamp of the record at the committed offset.

Exact where this process holds the partition's records (the records plane of the data partition's
leader): the timestamp of the record at that offset, read from the one batch that holds it. The
answer is cached per (topic, partition, committed offset) from scrape to scrape, so a scrape reads
a batch only for a commit that moved; entries not used by a scrape are dropped.

Estimated otherwise (another worker leads the partition, or retention dropped the record) as
kafka-lag-exporter estimates every time lag: each scrape adds a point (log-end offset, time) to a
table per partition (at most `POINTS`, a point only when the log end moved, so a point says when
the log end first reached that offset); the time the committed offset was produced is
interpolated between the two points around it, or extrapolated from the first and last points
when it is older than the table; with fewer than two points there is no estimate (NaN, as
kafka-lag-exporter reports). Nothing here runs per request: only at scrape time.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

POINTS = 60  # kafka-lag-exporter's lookup-table-size default

TopicPartition = tuple[str, int]
RecordTime = Callable[[str, int, int], "int | None"]  # (topic, partition, offset) → timestamp ms or None


class TimeLag:
    """The state that lasts from one scrape to the next: exact timestamps and log-end tables."""

    def __init__(self, points: int = POINTS) -> None:
        self.points = points
        self._tables: dict[TopicPartition, deque[tuple[int, int]]] = {}
        self._exact: dict[tuple[str, int, int], int | None] = {}
        self._seen_tables: set[TopicPartition] = set()
        self._seen_exact: set[tuple[str, int, int]] = set()

    def observe_end(self, tp: TopicPartition, end: int, now_ms: int) -> None:
        """A scrape saw `end` as the partition's log end at `now_ms`."""
        self._seen_tables.add(tp)
        table = self._tables.get(tp)
        if table is None or (table and end < table[-1][0]):  # new, or the topic was created again
            table = self._tables[tp] = deque(maxlen=self.points)
        if not table or end > table[-1][0]:
            table.append((end, now_ms))

    def seconds(self, tp: TopicPartition, committed: int, end: int, now_ms: int,
                record_time: RecordTime | None) -> float:
        """Seconds the record at `committed` has waited; 0 when nothing is left to consume."""
        if committed >= end:
            return 0.0
        produced = None
        if record_time is not None:
            key = (tp[0], tp[1], committed)
            self._seen_exact.add(key)
            if key not in self._exact:
                self._exact[key] = record_time(tp[0], tp[1], committed)
            produced = self._exact[key]
        if produced is None:
            produced = self._estimate(tp, committed)
        return math.nan if produced is None else max(now_ms - produced, 0) / 1000

    def _estimate(self, tp: TopicPartition, offset: int) -> float | None:
        """When the log end went past `offset`, from the table (kafka-lag-exporter's lookup)."""
        table = self._tables.get(tp)
        if not table or len(table) < 2:
            return None
        after = next((i for i, (end, _) in enumerate(table) if end > offset), None)
        if after is None:
            return None  # not produced yet as far as the table knows
        (o0, t0), (o1, t1) = (table[after - 1], table[after]) if after > 0 else (table[0], table[-1])
        return t0 + (offset + 1 - o0) * (t1 - t0) / (o1 - o0)

    def end_scrape(self) -> None:
        """Forget what this scrape did not use (deleted topics, commits that moved on)."""
        self._tables = {tp: t for tp, t in self._tables.items() if tp in self._seen_tables}
        self._exact = {k: v for k, v in self._exact.items() if k in self._seen_exact}
        self._seen_tables, self._seen_exact = set(), set()
