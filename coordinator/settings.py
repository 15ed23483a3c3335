"""The one typed settings object, read from (lowest to highest precedence) built-in defaults,
a YAML file, `GROUPD_<KEY>` environment variables and `--set key=value` arguments.

Keys carry Kafka's names and defaults. An unknown key in a file or `--set`, or a bad value, stops
start-up with a message that names the key and what it accepts; an unknown `GROUPD_*` variable
is only a warning (`Settings.warnings`), since orchestrators inject variables with that prefix.
Over 500 lines because it is the table of every key (name, default, parser, documentation) with the
parsers and cross-checks they share; config/groupd.yaml documents the same keys for operators.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import io
import os
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from groupd.storage.catalog import legal_topic_name
from groupd.storage.record_class import frozen_on_first_use


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


def _optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Kafka's settings with no default (null): unset (None, or empty outside YAML) or `parse`d."""
    return lambda v: None if v is None or (isinstance(v, str) and not v.strip()) else parse(v)


def _cleanup_policy(v: Any) -> tuple[str, ...]:
    items = _csv(v)
    if not set(items) <= {"compact", "delete"}:
        raise ValueError("a comma-separated list of compact, delete")
    return items


def _timestamp_type(v: Any) -> str:
    if _str(v).strip() not in ("CreateTime", "LogAppendTime"):
        raise ValueError("CreateTime or LogAppendTime")
    return _str(v).strip()


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


def _csv(v: Any) -> tuple[str, ...]:
    """A YAML list, or the items of a comma-separated string, stripped, empty ones dropped."""
    return tuple(s.strip() for s in (v if isinstance(v, list) else _str(v).split(",")) if s.strip())


def _etcd_endpoints(v: Any) -> tuple[str, ...]:
    """etcd's client endpoints as etcd and its clients write them (http://host:port, https://host:port)
    or host:port (http), each made a URL `scheme://host:port` (port 2379 when left out)."""
    out = []
    for item in _csv(v):
        url = urlsplit(item if "://" in item else f"http://{item}")
        try:
            port = url.port or 2379
        except ValueError:
            port = None
        if url.scheme not in ("http", "https") or not url.hostname or port is None \
                or url.path not in ("", "/") or url.query or url.fragment or url.username:
            raise ValueError(f"etcd endpoints (http://host:port, https://host:port or host:port, comma-separated), "
                             f"not {item!r}")
        host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
        out.append(f"{url.scheme}://{host}:{port}")
    return tuple(out)


def _etcd_prefix(v: Any) -> str:
    """An etcd key prefix: /name[/name...], kept without its trailing slash."""
    s = _str(v).strip().rstrip("/")
    if not s.startswith("/") or any(c.isspace() for c in s):
        raise ValueError("a key prefix that starts with / (e.g. /groupd), without spaces")
    return s


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def _protocol_map(v: Any) -> dict[str, str]:
    """listener.security.protocol.map: NAME:PROTOCOL pairs, each split at its last colon."""
    if isinstance(v, Mapping):
        pairs = [(str(k), _str(p)) for k, p in v.items()]
    else:
        pairs = []
        for item in filter(None, (s.strip() for s in _str(v).split(","))):
            name, sep, protocol = item.rpartition(":")
            if not sep or not name.strip():
                raise ValueError("NAME:PROTOCOL pairs separated by commas, e.g. INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL")
            pairs.append((name, protocol))
    out = {}
    for name, protocol in pairs:
        if protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"security protocols among {', '.join(SECURITY_PROTOCOLS)} (not {protocol!r})")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def _mechanisms(v: Any) -> tuple[str, ...]:
    items = _csv(v)
    if not set(items) <= set(SASL_MECHANISMS):
        raise ValueError("a comma-separated list of " + ", ".join(SASL_MECHANISMS))
    return items


