"""The broker's side of topic configs (Kafka's ConfigHelper, KafkaConfigSchema and the controller's
ConfigurationControlManager): the defaults topics get from groupd's settings, how DescribeConfigs and
CreateTopics describe a topic's configs (values, sources, synonyms), and how AlterConfigs and
IncrementalAlterConfigs change a topic's overrides, with Kafka's messages. Pure: the overrides are
kept by the topic catalog (storage/catalog.py), the types and checks are storage/topic_config.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from groupd.protocol import ErrorCode
from groupd.storage.topic_config import (
    BY_NAME,
    KAFKA_DEFAULTS,
    LIST,
    NAMES,
    TopicConfigError,
    effective,
    text_of,
    validate,
)
from groupd.storage.topic_config_docs import DOCS

from .group_config import APPEND, DELETE, SET, SUBTRACT, ConfigError

# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
_OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Kafka's broker configs that are groupd settings too (the same name, meaning and default): they set
# topics' defaults. (groupd's log.flush.interval.ms is not Kafka's: it stays out.)
SETTINGS: dict[str, Any] = {
    "log.cleanup.policy": "delete", "log.retention.ms": None, "log.retention.minutes": None,
    "log.retention.hours": 168, "log.retention.bytes": -1, "log.segment.bytes": 1073741824, "log.roll.ms": None,
    "log.roll.hours": 168, "log.roll.jitter.ms": None, "log.roll.jitter.hours": 0,
    "log.cleaner.min.compaction.lag.ms": 0, "log.cleaner.delete.retention.ms": 86400000,
    "message.max.bytes": 1048588, "log.message.timestamp.type": "CreateTime"}
_KAFKA_UNSET = {"log.flush.interval.ms"}  # Kafka's broker configs without a default


def broker_defaults(settings) -> dict[str, Any]:
    """Each topic config's typed default on this broker: Kafka's, or what its broker synonym among
    groupd's settings says (the first synonym set wins: log.retention.ms, .minutes, then .hours)."""
    values = dict(KAFKA_DEFAULTS)
    for spec in BY_NAME.values():
        for name, unit in spec.synonyms:
            if name in SETTINGS and settings.value(name) is not None:
                value = settings.value(name)
                values[spec.name] = value if unit == 1 else value * unit
                break
    if values["retention.ms"] < 0:  # Kafka: any negative retention is "no limit"
        values["retention.ms"] = -1
    return values


