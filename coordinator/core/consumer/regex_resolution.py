"""When a consumer group's regexes are resolved, and what a resolution writes (spec §6.2; Kafka's
maybeUpdateRegularExpressions and handleRegularExpressionsResult): resolution is asynchronous and
batched per group — at most one in flight, not more often than every 10 s, on a new or unresolved
regex, topics created since, or the refresh interval passed. Pure: the machine (machine.py) keeps
which groups have one in flight and hands the work to the shell as an effect."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from groupd.storage.consumer_records import ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue
from groupd.storage.records import Record

from .group import ConsumerGroup
from .topic_regex import compile_topic_regex


def regex_change(group: ConsumerGroup, old_regex: str | None, new_regex: str | None) -> tuple[list[Record], bool, bool]:
    """A member's regex going from `old_regex` to `new_regex`: (the tombstone of a regex it was the
    last to use, whether a resolution is required — the regex is new to the group and matches nothing
    until resolved —, whether the change takes effect at once — a regex already resolved, or one dropped
    — and so moves the group epoch)."""
    if old_regex == new_regex:
        return [], False, False
    tombstones = []
    if old_regex and group.subscribed_regexes.get(old_regex, 0) == 1 and old_regex in group.regexes:
        tombstones.append(Record(ConsumerGroupRegularExpressionKey(group.group_id, old_regex), None))
    if not new_regex:
        return tombstones, False, bool(old_regex)
    if group.subscribed_regexes.get(new_regex, 0) == 0:
        return tombstones, True, False
    return tombstones, False, new_regex in group.regexes


def regexes_to_resolve(group: ConsumerGroup, old_regex: str | None, new_regex: str | None, required: bool,
                       created_version: int, now_wall: int, min_interval_ms: int,
                       refresh_interval_ms: int) -> frozenset[str]:
    """Every regex of the group (with the member's change) when a resolution is due now, else none.
    The caller checks that none is in flight."""
    last = max((v.timestamp for v in group.regexes.values()), default=None)
    if last is not None and now_wall <= last + min_interval_ms:
        return frozenset()
    in_use = Counter(group.subscribed_regexes)
    if old_regex:
        in_use[old_regex] -= 1
    if new_regex:
        in_use[new_regex] += 1
    regexes = frozenset(+in_use)
    due = (required or len(regexes) != len(group.regexes) or group.regex_version < created_version
           or last is None or now_wall > last + refresh_interval_ms)
    return regexes if due else frozenset()


def resolve(regexes: frozenset[str], topic_names) -> dict[str, frozenset[str]]:
    """The work itself: each regex's topics among `topic_names` (safe in a worker thread)."""
    return {regex: compile_topic_regex(regex).resolve(topic_names) for regex in regexes}


def result_records(group: ConsumerGroup, resolved: Mapping[str, frozenset[str]], version: int,
                   now_wall: int) -> tuple[list[Record], dict[str, frozenset[str]], bool]:
    """A record per regex still in use (its topics, the topics version, the time: even an unchanged
    one, so the next refresh counts from now); the group's regexes resolved as they will be; whether
    a regex's topics changed."""
    current = {r: frozenset(v.topics) for r, v in group.regexes.items()}
    records, changed = [], False
    for regex, matched in sorted(resolved.items()):
        if not group.subscribed_regexes.get(regex):
            continue  # nobody subscribes to it any more
        changed = changed or current.get(regex) != matched
        current[regex] = matched
        records.append(Record(ConsumerGroupRegularExpressionKey(group.group_id, regex),
                              ConsumerGroupRegularExpressionValue(tuple(sorted(matched)), version, now_wall)))
    return records, current, changed