def _broker_mechanism(v: Any) -> str:
    s = _str(v).strip().upper()
    if s not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ValueError("one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    return s


def _users(v: Any) -> dict[str, str]:
    """sasl.users: `{user: password}` in YAML, `user:password,...` in the environment or on the CLI
    (split at the first colon: a password may hold colons, a user name may not)."""
    if isinstance(v, str):
        pairs = [item.split(":", 1) for item in v.split(",") if item.strip()]
        if any(len(p) != 2 for p in pairs):
            raise ValueError("a map of user name to password (user:password,... outside YAML)")
        v = {user.strip(): password for user, password in pairs}
    if not isinstance(v, Mapping) or not all(isinstance(u, str) and u and isinstance(p, (str, int))
                                             for u, p in v.items()):
        raise ValueError("a map of user name to password")
    return {u: str(p) for u, p in v.items()}


def _tls_versions(v: Any) -> tuple[str, ...]:
    items = _csv(v)
    if not items or not set(items) <= {"TLSv1.2", "TLSv1.3"}:
        raise ValueError("a comma-separated list of TLSv1.2, TLSv1.3 (older protocols are not offered)")
    return items


def _protocols(v: Any) -> tuple[str, ...]:
    items = tuple(s.strip().lower() for s in (v if isinstance(v, list) else _str(v).split(",")))
    if "classic" not in items or not set(items) <= {"classic", "consumer", "share", "streams"}:
        raise ValueError("a comma-separated list of classic, consumer, share, streams that includes classic")
    return items


def _assignors(v: Any) -> tuple[str, ...]:
    items = tuple(s.lower() for s in _csv(v))
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


def parse_super_users(value: str) -> tuple[str, ...]:
    """`super.users`: `User:admin;User:ops`; each entry must have a `:` (ValueError otherwise)."""
    users = tuple(u.strip() for u in value.split(";") if u.strip())
    for u in users:
        if ":" not in u:
            raise ValueError(f"';'-separated principals Type:Name (not {u!r})")
    return users


def _super_users(v: Any) -> tuple[str, ...]:
    return parse_super_users(";".join(map(_str, v)) if isinstance(v, list) else _str(v))


def _url(v: Any) -> str:
    s = _str(v)
    if s and not urlsplit(s).port:
        raise ValueError("an http://host:port/path URL, or empty to turn the endpoint off")
    return s


# ---------------------------------------------------------------------------------------------


# Key and Settings: @dataclasses.dataclass(frozen=True, slots=True), each method made at its first call
# (storage/record_class.py): the decorator compiling Settings' 144-field methods was ~15 ms of start-up


@frozen_on_first_use
class Key:
    name: str  # Kafka's name
    default: Any
    parse: Callable[[Any], Any]
    doc: str
    secret: bool = False  # shown as [hidden] (Kafka's word) by `groupd config show`


KEYS: tuple[Key, ...] = (
    Key("listeners", "PLAINTEXT://127.0.0.1:9092", _listeners, "where groupd accepts connections"),
    Key("advertised.listeners", "", _listeners,
        "the address clients are told to use (Metadata, FindCoordinator); empty = listeners"),
    Key("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        _protocol_map, "NAME:PROTOCOL per listener name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
    Key("inter.broker.listener.name", "", _str,
        "the listener workers and cluster nodes send each other transaction markers and verifications on "
        "(its advertised address); empty = the first PLAINTEXT listener, else the first listener"),
    Key("sasl.mechanism.inter.broker.protocol", "PLAIN", _broker_mechanism,
        "the SASL mechanism workers and cluster nodes authenticate to each other with on a SASL "
        "inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, GSSAPI, is not "
        "supported); it must be in sasl.enabled.mechanisms"),
    Key("ssl.keystore.type", "PEM", _choice("pem"),
        "groupd reads PEM keystores only (Kafka's default, JKS, is not supported)"),
    Key("ssl.keystore.location", "", _str,
        "SSL/SASL_SSL listeners: a PEM file with the private key (PKCS#8) and the certificate chain, leaf first"),
    Key("ssl.key.password", "", _str, "password of an encrypted private key in the keystore", secret=True),
    Key("ssl.truststore.type", "PEM", _choice("pem"), "groupd reads PEM truststores only"),
    Key("ssl.truststore.location", "", _str,
        "PEM CA bundle that client certificates must chain to (needed for ssl.client.auth requested/required)"),
    Key("ssl.client.auth", "none", _choice("none", "requested", "required"),
        "client certificates on SSL listeners: none, requested (verified if sent) or required"),
    Key("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", _tls_versions, "TLS versions offered"),
    Key("ssl.cipher.suites", "", _str,
        "OpenSSL cipher list for TLS 1.2; empty = the library's default (TLS 1.3 suites cannot be restricted)"),
    Key("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", _mechanisms,
        "SASL mechanisms offered on SASL listeners (Kafka's default, GSSAPI, is not supported)"),
    Key("sasl.users", {}, _users,
        "SASL users: {name: password} (name:password,... in env/CLI); SCRAM credentials are derived at "
        "start-up (random salt, 4096 iterations) and kept in memory only", secret=True),
    Key("connections.max.reauth.ms", 0, _int(0),
        "SASL sessions last this long (KIP-368): a client that has not re-authenticated by then is "
        "disconnected at its next request; 0 = sessions never expire"),
    Key("connection.failed.authentication.delay.ms", 100, _int(0),
        "a failed authentication is answered and closed after this delay (slows password guessing)"),
    Key("sasl.server.max.receive.size", 524288, _int(1), "largest frame accepted before authentication"),
    # OAUTHBEARER (KIP-768): signed JWTs checked against the keys of a JWKS
    Key("sasl.oauthbearer.jwks.endpoint.url", "", _str,
        "OAUTHBEARER: where the JWKS is (file:///path, https://... or http://...); required when "
        "sasl.enabled.mechanisms holds OAUTHBEARER"),
    Key("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3600000, _int(1),
        "OAUTHBEARER: the JWKS is fetched again this often (off the event loop); a failed fetch keeps the keys"),
    Key("sasl.oauthbearer.expected.audience", "", _csv,
        "OAUTHBEARER: if set, a token's aud must hold one of these (comma-separated)"),
    Key("sasl.oauthbearer.expected.issuer", "", _str, "OAUTHBEARER: if set, a token's iss must be exactly this"),
    Key("sasl.oauthbearer.sub.claim.name", "sub", _str,
        "OAUTHBEARER: the claim whose value is the principal's name (User:<value>)"),
    Key("sasl.oauthbearer.scope.claim.name", "scope", _str,
        "OAUTHBEARER: the claim holding the token's scopes (a string or a list; not enforced)"),
    Key("sasl.oauthbearer.clock.skew.seconds", 30, _int(0),
        "OAUTHBEARER: tolerance applied to a token's exp, iat and nbf"),
    Key("node.id", 1, _int(0, 2**31 - 1), "this server's broker id in Metadata and FindCoordinator"),
    Key("workers", 1, _int(1, 256), "worker processes on this host (`groupd serve --workers N`): worker i is "
        "node.id + i on every listener's port + i and coordinates the offsets partitions p with p mod N = i; "
        "1 = one process"),
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
    Key("native.heartbeat.enable", True, _bool,
        "answer the steady classic Heartbeat and the steady ConsumerGroupHeartbeat in C "
        "(coordinator/server/_native.c); false: the pure-Python path only, the reference (no Kafka equivalent)"),
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
    Key("group.coordinator.rebalance.protocols", "classic,consumer,streams", _protocols,
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
        "how often a consumer group's regex subscriptions are re-resolved at the latest"),
    Key("group.share.heartbeat.interval.ms", 5000, _int(1), "how often share-group members heartbeat (KIP-932)"),
    Key("group.share.min.heartbeat.interval.ms", 5000, _int(1), "lowest group.share.heartbeat.interval.ms"),
    Key("group.share.max.heartbeat.interval.ms", 15000, _int(1), "highest group.share.heartbeat.interval.ms"),
    Key("group.share.session.timeout.ms", 45000, _int(1),
        "how long a share-group member may go without a heartbeat before it is fenced"),
    Key("group.share.min.session.timeout.ms", 45000, _int(1), "lowest group.share.session.timeout.ms"),
    Key("group.share.max.session.timeout.ms", 60000, _int(1), "highest group.share.session.timeout.ms"),
    Key("group.share.max.size", 200, _int(1), "most members a share group may have (Kafka: 1-1000)"),
    Key("group.streams.heartbeat.interval.ms", 5000, _int(1), "how often streams-group members heartbeat (KIP-1071)"),
    Key("group.streams.min.heartbeat.interval.ms", 5000, _int(1), "lowest group.streams.heartbeat.interval.ms"),
    Key("group.streams.max.heartbeat.interval.ms", 15000, _int(1), "highest group.streams.heartbeat.interval.ms"),
    Key("group.streams.session.timeout.ms", 45000, _int(1),
        "how long a streams-group member may go without a heartbeat before it is fenced"),
    Key("group.streams.min.session.timeout.ms", 45000, _int(1), "lowest group.streams.session.timeout.ms"),
    Key("group.streams.max.session.timeout.ms", 60000, _int(1), "highest group.streams.session.timeout.ms"),
    Key("group.streams.max.size", 2147483647, _int(1), "most members a streams group may have"),
    Key("group.streams.num.standby.replicas", 0, _int(0), "standby replicas of each task in a streams group"),
    Key("group.streams.initial.rebalance.delay.ms", 3000, _int(0),
        "how long a new streams group waits for more members before its first assignment"),
    Key("group.streams.max.standby.replicas", 2, _int(0), "highest group.streams.num.standby.replicas and a "
        "group's streams.num.standby.replicas"),
    Key("group.streams.assignment.interval.ms", 1000, _int(0),
        "least time between two target assignments of a streams group (joins in between are batched; 0: every change)"),
    Key("group.streams.min.assignment.interval.ms", 0, _int(0), "lowest group.streams.assignment.interval.ms and a "
        "group's streams.assignment.interval.ms"),
    Key("group.streams.max.assignment.interval.ms", 15000, _int(0), "highest group.streams.assignment.interval.ms "
        "and a group's streams.assignment.interval.ms"),
    Key("group.streams.assignor.offload.enable", True, _bool, "accepted for Kafka's name; Kafka 4.3.1 reads it "
        "nowhere, and groupd always assigns on the partition's loop"),
    Key("group.share.record.lock.duration.ms", 30000, _int(1000, 3600000),
        "how long a share consumer holds the records it acquired before they are delivered again"),
    Key("group.share.min.record.lock.duration.ms", 15000, _int(1000, 30000),
        "lowest group.share.record.lock.duration.ms and share.record.lock.duration.ms"),
    Key("group.share.max.record.lock.duration.ms", 60000, _int(30000, 3600000),
        "highest group.share.record.lock.duration.ms and share.record.lock.duration.ms"),
    Key("group.share.delivery.count.limit", 5, _int(2, 10),
        "deliveries of a share-group record before it is archived instead of released"),
    Key("group.share.min.delivery.count.limit", 2, _int(2, 10),
        "lowest group.share.delivery.count.limit and share.delivery.count.limit (Kafka 4.3)"),
    Key("group.share.max.delivery.count.limit", 10, _int(2, 10),
        "highest group.share.delivery.count.limit and share.delivery.count.limit (Kafka 4.3)"),
    Key("group.share.partition.max.record.locks", 2000, _int(100, 10000),
        "in-flight offsets per share-partition (acquired, or acknowledged above the start offset)"),
    Key("group.share.min.partition.max.record.locks", 100, _int(100, 10000),
        "lowest group.share.partition.max.record.locks and share.partition.max.record.locks (Kafka 4.3)"),
    Key("group.share.max.partition.max.record.locks", 4000, _int(100, 10000),
        "highest group.share.partition.max.record.locks and share.partition.max.record.locks (Kafka 4.3)"),
    Key("offset.metadata.max.bytes", 4096, _int(0), "longest commit metadata (UTF-16 code units)"),
    Key("offsets.retention.minutes", 10080, _int(1), "how long committed offsets are kept (KIP-211)"),
    Key("offsets.retention.check.interval.ms", 600000, _int(1), "how often expired offsets are removed"),
    Key("offsets.topic.num.partitions", 50, _int(1, 10_000),
        "partitions of the offsets log; never change it once data exists"),
    Key("offsets.topic.segment.bytes", 104857600, _int(14, 2**31 - 1), "segment size of the offsets log"),
    Key("transaction.max.timeout.ms", 900000, _int(1), "longest transaction timeout a producer may ask for"),
    Key("transaction.version", 2, _int(0, 2),
        "the finalized transaction.version feature ApiVersions advertises (Kafka finalizes it through the "
        "controller; 2 is Kafka 4.x's default): Java clients 4.x use transactions v2 (KIP-890) at 2"),
    Key("transaction.state.log.num.partitions", 50, _int(1, 10_000),
        "partitions of the __transaction_state log; never change it once data exists"),
    Key("transaction.state.log.segment.bytes", 104857600, _int(14, 2**31 - 1),
        "segment size of the __transaction_state log"),
    Key("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, _int(1),
        "how often transactions past their timeout are looked for and aborted"),
    Key("transactional.id.expiration.ms", 604800000, _int(1),
        "how long an idle transactional id is kept"),
    Key("transaction.remove.expired.transaction.cleanup.interval.ms", 3600000, _int(1),
        "how often expired transactional ids are removed"),
    Key("offsets.commit.timeout.ms", 5000, _int(1), "how long a log write may take before it fails"),
    Key("message.max.bytes", 1048588, _int(1),
        "largest record batch one request may write to the offsets log; a bigger one fails alone "
        "(OffsetCommit: INVALID_COMMIT_OFFSET_SIZE); also the default of topics' max.message.bytes"),
    Key("log.flush.interval.ms", 0, _int(0),
        "0: fsync every batch before replying (no acknowledged commit is lost); N: fsync every N ms "
        "(faster; a machine crash may lose the last N ms, a process crash loses nothing)"),
    Key("log.flush.syncfs", False, _bool,
        "groupd's own: under log.flush.interval.ms 0, a sync round of the offsets and transaction logs "
        "(every partition written in one loop turn) is one syncfs of the data dir's file system instead "
        "of an fsync of each partition; cheaper on a volume of its own, slower where other processes "
        "write to the same file system (it waits for their data too); Linux 5.8 or later, else ignored"),
    Key("min.cleanable.dirty.ratio", 0.5, _ratio, "compact a partition when this share of its closed segments is dirty"),
    Key("log.cleaner.delete.retention.ms", 86400000, _int(0), "how long tombstones are kept before compaction "
        "drops them; also the default of topics' delete.retention.ms"),
    Key("log.cleaner.backoff.ms", 15000, _int(1), "how often partitions are checked for compaction"),
    # the defaults of the topics' configs (Kafka's broker names for them; a topic's own config wins)
    Key("log.cleanup.policy", "delete", _cleanup_policy, "topics' default cleanup.policy: delete, compact or both"),
    Key("log.retention.ms", None, _optional(_int()),
        "topics' default retention.ms; unset: log.retention.minutes, else log.retention.hours; negative: no limit"),
    Key("log.retention.minutes", None, _optional(_int()), "topics' default retention in minutes when log.retention.ms "
        "is unset; unset: log.retention.hours"),
    Key("log.retention.hours", 168, _int(), "topics' default retention in hours when log.retention.ms and "
        "log.retention.minutes are unset"),
    Key("log.retention.bytes", -1, _int(), "topics' default retention.bytes (per partition); -1: no size limit"),
    Key("log.segment.bytes", 1073741824, _int(1048576, 2**31 - 1), "topics' default segment.bytes"),
    Key("log.roll.ms", None, _optional(_int(1)), "topics' default segment.ms; unset: log.roll.hours"),
    Key("log.roll.hours", 168, _int(1, 2**31 - 1), "topics' default segment.ms in hours when log.roll.ms is unset"),
    Key("log.roll.jitter.ms", None, _optional(_int(0)),
        "topics' default segment.jitter.ms; unset: log.roll.jitter.hours"),
    Key("log.roll.jitter.hours", 0, _int(0, 2**31 - 1),
        "topics' default segment.jitter.ms in hours when log.roll.jitter.ms is unset"),
    Key("log.cleaner.min.compaction.lag.ms", 0, _int(0), "topics' default min.compaction.lag.ms"),
    Key("log.message.timestamp.type", "CreateTime", _timestamp_type,
        "topics' default message.timestamp.type: CreateTime or LogAppendTime"),
    Key("default.replication.factor", 1, _int(1, 32767),
        "replicas of a topic created with replication factor -1 (Kafka's); groupd keeps one copy of each "
        "partition and also accepts CreateTopics asking for up to this many replicas (a single node otherwise "
        "refuses more than its broker count: INVALID_REPLICATION_FACTOR)"),
    Key("metrics.listener", "http://:9464/metrics", _url,
        "where Prometheus scrapes groupd's metrics; no host = the first listener's host; empty turns the "
        "endpoint off"),
    Key("admin.listener", "", _url,
        "the admin HTTP endpoint for fault injection (`groupd chaos`), e.g. http://127.0.0.1:9465; "
        "empty (the default) turns it off; serve it on loopback only"),
    Key("metrics.group.generation.enabled", False, _bool, "export each group's generation (one series per group)"),
    Key("metrics.group.offsets.enabled", False, _bool,
        "export each committed offset and its age (series grow as groups x partitions)"),
    Key("metrics.group.max.groups", 1000, _int(0),
        "most groups given per-group series (members, state, lag, generation, offsets): the first by "
        "group id; the totals always count every group"),
    Key("log.level", "info", _choice("debug", "info", "warning", "error"), "groupd's own log level"),
    Key("authorizer.class.name", "", _str,
        "empty: no authorization; any value (e.g. org.apache.kafka.metadata.authorizer.StandardAuthorizer) turns on "
        "groupd's ACL authorizer, with ACLs managed by CreateAcls/DeleteAcls and kept in data.dir/acls.json"),
    Key("super.users", "", _super_users, "principals allowed everything, ';'-separated: User:admin;User:ops"),
    Key("allow.everyone.if.no.acl.found", False, _bool,
        "with the authorizer on: allow a resource that no ACL names (a resource with any ACL follows its ACLs)"),
    Key("records.plane", "disk", _choice("none", "memory", "disk"),
        "disk: keep produced record batches in data.dir, one directory of segments per partition (a "
        "durable log, as Kafka's); memory: keep them in memory (for tests; a restart resumes each "
        "partition, empty, at its last log end); none: a pure group coordinator that stores no records "
        "(Produce refused, Fetch empty)"),
    Key("records.retention.bytes", 67108864, _int(1),
        "memory plane: most bytes kept per partition before the oldest batches are dropped "
        "(Kafka's retention.bytes)"),
    Key("records.retention.ms", 604800000, _int(-1),
        "memory plane: batches whose newest timestamp is older than this are dropped (Kafka's retention.ms; "
        "the disk plane follows each topic's retention.ms); -1 = no time limit"),
    Key("records.memory.max.bytes", 268435456, _int(1),
        "memory plane: most bytes kept over all partitions; beyond it the oldest batches of any "
        "partition are dropped (no Kafka equivalent: a broker's disk is its bound)"),
    Key("log.retention.check.interval.ms", 300000, _int(1),
        "how often the records plane's retention is applied (Kafka's name and default)"),
    Key("records.message.max.bytes", 1048588, _int(1),
        "memory plane: largest record batch a Produce may carry (Kafka's message.max.bytes)"),
    Key("cluster.etcd.endpoints", "", _etcd_endpoints,
        "cluster mode: etcd's client endpoints (http://host:port, https://host:port or host:port, "
        "comma-separated); empty = a lone node (docs/workers-and-cluster.md)"),
    Key("cluster.etcd.prefix", "/groupd", _etcd_prefix,
        "cluster mode: the etcd key prefix this cluster keeps its keys under (two clusters may share one "
        "etcd with different prefixes)"),
    Key("cluster.etcd.ssl.cafile", "", _str,
        "cluster mode, https:// endpoints: PEM CA bundle etcd's certificate must chain to (etcdctl --cacert); "
        "empty = the system's CAs"),
    Key("cluster.etcd.ssl.certfile", "", _str,
        "cluster mode, https:// endpoints: PEM client certificate for etcd's --client-cert-auth (etcdctl --cert)"),
    Key("cluster.etcd.ssl.keyfile", "", _str,
        "cluster mode, https:// endpoints: PEM private key of cluster.etcd.ssl.certfile (etcdctl --key)"),
    Key("cluster.lease.ms", 10000, _int(2000),
        "cluster mode: this node's etcd lease; its partitions move this long after it stops renewing"),
)

KEYS_BY_NAME = {k.name: k for k in KEYS}


def attribute(name: str) -> str:
    return name.replace(".", "_")


def env_var(name: str) -> str:
    return "GROUPD_" + name.replace(".", "_").upper()


@frozen_on_first_use
class Settings:
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    listener_security_protocol_map: dict[str, str]
    inter_broker_listener_name: str
    sasl_mechanism_inter_broker_protocol: str
    ssl_keystore_type: str
    ssl_keystore_location: str
    ssl_key_password: str
    ssl_truststore_type: str
    ssl_truststore_location: str
    ssl_client_auth: str
    ssl_enabled_protocols: tuple[str, ...]
    ssl_cipher_suites: str
    sasl_enabled_mechanisms: tuple[str, ...]
    sasl_users: dict[str, str]
    connections_max_reauth_ms: int
    connection_failed_authentication_delay_ms: int
    sasl_server_max_receive_size: int
    sasl_oauthbearer_jwks_endpoint_url: str
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int
    sasl_oauthbearer_expected_audience: tuple[str, ...]
    sasl_oauthbearer_expected_issuer: str
    sasl_oauthbearer_sub_claim_name: str
    sasl_oauthbearer_scope_claim_name: str
    sasl_oauthbearer_clock_skew_seconds: int
    node_id: int
    workers: int
    data_dir: str
    num_partitions: int
    topic_max_partitions: int
    auto_create_topics_enable: bool
    topics: dict[str, int]
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    socket_request_arrival_timeout_ms: int
    native_heartbeat_enable: bool
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
    group_share_heartbeat_interval_ms: int
    group_share_min_heartbeat_interval_ms: int
    group_share_max_heartbeat_interval_ms: int
    group_share_session_timeout_ms: int
    group_share_min_session_timeout_ms: int
    group_share_max_session_timeout_ms: int
    group_share_max_size: int
    group_share_record_lock_duration_ms: int
    group_streams_heartbeat_interval_ms: int
    group_streams_min_heartbeat_interval_ms: int
    group_streams_max_heartbeat_interval_ms: int
    group_streams_session_timeout_ms: int
    group_streams_min_session_timeout_ms: int
    group_streams_max_session_timeout_ms: int
    group_streams_max_size: int
    group_streams_num_standby_replicas: int
    group_streams_initial_rebalance_delay_ms: int
    group_streams_max_standby_replicas: int
    group_streams_assignment_interval_ms: int
    group_streams_min_assignment_interval_ms: int
    group_streams_max_assignment_interval_ms: int
    group_streams_assignor_offload_enable: bool
    group_share_min_record_lock_duration_ms: int
    group_share_max_record_lock_duration_ms: int
    group_share_delivery_count_limit: int
    group_share_min_delivery_count_limit: int
    group_share_max_delivery_count_limit: int
    group_share_partition_max_record_locks: int
    group_share_min_partition_max_record_locks: int
    group_share_max_partition_max_record_locks: int
    offset_metadata_max_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offsets_topic_num_partitions: int
    offsets_topic_segment_bytes: int
    transaction_max_timeout_ms: int
    transaction_version: int
    transaction_state_log_num_partitions: int
    transaction_state_log_segment_bytes: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transactional_id_expiration_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    offsets_commit_timeout_ms: int
    message_max_bytes: int
    log_flush_interval_ms: int
    log_flush_syncfs: bool
    min_cleanable_dirty_ratio: float
    log_cleaner_delete_retention_ms: int
    log_cleaner_backoff_ms: int
    log_cleanup_policy: tuple[str, ...]
    log_retention_ms: int | None
    log_retention_minutes: int | None
    log_retention_hours: int
    log_retention_bytes: int
    log_segment_bytes: int
    log_roll_ms: int | None
    log_roll_hours: int
    log_roll_jitter_ms: int | None
    log_roll_jitter_hours: int
    log_cleaner_min_compaction_lag_ms: int
    log_message_timestamp_type: str
    default_replication_factor: int
    metrics_listener: str
    admin_listener: str
    metrics_group_generation_enabled: bool
    metrics_group_offsets_enabled: bool
    metrics_group_max_groups: int
    log_level: str
    authorizer_class_name: str
    super_users: tuple[str, ...]
    allow_everyone_if_no_acl_found: bool
    records_plane: str
    records_retention_bytes: int
    records_retention_ms: int
    records_memory_max_bytes: int
    log_retention_check_interval_ms: int
    records_message_max_bytes: int
    cluster_etcd_endpoints: tuple[str, ...]
    cluster_etcd_prefix: str
    cluster_etcd_ssl_cafile: str
    cluster_etcd_ssl_certfile: str
    cluster_etcd_ssl_keyfile: str
    cluster_lease_ms: int
    # where each value came from: "default", "file <path>", "env GROUPD_X" or "--set"
    origins: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)
    # what start-up should log as warnings (unknown GROUPD_* variables)
    warnings: tuple[str, ...] = dataclasses.field(default=(), compare=False)

    @property
    def advertised(self) -> Listener:
        """The address clients of the first listener use to reach this node."""
        return self.advertised_for(self.listeners[0].name)

    def advertised_for(self, listener: str) -> Listener:
        """What a client that connected through `listener` is told (Metadata, FindCoordinator): that
        listener's advertised.listeners entry, else its listeners entry."""
        for adv in self.advertised_listeners:
            if adv.name == listener:
                return adv
        return next(l for l in self.listeners if l.name == listener)

    def security_protocol(self, listener: str) -> str:
        return self.listener_security_protocol_map[listener]

    def inter_broker_listener(self) -> str:
        """The listener brokers talk to each other on: `inter.broker.listener.name`; unset, the first
        PLAINTEXT one, else the first."""
        if self.inter_broker_listener_name:
            return self.inter_broker_listener_name
        for listener in self.listeners:
            if self.security_protocol(listener.name) == "PLAINTEXT":
                return listener.name
        return self.listeners[0].name

    @property
    def metrics_url(self) -> str:
        """metrics.listener with an empty host filled in from the first listener."""
        url = urlsplit(self.metrics_listener)
        if not self.metrics_listener or url.hostname:
            return self.metrics_listener
        return url._replace(netloc=f"{self.listeners[0].host or '0.0.0.0'}:{url.port}").geturl()

    def value(self, name: str) -> Any:
        return getattr(self, attribute(name))

    @classmethod
    def load(cls, config_file: str | None = None, env: Mapping[str, str] | None = None,
             overrides: list[str] | tuple[str, ...] = (), cross_checks: bool = True) -> Settings:
        """Every value parsed and valid; with `cross_checks`, also the rules between keys that only
        a server needs (a command that just finds the server's address skips them)."""
        env = os.environ if env is None else env
        raw: dict[str, tuple[Any, str]] = {k.name: (k.default, "default") for k in KEYS}
        if config_file:
            given = _read_yaml(config_file)
            for name, value in given.items():
                _known(name, f"in {config_file}")
                _set(raw, name, value, f"file {config_file}", given)
        by_env = {env_var(name): name for name in [*KEYS_BY_NAME, *ALIASES]}
        given_env = {by_env.get(var, var): value for var, value in env.items() if var.startswith("GROUPD_")}
        warnings = []
        for var, value in sorted(env.items()):
            if var.startswith("GROUPD_"):
                if var not in by_env:
                    # a warning, not a refusal: Kubernetes injects GROUPD_PORT=tcp://... for a Service
                    # named groupd, and other tools share the prefix
                    warnings.append(f"ignoring {var} in the environment: not a setting{_did_you_mean(var, by_env)} "
                                    f"(GROUPD_<KEY> with dots as underscores; `groupd config show` lists the keys)")
                    continue
                _set(raw, by_env[var], value, f"env {var}", given_env)
        given_set = dict(item.partition("=")[::2] for item in overrides)
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--set takes key=value, not {item!r}")
            _known(name.strip(), "given to --set")
            _set(raw, name.strip(), value, "--set", given_set)

        values = {}
        for name, (value, origin) in raw.items():
            try:
                values[attribute(name)] = KEYS_BY_NAME[name].parse(value)
            except ValueError as e:
                raise ConfigError(f"{name}={value!r} ({origin}) is not valid: expected {e}") from None
        settings = cls(**values, origins={name: origin for name, (_, origin) in raw.items()},
                       warnings=tuple(warnings))
        if cross_checks:
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
        for kind in ("consumer", "share", "streams"):
            for name in ("session.timeout.ms", "heartbeat.interval.ms"):
                lo, value, hi = (self.value(f"group.{kind}.{bound}{name}") for bound in ("min.", "", "max."))
                if not lo <= value <= hi:
                    raise ConfigError(f"group.{kind}.{name}={value} must lie within group.{kind}.min.{name}={lo} "
                                      f"and group.{kind}.max.{name}={hi}")
            if self.value(f"group.{kind}.heartbeat.interval.ms") >= self.value(f"group.{kind}.session.timeout.ms"):
                raise ConfigError(f"group.{kind}.heartbeat.interval.ms must be less than "
                                  f"group.{kind}.session.timeout.ms")
        lo, value, hi = (self.value(f"group.streams.{bound}assignment.interval.ms") for bound in ("min.", "", "max."))
        if not lo <= value <= hi:  # Kafka's GroupCoordinatorConfig requires min <= interval <= max
            raise ConfigError(f"group.streams.assignment.interval.ms={value} must lie within "
                              f"group.streams.min.assignment.interval.ms={lo} and "
                              f"group.streams.max.assignment.interval.ms={hi}")
        if self.group_streams_num_standby_replicas > self.group_streams_max_standby_replicas:
            raise ConfigError("group.streams.num.standby.replicas must not exceed group.streams.max.standby.replicas")
        if not 1 <= self.group_share_max_size <= 1000:
            raise ConfigError(f"group.share.max.size={self.group_share_max_size} must lie within 1 and 1000")
        for name in ("record.lock.duration.ms", "delivery.count.limit", "partition.max.record.locks"):
            lo, value, hi = (self.value(f"group.share.{bound}{name}") for bound in ("min.", "", "max."))
            if not lo <= value <= hi:
                raise ConfigError(f"group.share.{name}={value} must lie within group.share.min.{name}={lo} and "
                                  f"group.share.max.{name}={hi}")
        self._check_listeners()
        self._check_security()
        if self.workers > 1 and self.cluster_etcd_endpoints:
            raise ConfigError("workers > 1 and cluster.etcd.endpoints cannot be combined yet: run one process per "
                              "cluster node (each its own node.id)")
        self._check_etcd_tls()
        broker_protocol = self.security_protocol(self.inter_broker_listener())
        if (self.workers > 1 or self.cluster_etcd_endpoints) and broker_protocol.startswith("SASL_") and \
                self.sasl_mechanism_inter_broker_protocol not in self.sasl_enabled_mechanisms:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={self.sasl_mechanism_inter_broker_protocol} "
                              f"must be in sasl.enabled.mechanisms ({','.join(self.sasl_enabled_mechanisms)}): the "
                              f"brokers authenticate to each other with it on {self.inter_broker_listener()}")
        if self.workers > 1:  # worker i listens (and is advertised) on each port + i
            for l in (*self.listeners, *self.advertised_listeners):
                if not l.port or l.port + self.workers - 1 > 65535:
                    raise ConfigError(f"workers={self.workers} needs {l} to leave room for a port per worker "
                                      f"(worker i uses port + i): a fixed port at most {65536 - self.workers}")

    def _check_etcd_tls(self) -> None:
        if bool(self.cluster_etcd_ssl_certfile) != bool(self.cluster_etcd_ssl_keyfile):
            raise ConfigError("cluster.etcd.ssl.certfile and cluster.etcd.ssl.keyfile go together (the client "
                              "certificate and its private key)")
        tls = [n for n in ("cafile", "certfile", "keyfile") if self.value(f"cluster.etcd.ssl.{n}")]
        if tls and not any(e.startswith("https://") for e in self.cluster_etcd_endpoints):
            raise ConfigError(f"cluster.etcd.ssl.{tls[0]} is set but no cluster.etcd.endpoints is https://: "
                              "write etcd's TLS endpoints as https://host:port")

    def _check_listeners(self) -> None:
        names = [l.name for l in self.listeners]
        for name in names:
            if names.count(name) > 1:
                raise ConfigError(f"listeners names {name} twice: each listener must have a different name")
            if name not in self.listener_security_protocol_map:
                raise ConfigError(f"listener {name} has no security protocol: add {name}:PROTOCOL to "
                                  "listener.security.protocol.map")
        ports = [l.port for l in self.listeners if l.port]
        for port in ports:
            if ports.count(port) > 1:
                raise ConfigError(f"listeners use port {port} twice: each listener must have a different port")
        for adv in self.advertised_listeners:
            if adv.name not in names:
                raise ConfigError(f"advertised.listeners names {adv.name}, which is not in listeners "
                                  f"({', '.join(names)})")
        if self.inter_broker_listener_name and self.inter_broker_listener_name not in names:
            raise ConfigError(f"inter.broker.listener.name names {self.inter_broker_listener_name}, which is not "
                              f"in listeners ({', '.join(names)})")
        for name in names:
            adv = self.advertised_for(name)
            if adv.host in ("0.0.0.0", "::"):
                raise ConfigError(f"advertised.listeners cannot use the non-routable address {adv.host} "
                                  f"(listener {name}); set advertised.listeners to an address clients can reach")

    def _check_security(self) -> None:
        protocols = {self.security_protocol(l.name): l.name for l in self.listeners}
        tls = protocols.get("SSL") or protocols.get("SASL_SSL")
        if tls and not self.ssl_keystore_location:
            raise ConfigError(f"listener {tls} uses TLS but ssl.keystore.location is not set (a PEM file "
                              "with the private key and the certificate chain)")
        if tls and self.ssl_client_auth != "none" and not self.ssl_truststore_location:
            raise ConfigError(f"ssl.client.auth={self.ssl_client_auth} needs ssl.truststore.location (the CA "
                              "bundle client certificates must chain to)")
        sasl = protocols.get("SASL_PLAINTEXT") or protocols.get("SASL_SSL")
        if sasl and not self.sasl_enabled_mechanisms:
            raise ConfigError(f"listener {sasl} uses SASL but sasl.enabled.mechanisms is empty")
        oauth = "OAUTHBEARER" in self.sasl_enabled_mechanisms
        if sasl and not self.sasl_users and not oauth:
            raise ConfigError(f"listener {sasl} uses SASL but sasl.users names no user")
        if sasl and oauth and not self.sasl_oauthbearer_jwks_endpoint_url:
            raise ConfigError("sasl.enabled.mechanisms holds OAUTHBEARER but sasl.oauthbearer.jwks.endpoint.url "
                              "is not set (the JWKS whose keys sign the tokens)")
        if self.connection_failed_authentication_delay_ms >= self.connections_max_idle_ms:
            raise ConfigError("connection.failed.authentication.delay.ms must be less than connections.max.idle.ms")


