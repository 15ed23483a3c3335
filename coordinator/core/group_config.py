"""Per-group dynamic configs (spec §2.4; Kafka's GroupConfig): their names, how AlterConfigs and
IncrementalAlterConfigs change a group's overrides, and the check against the broker's bounds, with
Kafka's messages. Pure: the overrides are kept by storage/group_configs.py and read by the consumer
and streams machines (the next heartbeat's interval and session timeout; a streams group's standby
replicas, initial rebalance delay and assignment interval) and by the share deliveries
(`share.auto.offset.reset`, where a share-partition starts; `share.isolation.level`; Kafka 4.3's
`share.delivery.count.limit` and `share.partition.max.record.locks`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from groupd.protocol import ErrorCode

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"  # Kafka 4.3 (KIP-1240)
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"  # Kafka 4.3 (KIP-1240)
STREAMS_SESSION_TIMEOUT_MS = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
STREAMS_INITIAL_REBALANCE_DELAY_MS = "streams.initial.rebalance.delay.ms"
STREAMS_ASSIGNMENT_INTERVAL_MS = "streams.assignment.interval.ms"  # Kafka 4.3
NAMES = (CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS, SHARE_AUTO_OFFSET_RESET,
         SHARE_DELIVERY_COUNT_LIMIT, SHARE_ISOLATION_LEVEL, SHARE_PARTITION_MAX_RECORD_LOCKS,
         SHARE_RECORD_LOCK_DURATION_MS, STREAMS_HEARTBEAT_INTERVAL_MS, STREAMS_SESSION_TIMEOUT_MS,
         STREAMS_NUM_STANDBY_REPLICAS, STREAMS_INITIAL_REBALANCE_DELAY_MS, STREAMS_ASSIGNMENT_INTERVAL_MS)
STRINGS = (SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL)  # every other group config is an INT
_MAY_BE_ZERO = (STREAMS_NUM_STANDBY_REPLICAS, STREAMS_INITIAL_REBALANCE_DELAY_MS, STREAMS_ASSIGNMENT_INTERVAL_MS)
# the ConfigDef lower bounds that are not 1 (Kafka's GroupConfig: atLeast(2), atLeast(100))
_AT_LEAST = {SHARE_DELIVERY_COUNT_LIMIT: 2, SHARE_PARTITION_MAX_RECORD_LOCKS: 100}
# group configs with no broker setting behind them: their defaults (Kafka's GroupConfig)
GROUP_DEFAULTS = {SHARE_AUTO_OFFSET_RESET: "latest", SHARE_ISOLATION_LEVEL: "read_uncommitted"}
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")  # Kafka's order in its message
BY_DURATION = "by_duration:"
# java.time.Duration.parse's grammar (PnDTnHnMn.nS, each part signed, letters in either case); each number
# a Java long, so at most 19 digits (which also keeps int() of a hostile value cheap and within its limit)
_ISO_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]{1,19})D)?(T(?:([-+]?[0-9]{1,19})H)?(?:([-+]?[0-9]{1,19})M)?"
                           r"(?:([-+]?[0-9]{1,19})(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {APPEND: "append", SUBTRACT: "subtract"}


class ConfigError(Exception):
    """The resource's error code and Kafka's message for it."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _invalid(message: str) -> ConfigError:
    return ConfigError(ErrorCode.invalid_config, message)


def defaults(settings) -> dict[str, int]:
    """What a group without overrides gets: the broker's group.consumer.* and group.share.* values."""
    return {CONSUMER_HEARTBEAT_INTERVAL_MS: settings.group_consumer_heartbeat_interval_ms,
            CONSUMER_SESSION_TIMEOUT_MS: settings.group_consumer_session_timeout_ms,
            SHARE_RECORD_LOCK_DURATION_MS: settings.group_share_record_lock_duration_ms,
            SHARE_DELIVERY_COUNT_LIMIT: settings.group_share_delivery_count_limit,
            SHARE_PARTITION_MAX_RECORD_LOCKS: settings.group_share_partition_max_record_locks,
            STREAMS_HEARTBEAT_INTERVAL_MS: settings.group_streams_heartbeat_interval_ms,
            STREAMS_SESSION_TIMEOUT_MS: settings.group_streams_session_timeout_ms,
            STREAMS_NUM_STANDBY_REPLICAS: settings.group_streams_num_standby_replicas,
            STREAMS_INITIAL_REBALANCE_DELAY_MS: settings.group_streams_initial_rebalance_delay_ms,
            STREAMS_ASSIGNMENT_INTERVAL_MS: settings.group_streams_assignment_interval_ms}


