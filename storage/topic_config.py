"""Topic configs with Kafka's names (Kafka 4.x `LogConfig`): each one's type, default, check and the
broker settings that stand in for it, parsed and checked with Kafka's messages; and `TopicConfig`,
the typed effective config of one topic that the records plane reads (segment size, retention,
compaction).

A topic keeps only its overrides, as the strings it was given (Kafka's `ConfigRecord`s); what a
topic runs with is each override over the broker's default (`effective`). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from .record_class import frozen_on_first_use

# DescribeConfigsResponse.ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7
_TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", LONG: "LONG", DOUBLE: "DOUBLE", LIST: "LIST"}
LONG_MAX = 2**63 - 1
COMPACT, DELETE = "compact", "delete"
MIN_SEGMENT_BYTES = 1024 * 1024  # Kafka 4.0 (KIP-1030); 14 bytes before


# what Java's Double.parseDouble takes (no underscores, no "inf", ASCII digits)
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")


class TopicConfigError(ValueError):
    """A config Kafka refuses with INVALID_CONFIG; the message is Kafka's."""


# Spec and TopicConfig: @dataclasses.dataclass(frozen=True, slots=True), each method made at its first
# call (record_class.py): a server starts with their __init__ only


@frozen_on_first_use
class Spec:
    name: str
    type: int
    default: Any  # typed (a list config: a tuple)
    check: Callable[[Any], str | None]  # why a parsed value is refused, or None
    synonyms: tuple[tuple[str, int], ...] = ()  # Kafka's broker configs for it, in order: (name, ms per unit)


def _at_least(low: int | float) -> Callable[[Any], str | None]:
    return lambda v: f"Value must be at least {low}" if v < low else None


def _between(low: int | float, high: int | float) -> Callable[[Any], str | None]:
    return lambda v: (f"Value must be at least {low}" if v < low else
                      f"Value must be no more than {high}" if v > high else None)


def _one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


def _each_one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: next((_Refused(s, f"String must be one of: {', '.join(allowed)}") for s in v
                           if s not in allowed), None)


def _replicas(v: tuple[str, ...]) -> str | None:
    if v == ("*",) or all(re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", s) for s in v):
        return None
    return "Must be the wildcard '*' or a list of [partitionId]:[brokerId] pairs"


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9, or -1"


def _anything(_v: Any) -> None:
    return None


class _Refused(str):
    """A list check's refusal that names the one element refused (Kafka's ValidList)."""

    def __new__(cls, element: str, why: str) -> _Refused:
        self = super().__new__(cls, why)
        self.element = element
        return self


def _log(name: str) -> tuple[tuple[str, int], ...]:
    return ((f"log.{name}", 1),)


HOUR, MINUTE = 3_600_000, 60_000
# In Kafka's definition order (ConfigDef.parse checks in this order: the first refusal is the answer)
SPECS: tuple[Spec, ...] = (
    Spec("segment.bytes", INT, 1024**3, _at_least(MIN_SEGMENT_BYTES), _log("segment.bytes")),
    Spec("segment.ms", LONG, 7 * 24 * HOUR, _at_least(1), (("log.roll.ms", 1), ("log.roll.hours", HOUR))),
    Spec("segment.jitter.ms", LONG, 0, _at_least(0), (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR))),
    Spec("segment.index.bytes", INT, 10 * 1024 * 1024, _at_least(4), _log("index.size.max.bytes")),
    Spec("flush.messages", LONG, LONG_MAX, _at_least(1), _log("flush.interval.messages")),
    Spec("flush.ms", LONG, LONG_MAX, _at_least(0),
         (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1))),
    Spec("retention.bytes", LONG, -1, _anything, _log("retention.bytes")),
    Spec("retention.ms", LONG, 7 * 24 * HOUR, _at_least(-1),
         (("log.retention.ms", 1), ("log.retention.minutes", MINUTE), ("log.retention.hours", HOUR))),
    Spec("max.message.bytes", INT, 1024 * 1024 + 12, _at_least(0), (("message.max.bytes", 1),)),
    Spec("index.interval.bytes", INT, 4096, _at_least(0), _log("index.interval.bytes")),
    Spec("delete.retention.ms", LONG, 24 * HOUR, _at_least(0), _log("cleaner.delete.retention.ms")),
    Spec("min.compaction.lag.ms", LONG, 0, _at_least(0), _log("cleaner.min.compaction.lag.ms")),
    Spec("max.compaction.lag.ms", LONG, LONG_MAX, _at_least(1), _log("cleaner.max.compaction.lag.ms")),
    Spec("file.delete.delay.ms", LONG, 60000, _at_least(0), _log("segment.delete.delay.ms")),
    Spec("min.cleanable.dirty.ratio", DOUBLE, 0.5, _between(0, 1), _log("cleaner.min.cleanable.ratio")),
    Spec("cleanup.policy", LIST, (DELETE,), _each_one_of(COMPACT, DELETE), _log("cleanup.policy")),
    Spec("unclean.leader.election.enable", BOOLEAN, False, _anything, (("unclean.leader.election.enable", 1),)),
    Spec("min.insync.replicas", INT, 1, _at_least(1), (("min.insync.replicas", 1),)),
    Spec("compression.type", STRING, "producer",
         _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), (("compression.type", 1),)),
    Spec("compression.gzip.level", INT, -1, _gzip_level, (("compression.gzip.level", 1),)),
    Spec("compression.lz4.level", INT, 9, _between(1, 17), (("compression.lz4.level", 1),)),
    Spec("compression.zstd.level", INT, 3, _between(-131072, 22), (("compression.zstd.level", 1),)),
    Spec("preallocate", BOOLEAN, False, _anything, _log("preallocate")),
    Spec("message.timestamp.type", STRING, "CreateTime", _one_of("CreateTime", "LogAppendTime"),
         _log("message.timestamp.type")),
    Spec("message.timestamp.before.max.ms", LONG, LONG_MAX, _at_least(0), _log("message.timestamp.before.max.ms")),
    Spec("message.timestamp.after.max.ms", LONG, HOUR, _at_least(0), _log("message.timestamp.after.max.ms")),
    Spec("leader.replication.throttled.replicas", LIST, (), _replicas),
    Spec("follower.replication.throttled.replicas", LIST, (), _replicas),
    Spec("remote.storage.enable", BOOLEAN, False, _anything),
    Spec("local.retention.ms", LONG, -2, _at_least(-2), _log("local.retention.ms")),
    Spec("local.retention.bytes", LONG, -2, _at_least(-2), _log("local.retention.bytes")),
    Spec("remote.log.copy.disable", BOOLEAN, False, _anything),
    Spec("remote.log.delete.on.disable", BOOLEAN, False, _anything),
)
BY_NAME: dict[str, Spec] = {s.name: s for s in SPECS}
NAMES: tuple[str, ...] = tuple(sorted(BY_NAME))
KAFKA_DEFAULTS: dict[str, Any] = {s.name: s.default for s in SPECS}


