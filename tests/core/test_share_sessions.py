"""Share sessions (coordinator/core/share/sessions.py): the partitions a ShareFetch adds and forgets."""

from __future__ import annotations

import uuid

from groupd.coordinator.core.share.sessions import ShareSessions
from groupd.protocol import ErrorCode

T = uuid.UUID(int=1)


def test_a_partition_named_and_forgotten_in_one_request_leaves_the_session():
    """franz-go names a partition it no longer fetches only to acknowledge its records, and forgets it
    in the same request: Kafka adds the request's partitions, then removes the forgotten ones, so no
    record is acquired there for a member that would throw it away."""
    sessions = ShareSessions()
    error, session = sessions.for_fetch("g", "m", 0, [(T, 0), (T, 1)], [])
    assert error is ErrorCode.none and list(session.partitions) == [(T, 0), (T, 1)]
    error, session = sessions.for_fetch("g", "m", 1, [(T, 1)], [(T, 1)])
    assert error is ErrorCode.none and list(session.partitions) == [(T, 0)]
    error, session = sessions.for_fetch("g", "m", 2, [(T, 2)], [(T, 0)])
    assert error is ErrorCode.none and list(session.partitions) == [(T, 2)]
