"""The one typed settings object, read from (lowest to highest precedence) built-in defaults,
a YAML file, `GROUPD_<KEY>` environment variables and `--set key=value` arguments.

Keys carry Kafka's names and defaults. An unknown key or a bad value stops start-up with a
message that names the key and what it accepts.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import yaml

from storage.catalog import legal_topic_name


class ConfigError(Exception):
    pass


MAX_TOPIC_PARTITIONS = 1_000_000  # the highest topic.max.partitions (Metadata grows with the count)


@dataclasses.dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


# ---------------------------------------------------------------------------------------------
# Value parsers: each takes what a file, the environment or the command line gave and returns
# the typed value, or raises ValueError with what is allowed.


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError("an integer")
        try:
            n = int(v)
        except ValueError:
            raise ValueError("an integer") from None
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            raise ValueError(f"an integer in [{lo if lo is not None else '-inf'}, "
                             f"{hi if hi is not None else 'inf'}]")
        return n

    parse.__doc__ = "int"
    return parse


def _ratio(v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError("a number in [0, 1]") from None
    if not 0 <= x <= 1:
        raise ValueError("a number in [0, 1]")
    return x


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ValueError("true or false")


def _str(v: Any) -> str:
    if not isinstance(v, (str, int)) or isinstance(v, bool):
        raise ValueError("a string")
    return str(v)


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        s = _str(v).strip().lower()
        if s not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return s

    return parse


def _listeners(v: Any) -> tuple[Listener, ...]:
    text = ",".join(v) if isinstance(v, list) else _str(v)
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/]*):(\d+)", item)
        if not m or not 0 <= int(m.group(3)) <= 65535:
            raise ValueError("a comma-separated list of NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092")
        out.append(Listener(m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))))
    return tuple(out)


def _protocols(v: Any) -> tuple[str, ...]:
    items = tuple(s.strip().lower() for s in (v if isinstance(v, list) else _str(v).split(",")))
    if "classic" not in items or not set(items) <= {"classic", "consumer", "share", "streams"}:
        raise ValueError("a comma-separated list of classic, consumer, share, streams that includes classic")
    return items


def _assignors(v: Any) -> tuple[str, ...]:
    items = tuple(s.strip().lower() for s in (v if isinstance(v, list) else _str(v).split(",")) if s.strip())
    if not items or not set(items) <= {"uniform", "range"}:
        raise ValueError("a comma-separated list of uniform, range (the first is the default)")
    return items


def _topics(v: Any) -> dict[str, int]:
    """`{name: partitions}` in YAML, or `name:partitions,...` in the environment or on the CLI."""
    if isinstance(v, str):
        pairs = [item.rsplit(":", 1) for item in v.split(",") if item.strip()]
        if any(len(p) != 2 for p in pairs):
            raise ValueError("a map of topic name to partition count (name:count,... outside YAML)")
        v = {name.strip(): count for name, count in pairs}
    if not isinstance(v, Mapping):
        raise ValueError("a map of topic name to partition count")
    out = {}
    for name, count in v.items():
        if not isinstance(name, str) or not legal_topic_name(name):
            raise ValueError(f"valid topic names (not {name!r})")
        out[name] = _int(1, MAX_TOPIC_PARTITIONS)(count)
    return out


def _url(v: Any) -> str:
    s = _str(v)
    if s and not urlsplit(s).port:
        raise ValueError("an http://host:port/path URL, or empty to turn metrics off")
    return s


# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Key:
    name: str  # Kafka's name
    default: Any
    parse: Callable[[Any], Any]
    doc: str


KEYS: tuple[Key, ...] = (
    Key("listeners", "PLAINTEXT://127.0.0.1:9092", _listeners, "where groupd accepts connections"),
    Key("advertised.listeners", "", _listeners,
        "the address clients are told to use (Metadata, FindCoordinator); empty = listeners"),
    Key("node.id", 1, _int(0, 2**31 - 1), "this server's broker id in Metadata and FindCoordinator"),
    Key("data.dir", "data", _str, "directory for the offsets log, the topic catalog and the cluster id"),
    Key("num.partitions", 1, _int(1, MAX_TOPIC_PARTITIONS), "partitions of an auto-created topic"),
    Key("topic.max.partitions", 10000, _int(1, MAX_TOPIC_PARTITIONS),
        "most partitions a topic may have (CreateTopics/CreatePartitions beyond it get INVALID_PARTITIONS)"),
    Key("auto.create.topics.enable", True, _bool, "create a topic when Metadata asks for an unknown one"),
    Key("topics", {}, _topics, "topics declared at start-up: {name: partitions}"),
    Key("socket.request.max.bytes", 104857600, _int(1024, 2**31 - 1),
        "largest request frame; a bigger one closes the connection"),
    Key("connections.max.idle.ms", 600000, _int(1), "idle connections are closed after this long"),
    Key("socket.request.arrival.timeout.ms", 60000, _int(1),
        "a request frame must arrive whole within this long of its first byte, else its connection "
        "is closed (a client trickling bytes would otherwise hold it forever; no Kafka equivalent)"),
    Key("connections.max.queued.response.bytes", 16777216, _int(1024),
        "per connection: reading stops while more response bytes than this wait to be sent "
        "(behind a parked reply, or a client that does not read); it resumes once they drain"),
    Key("queued.max.request.bytes", 209715200, _int(1024),
        "all connections together: request bytes received but not yet handled (partial and pipelined "
        "frames); over it, a connection that adds more stops being read until it drops (Kafka's name)"),
    Key("group.min.session.timeout.ms", 6000, _int(1), "lowest session timeout a member may ask for"),
    Key("group.max.session.timeout.ms", 1800000, _int(1), "highest session timeout a member may ask for"),
    Key("group.initial.rebalance.delay.ms", 3000, _int(0),
        "how long a new group waits for more members before its first generation"),
    Key("group.max.size", 2147483647, _int(1), "most members a classic group may have"),
    Key("group.coordinator.rebalance.protocols", "classic,consumer", _protocols,
        "rebalance protocols enabled; classic must be one"),
    Key("group.consumer.heartbeat.interval.ms", 5000, _int(1),
        "how often consumer-protocol members heartbeat (KIP-848 groups)"),
    Key("group.consumer.min.heartbeat.interval.ms", 5000, _int(1), "lowest group.consumer.heartbeat.interval.ms"),
    Key("group.consumer.max.heartbeat.interval.ms", 15000, _int(1), "highest group.consumer.heartbeat.interval.ms"),
    Key("group.consumer.session.timeout.ms", 45000, _int(1),
        "how long a consumer-protocol member may go without a heartbeat before it is fenced"),
    Key("group.consumer.min.session.timeout.ms", 45000, _int(1), "lowest group.consumer.session.timeout.ms"),
    Key("group.consumer.max.session.timeout.ms", 60000, _int(1), "highest group.consumer.session.timeout.ms"),
    Key("group.consumer.assignors", "uniform,range", _assignors,
        "server-side assignors of consumer groups; the first is the default"),
    Key("group.consumer.max.size", 2147483647, _int(1), "most members a consumer group may have"),
    Key("group.consumer.migration.policy", "bidirectional", _choice("bidirectional", "upgrade", "downgrade", "disabled"),
        "online classic <-> consumer group conversion; groupd does not convert non-empty groups yet"),
    Key("group.consumer.regex.refresh.interval.ms", 600000, _int(1),
        "accepted for compatibility; groupd re-resolves regexes whenever topics change"),
    Key("offset.metadata.max.bytes", 4096, _int(0), "longest commit metadata (UTF-16 code units)"),
    Key("offsets.retention.minutes", 10080, _int(1), "how long committed offsets are kept (KIP-211)"),
    Key("offsets.retention.check.interval.ms", 600000, _int(1), "how often expired offsets are removed"),
    Key("offsets.topic.num.partitions", 50, _int(1, 10_000),
        "partitions of the offsets log; never change it once data exists"),
    Key("offsets.topic.segment.bytes", 104857600, _int(14, 2**31 - 1), "segment size of the offsets log"),
    Key("offsets.commit.timeout.ms", 5000, _int(1), "how long a log write may take before it fails"),
    Key("message.max.bytes", 1048588, _int(1),
        "largest record batch one request may write to the offsets log; a bigger one fails alone "
        "(OffsetCommit: INVALID_COMMIT_OFFSET_SIZE)"),
    Key("log.flush.interval.ms", 0, _int(0),
        "0: fsync every batch before replying (no acknowledged commit is lost); N: fsync every N ms "
        "(faster; a machine crash may lose the last N ms, a process crash loses nothing)"),
    Key("min.cleanable.dirty.ratio", 0.5, _ratio, "compact a partition when this share of its closed segments is dirty"),
    Key("log.cleaner.delete.retention.ms", 86400000, _int(0), "how long tombstones are kept before compaction drops them"),
    Key("log.cleaner.backoff.ms", 15000, _int(1), "how often partitions are checked for compaction"),
    Key("metrics.listener", "http://0.0.0.0:9464/metrics", _url,
        "where Prometheus scrapes groupd's metrics; empty turns the endpoint off"),
    Key("metrics.group.generation.enabled", False, _bool, "export each group's generation (one series per group)"),
    Key("metrics.group.offsets.enabled", False, _bool,
        "export each committed offset and its age (series grow as groups x partitions)"),
    Key("metrics.group.max.groups", 1000, _int(0),
        "most groups given per-group series (members, state, lag, generation, offsets): the first by "
        "group id; the totals always count every group"),
    Key("log.level", "info", _choice("debug", "info", "warning", "error"), "groupd's own log level"),
    Key("records.plane", "none", _choice("none", "memory"),
        "none: store no records (Produce refused, Fetch empty); memory: keep produced record batches "
        "in memory so producers and consumers move real messages"),
    Key("records.retention.bytes", 67108864, _int(1),
        "memory plane: most bytes kept per partition before the oldest batches are dropped "
        "(Kafka's retention.bytes)"),
    Key("records.retention.ms", 604800000, _int(-1),
        "memory plane: batches whose newest timestamp is older than this are dropped "
        "(Kafka's retention.ms); -1 = no time limit"),
    Key("records.message.max.bytes", 1048588, _int(1),
        "memory plane: largest record batch a Produce may carry (Kafka's message.max.bytes)"),
)

KEYS_BY_NAME = {k.name: k for k in KEYS}


def attribute(name: str) -> str:
    return name.replace(".", "_")


def env_var(name: str) -> str:
    return "GROUPD_" + name.replace(".", "_").upper()


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    node_id: int
    data_dir: str
    num_partitions: int
    topic_max_partitions: int
    auto_create_topics_enable: bool
    topics: dict[str, int]
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    socket_request_arrival_timeout_ms: int
    connections_max_queued_response_bytes: int
    queued_max_request_bytes: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_max_size: int
    group_coordinator_rebalance_protocols: tuple[str, ...]
    group_consumer_heartbeat_interval_ms: int
    group_consumer_min_heartbeat_interval_ms: int
    group_consumer_max_heartbeat_interval_ms: int
    group_consumer_session_timeout_ms: int
    group_consumer_min_session_timeout_ms: int
    group_consumer_max_session_timeout_ms: int
    group_consumer_assignors: tuple[str, ...]
    group_consumer_max_size: int
    group_consumer_migration_policy: str
    group_consumer_regex_refresh_interval_ms: int
    offset_metadata_max_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offsets_topic_num_partitions: int
    offsets_topic_segment_bytes: int
    offsets_commit_timeout_ms: int
    message_max_bytes: int
    log_flush_interval_ms: int
    min_cleanable_dirty_ratio: float
    log_cleaner_delete_retention_ms: int
    log_cleaner_backoff_ms: int
    metrics_listener: str
    metrics_group_generation_enabled: bool
    metrics_group_offsets_enabled: bool
    metrics_group_max_groups: int
    log_level: str
    records_plane: str
    records_retention_bytes: int
    records_retention_ms: int
    records_message_max_bytes: int
    # where each value came from: "default", "file <path>", "env GROUPD_X" or "--set"
    origins: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def advertised(self) -> Listener:
        """The address clients use to reach this node."""
        return (self.advertised_listeners or self.listeners)[0]

    def value(self, name: str) -> Any:
        return getattr(self, attribute(name))

    @classmethod
    def load(cls, config_file: str | None = None, env: Mapping[str, str] | None = None,
             overrides: list[str] | tuple[str, ...] = ()) -> Settings:
        env = os.environ if env is None else env
        raw: dict[str, tuple[Any, str]] = {k.name: (k.default, "default") for k in KEYS}
        if config_file:
            for name, value in _read_yaml(config_file).items():
                _known(name, f"in {config_file}")
                raw[name] = (value, f"file {config_file}")
        by_env = {env_var(k.name): k.name for k in KEYS}
        for var, value in env.items():
            if var.startswith("GROUPD_"):
                if var not in by_env:
                    raise ConfigError(f"unknown setting {var} in the environment (GROUPD_<KEY> with "
                                      f"dots as underscores; `groupd config show` lists the keys)")
                raw[by_env[var]] = (value, f"env {var}")
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--set takes key=value, not {item!r}")
            _known(name.strip(), "given to --set")
            raw[name.strip()] = (value, "--set")

        values = {}
        for name, (value, origin) in raw.items():
            try:
                values[attribute(name)] = KEYS_BY_NAME[name].parse(value)
            except ValueError as e:
                raise ConfigError(f"{name}={value!r} ({origin}) is not valid: expected {e}") from None
        settings = cls(**values, origins={name: origin for name, (_, origin) in raw.items()})
        settings._check()
        return settings

    def _check(self) -> None:
        if not self.listeners:
            raise ConfigError("listeners must name at least one PLAINTEXT://host:port")
        for name, count in [("num.partitions", self.num_partitions)] + [
                (f"topics ({topic})", n) for topic, n in self.topics.items()]:
            if count > self.topic_max_partitions:
                raise ConfigError(f"{name} asks for {count} partitions, more than topic.max.partitions "
                                  f"({self.topic_max_partitions})")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        for name in ("session.timeout.ms", "heartbeat.interval.ms"):
            lo, value, hi = (self.value(f"group.consumer.{bound}{name}") for bound in ("min.", "", "max."))
            if not lo <= value <= hi:
                raise ConfigError(f"group.consumer.{name}={value} must lie within group.consumer.min.{name}={lo} "
                                  f"and group.consumer.max.{name}={hi}")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
        adv = self.advertised
        if adv.host in ("0.0.0.0", "::"):
            raise ConfigError(f"advertised.listeners cannot use the non-routable address {adv.host}; "
                              "set advertised.listeners to an address clients can reach")


def _known(name: str, where: str) -> None:
    if name not in KEYS_BY_NAME:
        raise ConfigError(f"unknown setting {name!r} {where}; known settings: "
                          + ", ".join(k.name for k in KEYS))


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping of setting names to values")
    return data
