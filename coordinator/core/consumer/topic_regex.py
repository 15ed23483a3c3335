"""SubscribedTopicRegex (ConsumerGroupHeartbeat v1+, spec §6.2): RE2 syntax, as Kafka's RE2/J, and a
topic matches only when the pattern matches its whole name.

Python's `re` is not RE2: it accepts backreferences and lookaround (RE2 rejects them, they have no
linear-time match), reads `a{,3}` as a repeat (RE2: the literal text) and has no `\\z`, `\\pL` or
`[[:alpha:]]`. So the real RE2 (google-re2) compiles and matches here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import re2

from groupd.protocol import ErrorCode

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered as such, not a log line

COMPILE_CACHE_SIZE = 256  # distinct regexes kept compiled; a group rarely has more than a handful


class InvalidRegularExpression(Exception):
    """Answer INVALID_REGULAR_EXPRESSION (128) with this message, as Kafka words it."""

    error_code = ErrorCode.invalid_regular_expression

    def __init__(self, regex: str, description: str) -> None:
        super().__init__(f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}.")
        self.regex = regex


class TopicRegex:
    __slots__ = ("regex", "_compiled")

    def __init__(self, regex: str, compiled) -> None:
        self.regex = regex
        self._compiled = compiled

    def matches(self, topic_name: str) -> bool:
        return self._compiled.fullmatch(topic_name) is not None

    def resolve(self, topic_names: Iterable[str]) -> frozenset[str]:
        """The topics among `topic_names` this regex subscribes to."""
        fullmatch = self._compiled.fullmatch
        return frozenset(name for name in topic_names if fullmatch(name) is not None)

    def __repr__(self) -> str:
        return f"TopicRegex({self.regex!r})"


@functools.lru_cache(maxsize=COMPILE_CACHE_SIZE)
def compile_topic_regex(regex: str) -> TopicRegex:
    """Compile once per distinct regex (bounded LRU; an invalid one raises and is not cached)."""
    try:
        compiled = re2.compile(regex, _OPTIONS)
    except re2.error as e:
        description = e.args[0] if e.args else "invalid syntax"
        if isinstance(description, bytes):
            description = description.decode(errors="replace")
        raise InvalidRegularExpression(regex, description) from None
    return TopicRegex(regex, compiled)