def _invalid(name: str, value: Any, why: str) -> TopicConfigError:
    return TopicConfigError(f"Invalid value {value} for configuration {name}: {why}")


def parse(name: str, text: str) -> Any:
    """`text` as the typed value of topic config `name` (Kafka's ConfigDef.parseType, then its
    validator); TopicConfigError with Kafka's message when refused."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise TopicConfigError(f"Unknown topic config name: {name}")
    trimmed = text.strip()
    try:
        if spec.type in (INT, LONG):
            value = int(trimmed)
            bits = 31 if spec.type == INT else 63
            if not -2**bits <= value < 2**bits or not re.fullmatch(r"[+-]?[0-9]+", trimmed):
                raise ValueError
        elif spec.type == DOUBLE:
            if not _JAVA_DOUBLE.fullmatch(trimmed):
                raise ValueError
            value = float(trimmed.rstrip("fFdD"))
        elif spec.type == BOOLEAN:
            if trimmed.lower() not in ("true", "false"):
                raise _invalid(name, trimmed, "Expected value to be either true or false")
            value = trimmed.lower() == "true"
        elif spec.type == LIST:
            value = tuple(re.split(r"\s*,\s*", trimmed)) if trimmed else ()
        else:
            value = trimmed
    except ValueError as e:
        if isinstance(e, TopicConfigError):
            raise
        raise _invalid(name, trimmed, f"Not a number of type {_TYPE_NAMES[spec.type]}") from None
    why = spec.check(value)
    if why is not None:
        raise _invalid(name, getattr(why, "element", text_of(name, value)), why)
    return value


def text_of(name: str, value: Any) -> str | None:
    """A typed value as Kafka writes it (ConfigDef.convertToString): lists comma-joined, booleans
    lower case; None stays None."""
    if value is None:
        return None
    if BY_NAME[name].type == LIST:
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def validate(overrides: Mapping[str, str | None], defaults: Mapping[str, Any] = KAFKA_DEFAULTS) -> dict[str, Any]:
    """Kafka's LogConfig.validate of a topic's overrides over the broker's `defaults`: every name known,
    no null value, each value parsed and checked (in Kafka's order), the values consistent. The
    effective typed values; TopicConfigError otherwise."""
    for name in overrides:
        if name not in BY_NAME:
            raise TopicConfigError(f"Unknown topic config name: {name}")
    nulls = [name for name, value in overrides.items() if value is None]
    if nulls:
        raise TopicConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
    values = dict(defaults)
    for spec in SPECS:
        if spec.name in overrides:
            values[spec.name] = parse(spec.name, overrides[spec.name])
    lag, most = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if lag > most:
        raise TopicConfigError(f"conflict topic config setting min.compaction.lag.ms ({lag}) > "
                               f"max.compaction.lag.ms ({most})")
    if values["remote.storage.enable"]:
        raise TopicConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                               "with remote log storage.")
    return values


@frozen_on_first_use
class TopicConfig:
    """What one topic's log runs with: its overrides over the broker's defaults, typed. The
    records plane reads this (segment rolling, retention, compaction, the largest batch)."""

    cleanup_policy: tuple[str, ...]  # ("delete",), ("compact",), ("compact", "delete") or () (neither)
    retention_ms: int  # -1: no time limit
    retention_bytes: int  # per partition; -1: no size limit
    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    delete_retention_ms: int  # how long tombstones outlive compaction
    min_cleanable_dirty_ratio: float
    max_message_bytes: int  # largest record batch a Produce may append
    message_timestamp_type: str  # "CreateTime" or "LogAppendTime"
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may grow before an append rolls it (Kafka's
        `LogConfig.maxSegmentMs`): a compacted topic's max.compaction.lag.ms caps segment.ms, since the
        cleaner only cleans closed segments."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> TopicConfig:
        """From every topic config's typed value (`effective`, `validate`)."""
        return cls(**{f.name: values[f.name.replace("_", ".")] for f in dataclasses.fields(cls)})


DEFAULT = TopicConfig.of(KAFKA_DEFAULTS)


def effective(overrides: Mapping[str, str], defaults: Mapping[str, Any] = KAFKA_DEFAULTS) -> dict[str, Any]:
    """Each topic config's typed value: the topic's override (kept as given, already validated) over
    the broker's default. A stored override that no longer parses (a newer groupd's, a hand edit) is
    skipped: the default holds."""
    values = dict(defaults)
    for name, text in overrides.items():
        try:
            values[name] = parse(name, text)
        except TopicConfigError:
            pass
    return values