# Kafka's names groupd accepts for one of its keys: {alias: (key, value of the key from the alias's)}
def _one_dir(v: Any) -> str:
    """log.dirs: Kafka's comma-separated list of log directories; groupd has one data directory."""
    dirs = [d.strip() for d in (v if isinstance(v, list) else str(v).split(",")) if str(d).strip()]
    if len(dirs) != 1:
        raise ConfigError(f"log.dirs={v!r} names {len(dirs)} directories; groupd keeps its log in one "
                          "directory (data.dir)")
    return dirs[0]


ALIASES: dict[str, tuple[str, Callable[[Any], Any]]] = {"log.dirs": ("data.dir", _one_dir)}


def _set(raw: dict[str, tuple[Any, str]], name: str, value: Any, origin: str, given: Mapping[str, Any]) -> None:
    """Record `name`'s value from one source; an alias stands for its key (not both in one source)."""
    if name in ALIASES:
        key, convert = ALIASES[name]
        if key in given:
            raise ConfigError(f"{name} and {key} are both set ({origin.split(' ')[0]}); {name} is Kafka's "
                              f"name for {key}: keep one")
        raw[key] = (convert(value), f"{origin} ({name})")
    else:
        raw[name] = (value, origin)


def _did_you_mean(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _known(name: str, where: str) -> None:
    if name not in KEYS_BY_NAME and name not in ALIASES:
        raise ConfigError(f"unknown setting {name!r} {where}{_did_you_mean(name, [*KEYS_BY_NAME, *ALIASES])}; "
                          "`groupd config show` lists the keys")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """`--config FILE` and `--set KEY=VALUE`: the sources, beside GROUPD_* variables, of every
    command that reads the settings (serve, config show, and the commands that find a running groupd)."""
    parser.add_argument("--config", metavar="FILE", help="YAML file of settings (Kafka names)")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        help="override one setting (repeatable); beats the file and GROUPD_* variables")


def _read_yaml(path: str) -> dict[str, Any]:
    import yaml  # here: only a config file needs it, and `serve` is started without one more often than not

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {getattr(e, 'strerror', None) or e}") from None
    if _is_properties(text):
        raise ConfigError(f"config file {path} is a Java properties file (key=value lines, like Kafka's "
                          "server.properties); groupd reads YAML with Kafka's names: write each line as "
                          "`key: value`, or pass single settings with --set key=value")
    try:
        stream = io.StringIO(text)
        stream.name = path  # what YAML's errors name
        data = yaml.safe_load(stream)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {' '.join(str(e).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping of setting names to values")
    return data


def _is_properties(text: str) -> bool:
    """Whether `text` reads as a Java properties file: every line that is not blank or a comment is
    `key=value` (a YAML mapping's `key: value` is not)."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith(("#", "!"))]
    return bool(lines) and all(_PROPERTY.match(line) for line in lines)


_PROPERTY = re.compile(r"[A-Za-z0-9_.\-]+\s*=")
