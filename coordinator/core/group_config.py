"""Per-group dynamic configs (spec §2.4; Kafka's GroupConfig): their names, how AlterConfigs and
IncrementalAlterConfigs change a group's overrides, and the check against the broker's bounds, with
Kafka's messages. Pure: the overrides are kept by storage/group_configs.py and read by the consumer
and streams machines (the next heartbeat's interval and session timeout; a streams group's standby
replicas and initial rebalance delay) and by the share deliveries
(`share.auto.offset.reset`, where a share-partition starts)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from groupd.protocol import ErrorCode

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
STREAMS_SESSION_TIMEOUT_MS = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
STREAMS_INITIAL_REBALANCE_DELAY_MS = "streams.initial.rebalance.delay.ms"
NAMES = (CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS, SHARE_AUTO_OFFSET_RESET,
         SHARE_RECORD_LOCK_DURATION_MS, STREAMS_HEARTBEAT_INTERVAL_MS, STREAMS_SESSION_TIMEOUT_MS,
         STREAMS_NUM_STANDBY_REPLICAS, STREAMS_INITIAL_REBALANCE_DELAY_MS)
_MAY_BE_ZERO = (STREAMS_NUM_STANDBY_REPLICAS, STREAMS_INITIAL_REBALANCE_DELAY_MS)
# group configs with no broker setting behind them: their defaults (Kafka's GroupConfig)
GROUP_DEFAULTS = {SHARE_AUTO_OFFSET_RESET: "latest"}

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
            STREAMS_HEARTBEAT_INTERVAL_MS: settings.group_streams_heartbeat_interval_ms,
            STREAMS_SESSION_TIMEOUT_MS: settings.group_streams_session_timeout_ms,
            STREAMS_NUM_STANDBY_REPLICAS: settings.group_streams_num_standby_replicas,
            STREAMS_INITIAL_REBALANCE_DELAY_MS: settings.group_streams_initial_rebalance_delay_ms}


def _parse(name: str, value: str | None) -> int | str:
    if name not in NAMES:
        raise _invalid(f"Unknown group config name: {name}")
    if value is None:
        raise ConfigError(ErrorCode.invalid_request, f"Null value not supported for : {name}")
    if name == SHARE_AUTO_OFFSET_RESET:
        # Kafka also takes `by_duration:<ISO-8601 duration>`; groupd does not resolve it yet
        if value.strip().lower() not in ("earliest", "latest"):
            raise _invalid(f"Invalid value {value} for configuration {name}: String must be one of: latest, "
                           "earliest")
        return value.strip().lower()
    try:
        number = int(value.strip())
    except ValueError:
        raise _invalid(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
    if not -2**31 <= number < 2**31:
        raise _invalid(f"Invalid value {value} for configuration {name}: Not a number of type INT")
    low = 0 if name in _MAY_BE_ZERO else 1
    if number < low:
        raise _invalid(f"Invalid value {number} for configuration {name}: Value must be at least {low}")
    return number


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
             "group.streams.max.session.timeout.ms")):
        if merged[name] < getattr(settings, low.replace(".", "_")):
            raise _invalid(f"{name} must be greater than or equal to {low}")
        if merged[name] > getattr(settings, high.replace(".", "_")):
            raise _invalid(f"{name} must be less than or equal to {high}")
    if merged[STREAMS_NUM_STANDBY_REPLICAS] > settings.group_streams_max_standby_replicas:
        raise _invalid(f"{STREAMS_NUM_STANDBY_REPLICAS} must be less than or equal to "
                       "group.streams.max.standby.replicas")
    lock = merged[SHARE_RECORD_LOCK_DURATION_MS]
    if lock < settings.group_share_min_record_lock_duration_ms:
        raise _invalid(f"{SHARE_RECORD_LOCK_DURATION_MS} must be greater than or equal to "
                       "group.share.min.record.lock.duration.ms")
    if lock > settings.group_share_max_record_lock_duration_ms:
        raise _invalid(f"{SHARE_RECORD_LOCK_DURATION_MS} must be less than or equal to "
                       "group.share.max.record.lock.duration.ms")
