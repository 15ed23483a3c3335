"""When a data partition's active segment rolls by time (Kafka's `LogSegment.shouldRoll` with
`segment.ms` and `segment.jitter.ms`). Pure: the time and the randomness come in.

Kafka measures a segment's age from its first batch's max timestamp (`rollingBasedTimestamp`) to the
largest timestamp of the batches being appended, or, when that first batch has no timestamp, from
the segment's creation to the wall clock. Each segment draws its own jitter when it is created, so
that many partitions created together do not all roll at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable


def random_jitter(segment_ms: int, jitter_ms: int, draw: Callable[[int], int] = random.randrange) -> int:
    """A segment's roll jitter (Kafka's `LogConfig.randomSegmentJitter`): 0 without `segment.jitter.ms`,
    else a value below min(segment.jitter.ms, segment.ms)."""
    if jitter_ms <= 0:
        return 0
    return draw(min(jitter_ms, segment_ms))


def time_to_roll(first_ts: int, created_ms: int, incoming_max_ts: int, now_ms: int, segment_ms: int,
                 jitter_ms: int) -> bool:
    """Whether a non-empty active segment rolls before an append whose batches' largest timestamp is
    `incoming_max_ts`: its age (see the module) is beyond `segment_ms - jitter_ms`. `first_ts` -1: the
    first batch carries no timestamp."""
    waited = incoming_max_ts - first_ts if first_ts >= 0 else now_ms - created_ms
    return waited > segment_ms - jitter_ms