def _broker_values(settings, name: str, unit: int) -> list[tuple[str, int]]:
    """Broker config `name`'s values as DescribeConfigs lists them: (value, STATIC_BROKER_CONFIG) when
    set in groupd's settings, then (value, DEFAULT_CONFIG) when it has a default."""
    if name in SETTINGS:
        out = []
        if not settings.origins.get(name, "default").startswith("default") and settings.value(name) is not None:
            out.append((setting_text(settings.value(name)), STATIC_BROKER_CONFIG))
        if SETTINGS[name] is not None:
            out.append((setting_text(SETTINGS[name]), DEFAULT_CONFIG))
        return out
    if name in _KAFKA_UNSET:
        return []
    topic = next(s for s in BY_NAME.values() if any(n == name for n, _ in s.synonyms))
    return [(text_of(topic.name, KAFKA_DEFAULTS[topic.name] // unit if unit != 1 else KAFKA_DEFAULTS[topic.name]),
             DEFAULT_CONFIG)]


def setting_text(value: Any) -> str | None:
    """A setting's value as a broker config's string: lists comma-joined, maps as k:v pairs, booleans
    lower case; None (unset) stays None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _synonyms(settings, topic_name: str) -> list[dict]:
    """Kafka's ConfigHelper.configSynonyms: the broker synonyms' values, by source then synonym,
    from the first that is the topic config's main broker synonym on."""
    spec = BY_NAME[topic_name]
    if not spec.synonyms:
        return []
    found = [(name, value, source) for name, unit in spec.synonyms
             for value, source in _broker_values(settings, name, unit)]
    found.sort(key=lambda f: f[2])  # STATIC before DEFAULT, each in synonym order (a stable sort)
    main = spec.synonyms[0][0]
    while found and found[0][0] != main:
        found.pop(0)
    return [{"name": n, "value": v, "source": s} for n, v, s in found]


def describe(settings, overrides: Mapping[str, str], keys: Iterable[str] | None, synonyms: bool,
             documented: bool) -> list[dict]:
    """DescribeConfigs of a topic: every topic config (or those in `keys`), its effective value, its
    source (DYNAMIC_TOPIC_CONFIG for an override, else its first broker synonym's), its synonyms
    when asked, its documentation when asked."""
    values = effective(overrides, broker_defaults(settings))
    wanted = set(keys) if keys else None
    out = []
    for name in NAMES:
        if wanted is not None and name not in wanted:
            continue
        value = text_of(name, values[name])
        chain = ([{"name": name, "value": value, "source": DYNAMIC_TOPIC_CONFIG}] if name in overrides else []) \
            + _synonyms(settings, name)
        out.append({"name": name, "value": value, "read_only": False, "is_sensitive": False,
                    "config_source": chain[0]["source"] if chain else DEFAULT_CONFIG,
                    "synonyms": chain if synonyms else [], "config_type": BY_NAME[name].type,
                    "documentation": DOCS.get(name) if documented else None})
    return out


def created(settings, overrides: Mapping[str, str]) -> list[dict]:
    """CreateTopics v5+: the new topic's configs as Kafka's controller resolves them
    (KafkaConfigSchema.resolveEffectiveTopicConfig): the override as given, else the first broker
    synonym set in the settings (in milliseconds), else Kafka's default for the topic config."""
    out = []
    for name in NAMES:
        spec = BY_NAME[name]
        if name in overrides:
            value, source = overrides[name], DYNAMIC_TOPIC_CONFIG
        else:
            value, source = text_of(name, spec.default), DEFAULT_CONFIG
            for synonym, unit in spec.synonyms:
                given = [v for v, s in _broker_values(settings, synonym, unit) if s == STATIC_BROKER_CONFIG]
                if given:
                    value = given[0] if unit == 1 else str(int(given[0]) * unit)
                    source = STATIC_BROKER_CONFIG
                    break
        out.append({"name": name, "value": value, "read_only": False, "config_source": source,
                    "is_sensitive": False})
    return out


def _unique(names: Iterable[str]) -> None:
    names = list(names)
    if len(set(names)) != len(names):
        raise ConfigError(ErrorCode.invalid_request, "Error due to duplicate config keys")


def _invalid(e: TopicConfigError) -> ConfigError:
    return ConfigError(ErrorCode.invalid_config, str(e))


def incrementally_altered(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    """IncrementalAlterConfigs of a topic: `current` overrides with each (name, operation, value)
    applied as Kafka's controller does (APPEND and SUBTRACT on list configs only, over the current
    value or the default)."""
    ops = list(ops)
    _unique(name for name, _, _ in ops)
    nulls = [name for name, op, value in ops if op != DELETE and value is None]
    if nulls:
        raise ConfigError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    new = dict(current)
    for name, op, value in ops:
        if op == SET:
            new[name] = value
        elif op == DELETE:
            new.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            spec = BY_NAME.get(name)
            if spec is None or spec.type != LIST:
                raise ConfigError(ErrorCode.invalid_config,
                                  f"Can't {_OPERATION_NAMES[op]} to key {name} because its type is not LIST.")
            parts = [p for p in (current.get(name) or "").split(",") if p] if name in current \
                else list(KAFKA_DEFAULTS[name])
            for item in value.split(","):
                if op == APPEND and item not in parts:
                    parts.append(item)
                elif op == SUBTRACT and item in parts:
                    parts.remove(item)
            new[name] = ",".join(parts)
        else:
            raise ConfigError(ErrorCode.invalid_request, f"Unknown operations type {op}")
    return new


def replaced(configs: Iterable[tuple[str, str | None]]) -> dict[str, str | None]:
    """AlterConfigs (the legacy API): the listed configs become the topic's whole set of overrides."""
    configs = list(configs)
    _unique(name for name, _ in configs)
    nulls = [name for name, value in configs if value is None]
    if nulls:
        raise ConfigError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    return dict(configs)


def altered(current: Mapping[str, str], changes: list, incremental: bool) -> dict[str, str | None]:
    """`current` overrides changed by IncrementalAlterConfigs' (name, operation, value) `changes`, or
    replaced by AlterConfigs' (name, value) ones."""
    return incrementally_altered(current, changes) if incremental else replaced(changes)


def checked(overrides: Mapping[str, str | None], settings) -> dict[str, str]:
    """The overrides when Kafka's LogConfig.validate accepts them over this broker's defaults
    (unknown names, types, ranges, consistency); ConfigError INVALID_CONFIG with Kafka's message."""
    try:
        validate(overrides, broker_defaults(settings))
    except TopicConfigError as e:
        raise _invalid(e) from None
    return dict(overrides)  # kept as given, as Kafka's ConfigRecords keep them