def _parse(name: str, value: str | None) -> int | str:
    if name not in NAMES:
        raise _invalid(f"Unknown group config name: {name}")
    if value is None:
        raise ConfigError(ErrorCode.invalid_request, f"Null value not supported for : {name}")
    if name == SHARE_AUTO_OFFSET_RESET:
        value = value.strip()  # Kafka's ConfigDef trims a STRING before its validator sees it
        if value not in ("earliest", "latest") and reset_duration_ms(value) is None:
            raise _invalid(f"Invalid value {value} for configuration {name}: Invalid value `{value}` for "
                           f"configuration {name}. The value must be either 'earliest', 'latest' or of the "
                           "format 'by_duration:<PnDTnHnMn.nS>'.")
        return value
    if name == SHARE_ISOLATION_LEVEL:
        value = value.strip()
        if value not in ISOLATION_LEVELS:
            raise _invalid(f"Invalid value {value} for configuration {name}: String must be one of: "
                           + ", ".join(ISOLATION_LEVELS))
        return value
    try:
        number = int(value.strip())
    except ValueError:
        raise _invalid(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
    if not -2**31 <= number < 2**31:
        raise _invalid(f"Invalid value {value} for configuration {name}: Not a number of type INT")
    low = 0 if name in _MAY_BE_ZERO else _AT_LEAST.get(name, 1)
    if number < low:
        raise _invalid(f"Invalid value {number} for configuration {name}: Value must be at least {low}")
    return number


def reset_duration_ms(value: str) -> int | None:
    """The duration of a `by_duration:<ISO-8601 duration>` reset in ms (Kafka's
    AutoOffsetResetStrategy: java.time.Duration.parse, negative refused); None if `value` is not one."""
    if not value.startswith(BY_DURATION):
        return None
    m = _ISO_DURATION.fullmatch(value[len(BY_DURATION):])
    # Duration.parse also refuses a bare "P" and a "T" with nothing after it
    if m is None or m.group(3) is not None and len(m.group(3)) == 1 or not any(m.group(i) is not None for i in (2, 4, 5, 6)):
        return None
    sign, days, _, hours, minutes, seconds, fraction = m.groups()
    nanos = 0
    if fraction:
        nanos = int(fraction.ljust(9, "0")) * (-1 if seconds.startswith("-") else 1)
    total_ns = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
                + int(seconds or 0)) * 10**9 + nanos
    if sign == "-":
        total_ns = -total_ns
    if total_ns < 0 or total_ns // 10**9 >= 2**63:  # negative, or past what a Java Duration holds
        return None
    return total_ns // 10**6


def _unique(names: Iterable[str]) -> None:
    names = list(names)
    if len(set(names)) != len(names):
        raise ConfigError(ErrorCode.invalid_request, "Error due to duplicate config keys")


def incrementally_altered(current: Mapping[str, int | str],
                          ops: Iterable[tuple[str, int, str | None]]) -> dict[str, int | str]:
    """IncrementalAlterConfigs: `current` with each (name, operation, value) applied."""
    ops = list(ops)
    _unique(name for name, _, _ in ops)
    new = dict(current)
    for name, operation, value in ops:
        if name not in NAMES:
            raise _invalid(f"Unknown group config name: {name}")
        if operation == SET:
            new[name] = _parse(name, value)
        elif operation == DELETE:
            new.pop(name, None)
        elif operation in _OPERATION_NAMES:  # both are for list configs only
            raise _invalid(f"Config value {_OPERATION_NAMES[operation]} is not allowed for config key: {name}")
        else:
            raise ConfigError(ErrorCode.invalid_request, f"Unknown operation type {operation}")
    return new


def replaced(configs: Iterable[tuple[str, str | None]]) -> dict[str, int | str]:
    """AlterConfigs (the legacy API): the listed configs become the group's whole set of overrides."""
    configs = list(configs)
    _unique(name for name, _ in configs)
    return {name: _parse(name, value) for name, value in configs}


def validate(overrides: Mapping[str, int | str], settings) -> None:
    """Kafka's GroupConfig.validateValues over the group's configs (overrides over the defaults)."""
    merged = {**defaults(settings), **overrides}
    heartbeat, session = merged[CONSUMER_HEARTBEAT_INTERVAL_MS], merged[CONSUMER_SESSION_TIMEOUT_MS]
    for name, value, low, high in (
            (CONSUMER_HEARTBEAT_INTERVAL_MS, heartbeat, "group.consumer.min.heartbeat.interval.ms",
             "group.consumer.max.heartbeat.interval.ms"),
            (CONSUMER_SESSION_TIMEOUT_MS, session, "group.consumer.min.session.timeout.ms",
             "group.consumer.max.session.timeout.ms")):
        if value < getattr(settings, low.replace(".", "_")):
            raise _invalid(f"{name} must be greater than or equal to {low}")
        if value > getattr(settings, high.replace(".", "_")):
            raise _invalid(f"{name} must be less than or equal to {high}")
    if session <= heartbeat:
        raise _invalid(f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}")
    for name, low, high in (
            (STREAMS_HEARTBEAT_INTERVAL_MS, "group.streams.min.heartbeat.interval.ms",
             "group.streams.max.heartbeat.interval.ms"),
            (STREAMS_SESSION_TIMEOUT_MS, "group.streams.min.session.timeout.ms",
             "group.streams.max.session.timeout.ms"),
            (STREAMS_ASSIGNMENT_INTERVAL_MS, "group.streams.min.assignment.interval.ms",
             "group.streams.max.assignment.interval.ms")):
        if merged[name] < getattr(settings, low.replace(".", "_")):
            raise _invalid(f"{name} must be greater than or equal to {low}")
        if merged[name] > getattr(settings, high.replace(".", "_")):
            raise _invalid(f"{name} must be less than or equal to {high}")
    if merged[STREAMS_NUM_STANDBY_REPLICAS] > settings.group_streams_max_standby_replicas:
        raise _invalid(f"{STREAMS_NUM_STANDBY_REPLICAS} must be less than or equal to "
                       "group.streams.max.standby.replicas")
    for name, bound, low, high in (
            (SHARE_RECORD_LOCK_DURATION_MS, "record.lock.duration.ms", settings.group_share_min_record_lock_duration_ms,
             settings.group_share_max_record_lock_duration_ms),
            (SHARE_DELIVERY_COUNT_LIMIT, "delivery.count.limit", settings.group_share_min_delivery_count_limit,
             settings.group_share_max_delivery_count_limit),
            (SHARE_PARTITION_MAX_RECORD_LOCKS, "partition.max.record.locks",
             settings.group_share_min_partition_max_record_locks, settings.group_share_max_partition_max_record_locks)):
        if merged[name] < low:
            raise _invalid(f"{name} must be greater than or equal to group.share.min.{bound}")
        if merged[name] > high:
            raise _invalid(f"{name} must be less than or equal to group.share.max.{bound}")
