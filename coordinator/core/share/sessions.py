"""Share sessions (KIP-932, share-groups spec §3.9): one per (group, member) on this node, holding
the partitions its ShareFetches read, and the epoch rules of ShareFetch and ShareAcknowledge.
Sans-IO: the handlers act on the answers (fetch, apply acknowledgements, release on close)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

from groupd.protocol import ErrorCode

TopicPartition = tuple[uuid.UUID, int]
OPEN, CLOSE = 0, -1
_MAX_EPOCH = 2**31 - 1


@dataclasses.dataclass(slots=True)
class ShareSession:
    partitions: dict[TopicPartition, None]  # insertion-ordered set: the order they are read in
    epoch: int = 1  # the epoch the next request must carry

    def advance(self) -> None:
        self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1


class ShareSessions:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def for_fetch(self, group: str, member: str, epoch: int, added: Iterable[TopicPartition],
                  forgotten: Iterable[TopicPartition]) -> tuple[ErrorCode, ShareSession | None]:
        """The session a ShareFetch reads (epoch 0: a new one replacing any other; n: the session,
        its partitions updated and its epoch advanced; -1: the session to close, left to `close`)."""
        key = (group, member)
        if epoch == OPEN:
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                return ErrorCode.share_session_limit_reached, None
            session = self.sessions[key] = ShareSession(dict.fromkeys(added))
            return ErrorCode.none, session
        error, session = self._check(key, epoch)
        if session is None or epoch == CLOSE:
            return error, session
        # added first, then forgotten (Kafka's ShareSession.update): a client names a partition it no
        # longer fetches only for its acknowledgements and forgets it in the same request; left in
        # the session, it would have records acquired for a member that throws them away
        for tp in added:
            session.partitions.setdefault(tp, None)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.advance()
        return ErrorCode.none, session

    def for_acknowledge(self, group: str, member: str, epoch: int) -> tuple[ErrorCode, ShareSession | None]:
        """A ShareAcknowledge never opens a session: epoch 0 is INVALID_SHARE_SESSION_EPOCH."""
        if epoch == OPEN:
            return ErrorCode.invalid_share_session_epoch, None
        error, session = self._check((group, member), epoch)
        if session is not None and epoch != CLOSE:
            session.advance()
        return error, session

    def close(self, group: str, member: str) -> ShareSession | None:
        return self.sessions.pop((group, member), None)

    def _check(self, key: tuple[str, str], epoch: int) -> tuple[ErrorCode, ShareSession | None]:
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch != CLOSE and epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch, None
        return ErrorCode.none, session
