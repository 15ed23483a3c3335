"""The operations commands, at par with kafka-consumer-groups: `groupd groups list|describe|delete`,
`groupd offsets reset|delete`, `groupd health`.

They talk to a running groupd over the Kafka protocol with a small blocking client. groupd is a
single node and the coordinator of every group, so every request goes to the bootstrap address
itself: the client never follows Metadata or FindCoordinator to an advertised address. That is
why `groupd groups list --bootstrap 127.0.0.1:9092` works from a host whose groupd runs in a
compose network and advertises `groupd:9092`, a name only that network can resolve.

Each command gathers plain data first (`list_groups`, `describe_group`, `delete_groups`,
`delete_offsets`, `reset_offsets`, `health`), then prints it as a table or, with `--json`, as one
JSON document. Without `--bootstrap` a command finds groupd where the settings `serve` reads
(--config, GROUPD_* variables, --set) make it listen.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from itertools import count
from typing import Any

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request
from groupd.protocol.consumer import BadConsumerProtocol, assigned_partitions

from .offset_reset import Partition, PlanError, clamp, parse_datetime, parse_duration, parse_topics, read_csv, to_csv
from groupd.coordinator.settings import ConfigError, Settings, add_config_arguments
from groupd.coordinator.runtime.offsets_topic import NAME as OFFSETS_TOPIC
from groupd.coordinator.core.partitioning import partition_for

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
COMMANDS = ("groups", "offsets", "health")

# The versions the commands speak: all inside groupd's table (protocol/apis.py).
LIST_GROUPS_V = 5       # states and each group's type
DESCRIBE_GROUPS_V = 6   # GROUP_ID_NOT_FOUND for an unknown group instead of an empty "Dead" one
CONSUMER_GROUP_DESCRIBE_V = 1  # consumer (KIP-848) groups: epochs, current and target assignments
OFFSET_FETCH_V = 8      # batched groups; topics=null fetches every committed offset
OFFSET_COMMIT_V = 8
OFFSET_DELETE_V = 0
DELETE_GROUPS_V = 2
METADATA_V = 12
LIST_OFFSETS_V = 7
API_VERSIONS_V = 3
FIND_COORDINATOR_V = 3


class AdminError(Exception):
    """A command cannot do what it was asked; the message is for the operator."""


# ---------------------------------------------------------------------------------------------
# The wire: one connection, size-prefixed frames, one request at a time (also the tests' client,
# tests/support/process.py WireClient)


def split_bootstrap(bootstrap: str) -> tuple[str, int]:
    """`host:port`, `[v6 address]:port` or a listener `PLAINTEXT://host:port` → (host, port)."""
    text = bootstrap.split(",")[0].strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise AdminError(f"bootstrap address {bootstrap!r} is not host:port")
    return host.strip("[]"), int(port)


class AdminConnection:
    """A blocking Kafka connection: build a request from plain values (any version; fields a
    version does not have are ignored), get the decoded kio response back."""

    def __init__(self, bootstrap: str, client_id: str | None = "groupd-admin", timeout: float = 10.0) -> None:
        host, port = split_bootstrap(bootstrap)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._ids = count(1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def frame(self, api_key: int, version: int, values: Mapping[str, Any],
              correlation_id: int | None = None) -> tuple[int, bytes]:
        cid = next(self._ids) if correlation_id is None else correlation_id
        header = RequestHeader(api_key, version, cid, self.client_id)
        return cid, encode_request(header, build_request(api_key, version, values))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("server closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, values: Mapping[str, Any]) -> Any:
        cid, data = self.frame(api_key, version, values)
        self.send_raw(data)
        got, response = decode_response(api_key, version, self.read_frame())
        if got != cid:
            raise ConnectionError(f"correlation id {got} != {cid}")
        return response


# ---------------------------------------------------------------------------------------------
# Which broker to ask: one node is every group's coordinator; with several (`groupd serve --workers
# N`), a group's requests go to its coordinator, found as clients find it


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def brokers(conn: AdminConnection) -> dict[int, str]:
    """{node id: host:port} of the brokers Metadata lists (their advertised addresses)."""
    r = conn.request(ApiKey.METADATA, METADATA_V, {"topics": [], "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
    return {b.node_id: _address(b.host, b.port) for b in r.brokers}


class Brokers:
    """Connections to the brokers, opened as needed: the bootstrap alone when it is the only broker
    (its advertised address may not be reachable from here), else each at its advertised address."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self.bootstrap = AdminConnection(bootstrap, timeout=timeout)
        self.timeout = timeout
        self._open: dict[str, AdminConnection] = {}
        try:
            self.addresses = brokers(self.bootstrap)
        except BaseException:
            self.bootstrap.close()
            raise

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc: Any) -> None:
        for conn in (self.bootstrap, *self._open.values()):
            conn.close()

    def each(self) -> list[AdminConnection]:
        """A connection to every broker."""
        if len(self.addresses) <= 1:
            return [self.bootstrap]
        return [self._at(address) for address in self.addresses.values()]

    def coordinator(self, group: str) -> AdminConnection:
        """A connection to `group`'s coordinator, found as clients find it."""
        if len(self.addresses) <= 1:
            return self.bootstrap
        r = self.bootstrap.request(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_V, {"key": group, "key_type": 0})
        _check(r.error_code, f"FindCoordinator for group {group!r}", r.error_message)
        return self._at(_address(r.host, r.port))

    def list_offsets(self, partitions: Mapping[str, Iterable[int]], timestamp: int) -> dict:
        """ListOffsets of each data partition at its leader (Metadata's)."""
        if len(self.addresses) <= 1 or not partitions:
            return _list_offsets(self.bootstrap, partitions, timestamp)
        meta = self.bootstrap.request(ApiKey.METADATA, METADATA_V, {
            "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in sorted(partitions)],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        leaders = {(t.name, p.partition_index): p.leader_id for t in meta.topics for p in t.partitions}
        by_leader: dict[int, dict[str, set[int]]] = {}
        for topic, ps in partitions.items():
            for p in ps:
                by_leader.setdefault(leaders.get((topic, p), -1), {}).setdefault(topic, set()).add(p)
        out = {}
        for leader, asked in by_leader.items():
            address = self.addresses.get(leader)
            if address is None:  # no leader now: no offsets
                out.update({(t, p): None for t, ps in asked.items() for p in ps})
            else:
                out.update(_list_offsets(self._at(address), asked, timestamp))
        return out

    def _at(self, address: str) -> AdminConnection:
        if address not in self._open:
            self._open[address] = AdminConnection(address, timeout=self.timeout)
        return self._open[address]


def _check(error_code: ErrorCode, what: str, message: str | None = None) -> None:
    if error_code is not ErrorCode.none:
        raise AdminError(f"{what}: {error_code.name.upper()}" + (f" ({message})" if message else ""))


# ---------------------------------------------------------------------------------------------
# Requests


def _list_offsets(conn: AdminConnection, partitions: Mapping[str, Iterable[int]], timestamp: int) -> dict:
    """{(topic, partition): offset or None when that partition answered an error}."""
    topics = [{"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp,
                                          "current_leader_epoch": -1} for p in sorted(ps)]}
              for t, ps in sorted(partitions.items()) if ps]
    if not topics:
        return {}
    r = conn.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, {"replica_id": -1, "isolation_level": 0, "topics": topics})
    return {(t.name, p.partition_index): (p.offset if p.error_code is ErrorCode.none else None)
            for t in r.topics for p in t.partitions}


def _describe(conn: AdminConnection, group: str):
    """The DescribeGroups entry of `group`, or None when groupd does not know the group."""
    (g,) = conn.request(ApiKey.DESCRIBE_GROUPS, DESCRIBE_GROUPS_V,
                        {"groups": [group], "include_authorized_operations": False}).groups
    if g.error_code is ErrorCode.group_id_not_found:
        return None
    _check(g.error_code, f"DescribeGroups {group}", g.error_message)
    return g


def _describe_consumer_group(conn: AdminConnection, group: str):
    """The ConsumerGroupDescribe entry of `group`, or None when it is not a consumer group."""
    (g,) = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_DESCRIBE_V,
                        {"group_ids": [group], "include_authorized_operations": False}).groups
    if g.error_code in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
        return None
    _check(g.error_code, f"ConsumerGroupDescribe {group}", g.error_message)
    return g


def _named(assignment) -> dict[str, list[int]]:
    return {tp.topic_name: sorted(tp.partitions) for tp in assignment.topic_partitions}


def _committed(conn: AdminConnection, group: str) -> dict[tuple[str, int], tuple[int, str | None]]:
    r = conn.request(ApiKey.OFFSET_FETCH, OFFSET_FETCH_V,
                     {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
    (g,) = r.groups
    _check(g.error_code, f"OffsetFetch {group}")
    out = {}
    for t in g.topics:
        for p in t.partitions:
            _check(p.error_code, f"OffsetFetch {group} {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = (p.committed_offset, p.metadata)
    return out


def _assignment(protocol_type: str, data: bytes) -> dict[str, list[int]] | None:
    """A consumer member's assignment, decoded; None for other protocol types or bad bytes."""
    if protocol_type != "consumer":
        return None
    try:
        return assigned_partitions(data)
    except BadConsumerProtocol:
        return None


def list_groups(bootstrap: str, states: Iterable[str] = (), types: Iterable[str] = (),
                timeout: float = 10.0) -> list[dict]:
    """Every group, or those in one of `states` and of one of `types` (ListGroups filters)."""
    with Brokers(bootstrap, timeout) as cluster:  # each broker lists the groups it coordinates
        replies = [conn.request(ApiKey.LIST_GROUPS, LIST_GROUPS_V, {"states_filter": list(states),
                                                                    "types_filter": list(types)})
                   for conn in cluster.each()]
    for r in replies:
        _check(r.error_code, "ListGroups")
    return sorted(({"group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type,
                    "type": g.group_type} for r in replies for g in r.groups), key=lambda g: g["group"])


def _group_state(conn: AdminConnection, group: str) -> str | None:
    """The state of a group of any type, or None when groupd does not know it."""
    g = _describe(conn, group) or _describe_consumer_group(conn, group)
    return None if g is None else g.group_state


class UnknownGroup(AdminError):
    def __init__(self, group: str) -> None:
        super().__init__(f"group {group!r} does not exist")


def describe_group(bootstrap: str, group: str, timeout: float = 10.0) -> dict:
    """State, protocol, members (assignments decoded for the consumer protocol) and committed
    offsets with the log-end offset and lag of each partition."""
    with Brokers(bootstrap, timeout) as cluster:
        return _describe_group(cluster, group)


def describe_groups(bootstrap: str, groups: Iterable[str], timeout: float = 10.0) -> tuple[list[dict], list[str]]:
    """Each group's description, and the names of those groupd does not know."""
    found, missing = [], []
    with Brokers(bootstrap, timeout) as cluster:
        for group in groups:
            try:
                found.append(_describe_group(cluster, group))
            except UnknownGroup:
                missing.append(group)
    return found, missing


def all_group_ids(bootstrap: str, timeout: float = 10.0) -> list[str]:
    return [g["group"] for g in list_groups(bootstrap, timeout=timeout)]


def _describe_group(cluster: Brokers, group: str) -> dict:
    conn = cluster.coordinator(group)
    g = _describe(conn, group)
    c = _describe_consumer_group(conn, group) if g is None else None
    committed = _committed(conn, group)
    if g is None and c is None and not committed:
        raise UnknownGroup(group)
    members = []
    owner: dict[tuple[str, int], dict] = {}
    for m in (g.members if g is not None else ()):
        assignment = _assignment(g.protocol_type, m.member_assignment)
        member = {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                  "group_instance_id": m.group_instance_id, "assignment": assignment,
                  "assignment_bytes": len(m.member_assignment)}
        members.append(member)
        for topic, partitions in (assignment or {}).items():
            for p in partitions:
                owner[(topic, p)] = member
    for m in (c.members if c is not None else ()):
        member = {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                  "group_instance_id": m.instance_id, "member_epoch": m.member_epoch,
                  "assignment": _named(m.assignment), "target_assignment": _named(m.target_assignment)}
        members.append(member)
        for topic, partitions in member["assignment"].items():
            for p in partitions:
                owner[(topic, p)] = member
    partitions = set(committed) | set(owner)
    log_end = cluster.list_offsets(_by_topic(partitions), LATEST)
    offsets = []
    for topic, p in sorted(partitions):
        offset, metadata = committed.get((topic, p), (None, None))
        end = log_end.get((topic, p))
        member = owner.get((topic, p), {})
        offsets.append({"topic": topic, "partition": p, "offset": offset, "metadata": metadata,
                        "log_end_offset": end, "lag": _lag(offset, end),
                        "member_id": member.get("member_id"), "client_id": member.get("client_id"),
                        "client_host": member.get("client_host")})
    if c is not None:
        return {"group": group, "type": "consumer", "state": c.group_state, "protocol_type": "consumer",
                "protocol": c.assignor_name, "group_epoch": c.group_epoch, "assignment_epoch": c.assignment_epoch,
                "members": members, "offsets": offsets}
    return {"group": group, "type": "classic", "state": g.group_state if g is not None else "Empty",
            "protocol_type": g.protocol_type if g is not None else "",
            "protocol": g.protocol_data if g is not None else "",
            "members": members, "offsets": offsets}


def _lag(offset: int | None, log_end: int | None) -> int | None:
    """Log-end offset minus committed offset, as kafka-consumer-groups; unknown (None) when the
    commit lies past the log end: the partition's records are not here (records.plane: none stores
    none, the memory plane starts empty after a restart), so a negative number would only mislead."""
    if offset is None or log_end is None or offset > log_end:
        return None
    return log_end - offset


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for topic, p in partitions:
        out.setdefault(topic, set()).add(p)
    return out


def delete_groups(bootstrap: str, groups: Iterable[str], timeout: float = 10.0) -> dict[str, str | None]:
    """{group: None when deleted, else its error name} (DeleteGroups: only Empty groups go)."""
    with Brokers(bootstrap, timeout) as cluster:
        by_coordinator: dict[AdminConnection, list[str]] = {}
        for group in dict.fromkeys(groups):
            by_coordinator.setdefault(cluster.coordinator(group), []).append(group)
        results = [g for conn, names in by_coordinator.items()
                   for g in conn.request(ApiKey.DELETE_GROUPS, DELETE_GROUPS_V, {"groups_names": names}).results]
    return {g.group_id: None if g.error_code is ErrorCode.none else g.error_code.name.upper() for g in results}


def delete_offsets(bootstrap: str, group: str, topics: Iterable[str], timeout: float = 10.0) -> dict:
    """Delete `group`'s committed offsets of `topics` (`T` or `T:P,...`) with OffsetDelete:
    {"error": the group-level error or None, "partitions": [{topic, partition, error}]}."""
    scope = parse_topics(topics)
    with Brokers(bootstrap, timeout) as cluster:
        conn = cluster.coordinator(group)
        partitions = list(scope.partitions) + _topic_partitions(conn, scope.topics)
        r = conn.request(ApiKey.OFFSET_DELETE, OFFSET_DELETE_V, {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in sorted(ps)]}
            for t, ps in sorted(_by_topic(partitions).items())]})
    error = None if r.error_code is ErrorCode.none else r.error_code.name.upper()
    return {"group": group, "error": error, "partitions": sorted(
        ({"topic": t.name, "partition": p.partition_index,
          "error": None if p.error_code is ErrorCode.none else p.error_code.name.upper()}
         for t in r.topics for p in t.partitions), key=lambda x: (x["topic"], x["partition"]))}


def _topic_partitions(conn: AdminConnection, topics: Iterable[str]) -> list[tuple[str, int]]:
    """Every partition of each topic (Metadata); an unknown topic is an AdminError."""
    topics = list(topics)
    if not topics:
        return []
    meta = conn.request(ApiKey.METADATA, METADATA_V, {
        "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
    out = []
    for t in meta.topics:
        _check(t.error_code, f"topic {t.name!r}")
        out += [(t.name, p.partition_index) for p in sorted(t.partitions, key=lambda p: p.partition_index)]
    return out


# The reset scenarios (exactly one is given); each names the offset every partition gets.
SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime", "by_duration",
             "from_file")
INACTIVE = ("Empty", "Dead")


def reset_offsets(bootstrap: str, group: str, scenario: str, value: Any = None, *, topics: Iterable[str] = (),
                  all_topics: bool = False, execute: bool = False, timeout: float = 10.0,
                  warn: Callable[[str], None] = lambda line: None) -> dict:
    """Kafka's --reset-offsets: plan new offsets for the partitions of `topics` (`T`, `T:P,...`),
    of every committed partition (`all_topics`) or of the plan file (`from_file`: its text), and
    commit them with `execute`. Only while the group is inactive (Empty, or unknown: the commit
    creates it), as kafka-consumer-groups: the commit uses generation -1, which a group with
    members refuses anyway, so a member joining in between makes it fail rather than race."""
    with Brokers(bootstrap, timeout) as cluster:
        conn = cluster.coordinator(group)
        found = _group_state(conn, group)
        if found is not None and found not in INACTIVE:
            raise AdminError(f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                             f"state is {found}.")
        committed = {tp: offset for tp, (offset, _) in _committed(conn, group).items()}
        requested: dict[Partition, int] = read_csv(value, group) if scenario == "from_file" else {}
        if scenario == "from_file":
            partitions = sorted(requested)
        elif all_topics:
            partitions = sorted(committed)
        else:
            scope = parse_topics(topics)
            partitions = sorted(set(scope.partitions) | set(_topic_partitions(conn, scope.topics)))
        if not partitions:
            raise AdminError(f"nothing to reset: group {group!r} has no committed offsets")
        earliest, latest = (_log_offsets(cluster, partitions, ts) for ts in (EARLIEST, LATEST))
        plan = _plan(cluster, scenario, value, partitions, committed, requested, earliest, latest, warn)
        result = {"group": group, "execute": execute, "created": found is None,
                  "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(plan.items())]}
        if not execute:
            return result
        r = conn.request(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_V, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": [
                {"partition_index": p, "committed_offset": plan[(t, p)], "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p in sorted(ps)]} for t, ps in sorted(_by_topic(plan).items())]})
    failed = {f"{t.name}-{p.partition_index}": p.error_code.name.upper()
              for t in r.topics for p in t.partitions if p.error_code is not ErrorCode.none}
    if failed:
        raise AdminError(f"OffsetCommit for group {group!r} failed: "
                         + ", ".join(f"{tp} {err}" for tp, err in sorted(failed.items())))
    return result


def _plan(cluster: Brokers, scenario: str, value: Any, partitions: list[Partition],
          committed: Mapping[Partition, int], requested: Mapping[Partition, int],
          earliest: Mapping[Partition, int], latest: Mapping[Partition, int],
          warn: Callable[[str], None]) -> dict[Partition, int]:
    if scenario == "to_earliest":
        return {tp: earliest[tp] for tp in partitions}
    if scenario == "to_latest":
        return {tp: latest[tp] for tp in partitions}
    if scenario == "to_current":  # a partition without a commit gets its log-end offset, as Kafka's tool
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    if scenario in ("to_offset", "from_file"):
        # committed as given, not clamped: groupd may coordinate for brokers whose logs it does not hold
        return {tp: value for tp in partitions} if scenario == "to_offset" else dict(requested)
    if scenario == "shift_by":
        missing = [f"{t}-{p}" for t, p in partitions if (t, p) not in committed]
        if missing:
            raise AdminError(f"cannot shift the offset of {', '.join(missing)}: no committed offset")
        return clamp({tp: committed[tp] + value for tp in partitions}, earliest, latest, warn)
    timestamp = parse_datetime(value) if scenario == "to_datetime" else (
        int(time.time() * 1000) - int(parse_duration(value).total_seconds() * 1000))
    by_time = cluster.list_offsets(_by_topic(partitions), timestamp)
    plan = {}
    for tp in partitions:
        offset = by_time.get(tp)
        if offset is None or offset < 0:  # no record at or after the time
            warn(f"Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest known offset.")
            offset = latest[tp]
        plan[tp] = offset
    return plan


def _log_offsets(cluster: Brokers, partitions: list[Partition], timestamp: int) -> dict[Partition, int]:
    """The earliest or latest offset of every partition; a partition that has none is an AdminError."""
    found = cluster.list_offsets(_by_topic(partitions), timestamp)
    missing = [f"{t}-{p}" for t, p in partitions if found.get((t, p)) is None]
    if missing:
        raise AdminError(f"ListOffsets: unknown partition{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    return found


def health(bootstrap: str, timeout: float = 5.0, ready: bool = False) -> tuple[bool, str]:
    """(healthy, one line): healthy when ApiVersions answers error 0 within `timeout` seconds;
    with `ready`, only once every offsets partition is loaded too (`offsets_partitions_loaded`)."""
    start = time.monotonic()
    try:
        with AdminConnection(bootstrap, client_id="groupd-health", timeout=timeout) as conn:
            conn.sock.settimeout(max(timeout - (time.monotonic() - start), 0.001))
            r = conn.request(ApiKey.API_VERSIONS, API_VERSIONS_V,
                             {"client_software_name": "groupd-health", "client_software_version": "1"})
            loaded = offsets_partitions_loaded(conn) if ready and r.error_code is ErrorCode.none else None
    except AdminError as e:
        return False, f"unhealthy: {e}"
    except TimeoutError:
        return False, f"unhealthy: {bootstrap}: no answer within {timeout:g} s"
    except OSError as e:  # refused, unreachable, reset, closed
        return False, f"unhealthy: {bootstrap}: {e.strerror or e}"
    except Exception as e:  # an answer that is not an ApiVersions response
        return False, f"unhealthy: {bootstrap}: bad ApiVersions answer ({e!r})"
    elapsed = (time.monotonic() - start) * 1000
    if r.error_code is not ErrorCode.none:
        return False, f"unhealthy: {bootstrap} answered ApiVersions with {r.error_code.name.upper()}"
    if loaded is not None:
        n, total = loaded
        if n < total:
            return False, f"not ready: {bootstrap}: {n} of {total} offsets partitions loaded"
        return True, f"ready: {bootstrap}: {total} of {total} offsets partitions loaded ({elapsed:.1f} ms)"
    return True, f"healthy: {bootstrap} answered ApiVersions in {elapsed:.1f} ms ({len(r.api_keys)} APIs)"


def offsets_partitions_loaded(conn: AdminConnection) -> tuple[int, int]:
    """(loaded, all) offsets partitions: Metadata says how many `__consumer_offsets` has and who leads
    each (with several workers, each its own), then one DescribeGroups per broker asks about a group of
    each of its partitions; a partition still loading (or failed) answers COORDINATOR_LOAD_IN_PROGRESS
    (NOT_COORDINATOR) instead of describing it, and one without a leader counts as not loaded."""
    r = conn.request(ApiKey.METADATA, METADATA_V, {"topics": [{"name": OFFSETS_TOPIC, "topic_id": uuid.UUID(int=0)}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
    (topic,) = r.topics
    if topic.error_code is not ErrorCode.none:
        raise AdminError(f"Metadata for {OFFSETS_TOPIC} answered {topic.error_code.name.upper()}")
    probes = probe_groups(len(topic.partitions))
    addresses = {b.node_id: _address(b.host, b.port) for b in r.brokers}
    by_leader: dict[int, list[str]] = {}
    for p in topic.partitions:
        by_leader.setdefault(p.leader_id if len(addresses) > 1 else -2, []).append(probes[p.partition_index])
    unloaded = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
    loaded = 0
    for leader, groups in by_leader.items():
        if leader == -2:  # the only broker: the connection we have
            loaded += _describable(conn, groups, unloaded)
        elif leader in addresses:
            with AdminConnection(addresses[leader], conn.client_id, conn.sock.gettimeout() or 10.0) as at:
                loaded += _describable(at, groups, unloaded)
    return loaded, len(probes)


def _describable(conn: AdminConnection, groups: list[str], unloaded: tuple[ErrorCode, ...]) -> int:
    d = conn.request(ApiKey.DESCRIBE_GROUPS, DESCRIBE_GROUPS_V, {"groups": groups,
                                                                 "include_authorized_operations": False})
    return sum(g.error_code not in unloaded for g in d.groups)


def probe_groups(partitions: int) -> list[str]:
    """A group id for each offsets partition (the partition's own hash: coordinator/core/partitioning.py)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"groupd-ready-{i}"
        found.setdefault(partition_for(name, partitions), name)
        i += 1
    return [found[p] for p in range(partitions)]


# ---------------------------------------------------------------------------------------------
# The command line


def listener_address(settings: Settings) -> str:
    """host:port of the first PLAINTEXT listener of groupd's `listeners` (else the first; the
    commands speak neither TLS nor SASL), a wildcard host meaning loopback: where a command finds
    the groupd those settings configure."""
    if not settings.listeners:
        raise ConfigError("listeners must name at least one PLAINTEXT://host:port")
    listener = next((l for l in settings.listeners
                     if settings.listener_security_protocol_map.get(l.name) == "PLAINTEXT"), settings.listeners[0])
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(listener.host, listener.host)
    return f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"


def resolve_bootstrap(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> str:
    """`--bootstrap` when given; else the listener of the settings `serve` would read from the
    same sources (--config FILE, GROUPD_* variables, --set), so `groupd health --set
    listeners=PLAINTEXT://:19092` looks where `groupd serve --set listeners=...` listens.
    A bad setting is a ConfigError, as for serve."""
    if args.bootstrap:
        return args.bootstrap
    return listener_address(Settings.load(args.config, env=env, overrides=args.set, cross_checks=False))


STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead",  # classic
          "Assigning", "Reconciling")  # consumer (KIP-848) groups
TYPES = ("classic", "consumer", "share", "streams")


def _choices(allowed: tuple[str, ...], what: str) -> Callable[[str], list[str]]:
    """A comma-separated list of `allowed` names (any case) → Kafka's spelling of each."""
    by_lower = {a.lower(): a for a in allowed}

    def parse(text: str) -> list[str]:
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if s.lower() not in by_lower]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{', '.join(bad) or repr(text)}: not a {what} "
                                             f"(one of {', '.join(allowed)})")
        return [by_lower[s.lower()] for s in items]
    return parse


def common(sp: argparse.ArgumentParser, json_output: bool = True, timeout: float = 10.0) -> None:
    """The options every command that talks to a running groupd takes."""
    sp.add_argument("--bootstrap", "--bootstrap-server", dest="bootstrap", metavar="HOST:PORT", default=None,
                    help="groupd's address (default: the first PLAINTEXT listener in the settings serve "
                         "reads: --config, GROUPD_* variables, --set)")
    add_config_arguments(sp)
    sp.add_argument("--timeout", type=float, default=timeout, metavar="SECONDS",
                    help=f"network timeout (default {timeout:g})")
    if json_output:
        sp.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `groups`, `offsets` and `health` on groupd's sub-command parser."""
    groups = sub.add_parser("groups", help="list, describe and delete groups of a running groupd")
    groups_sub = groups.add_subparsers(dest="groups_command", required=True)
    listing = groups_sub.add_parser("list", help="every group: id, state, protocol type, type (ListGroups)")
    listing.add_argument("--state", type=_choices(STATES, "group state"), action="extend", default=[],
                         metavar="S[,S...]", help="only groups in one of these states")
    listing.add_argument("--type", type=_choices(TYPES, "group type"), action="extend", default=[],
                         metavar="T[,T...]", help="only groups of one of these types")
    common(listing)
    describe = groups_sub.add_parser("describe", help="groups' state, members, assignments and committed offsets")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("group", nargs="*", default=[])
    which.add_argument("--all-groups", action="store_true", help="every group groupd knows")
    common(describe)
    delete = groups_sub.add_parser("delete", help="delete Empty groups and their offsets (DeleteGroups)")
    delete.add_argument("group", nargs="+")
    common(delete)

    offsets = sub.add_parser("offsets", help="change a group's committed offsets")
    offsets_sub = offsets.add_subparsers(dest="offsets_command", required=True)
    drop = offsets_sub.add_parser("delete", help="delete a group's committed offsets of topics (OffsetDelete)")
    drop.add_argument("group")
    drop.add_argument("--topic", action="append", required=True, metavar="T[:P,...]",
                      help="a topic, or some of its partitions (repeatable)")
    common(drop)
    reset = offsets_sub.add_parser("reset", help="plan new committed offsets and, with --execute, commit them "
                                                 "(only while the group is Empty)")
    reset.add_argument("group")
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", metavar="T[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="each partition's earliest offset (ListOffsets)")
    to.add_argument("--to-latest", action="store_true", help="each partition's log-end offset (ListOffsets)")
    to.add_argument("--to-current", action="store_true",
                    help="the committed offset (the log-end offset where there is none)")
    to.add_argument("--to-offset", type=_non_negative, metavar="N", help="offset N on every partition")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="the committed offset plus N (negative: back), kept within [earliest, latest]")
    to.add_argument("--to-datetime", metavar="ISO8601",
                    help="the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss, local unless a zone)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after this long ago")
    to.add_argument("--from-file", metavar="CSV", help="the offsets of a topic,partition,offset file (--export)")
    run_mode = reset.add_mutually_exclusive_group()
    run_mode.add_argument("--execute", action="store_true", help="commit the plan (default: print it only)")
    run_mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    reset.add_argument("--export", action="store_true", help="print the plan as CSV topic,partition,offset")
    common(reset)

    health_parser = sub.add_parser("health", help="exit 0 if groupd answers ApiVersions within the timeout, else 1")
    health_parser.add_argument("--ready", action="store_true",
                               help="exit 0 only once every offsets partition is loaded (readiness)")
    common(health_parser, json_output=False, timeout=5.0)


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError("an offset is 0 or more")
    return n


def _warn(line: str) -> None:
    print(f"groupd: warning: {line}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run a parsed `groups`, `offsets` or `health` command; the exit status."""
    if args.command == "offsets" and args.offsets_command == "reset" and not (
            args.topic or args.all_topics or args.from_file):  # a usage mistake: 2, as argparse's
        prog = "groupd offsets reset"
        print(f"{prog}: one of the reset scopes is needed: --topic T[:P,...] or --all-topics (see {prog} --help)",
              file=sys.stderr)
        return 2
    if args.command == "health":
        return report(args, lambda bootstrap: _health(args, bootstrap))
    return report(args, lambda bootstrap: _command(args, bootstrap))


def _health(args: argparse.Namespace, bootstrap: str) -> tuple[int, Any, str]:
    ok, line = health(bootstrap, args.timeout, args.ready)
    return (0 if ok else 1), None, line


def report(args: argparse.Namespace, work: Callable[[str], tuple[int, Any, str]]) -> int:
    """Find groupd (resolve_bootstrap), run a command's `work(bootstrap)` → (exit status, data,
    text) and print the text, or the data with --json; a failure is one line on stderr. The exit
    status."""
    try:
        bootstrap = resolve_bootstrap(args)
    except ConfigError as e:
        print(f"groupd: configuration error: {e}", file=sys.stderr)
        return 2
    try:
        code, data, text = work(bootstrap)
    except (AdminError, PlanError) as e:
        print(f"groupd: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"groupd: {bootstrap}: {e.strerror or e}", file=sys.stderr)
        return 1
    output = json.dumps(data, indent=2) if getattr(args, "json", False) and data is not None else text
    if output:
        print(output)
    return code


def _command(args: argparse.Namespace, bootstrap: str) -> tuple[int, Any, str]:
    """(exit status, the JSON document, the text) of a groups or offsets command."""
    timeout = args.timeout
    if args.command == "groups" and args.groups_command == "list":
        data: Any = list_groups(bootstrap, args.state, args.type, timeout)
        return 0, data, table(["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"],
                               [[g["group"], g["state"], g["protocol_type"] or "-", g["type"]] for g in data])
    if args.command == "groups" and args.groups_command == "describe":
        names = all_group_ids(bootstrap, timeout) if args.all_groups else list(dict.fromkeys(args.group))
        found, missing = describe_groups(bootstrap, names, timeout)
        for group in missing:
            print(f"groupd: group {group!r} does not exist", file=sys.stderr)
        one = len(names) == 1 and not args.all_groups
        if one and not found:
            return 1, None, ""
        data = found[0] if one else found
        text = "\n\n".join(_describe_text(d) for d in found) if found else "no groups"
        if any(o["lag"] is None and o["offset"] is not None for d in found for o in d["offsets"]):
            text += "\n\n" + LAG_FOOTNOTE
        return (1 if missing else 0), data, text
    if args.command == "groups":
        results = delete_groups(bootstrap, args.group, timeout)
        failed = {g: e for g, e in results.items() if e is not None}
        for group, error in failed.items():
            print(f"groupd: group {group!r} could not be deleted: {error}"
                  + (" (it has members; stop them first)" if error == "NON_EMPTY_GROUP" else ""), file=sys.stderr)
        deleted = [g for g, e in results.items() if e is None]
        text = f"deleted group{'s' if len(deleted) > 1 else ''} " + ", ".join(repr(g) for g in deleted) if deleted else ""
        return (1 if failed else 0), {"deleted": deleted, "failed": failed}, text
    if args.offsets_command == "delete":
        r = delete_offsets(bootstrap, args.group, args.topic, timeout)
        if r["error"] is not None:
            raise AdminError(f"cannot delete the offsets of group {args.group!r}: {r['error']}"
                             + _OFFSET_DELETE_HINTS.get(r["error"], ""))
        failed = any(p["error"] for p in r["partitions"])
        if failed:
            print(f"groupd: some offsets of group {args.group!r} were not deleted", file=sys.stderr)
        return (1 if failed else 0), r, table(["TOPIC", "PARTITION", "STATUS"], [
            [p["topic"], p["partition"], f"Error: {p['error']}" if p["error"] else "Successful"]
            for p in r["partitions"]])
    scenario = next(s for s in SCENARIOS if getattr(args, s) not in (None, False))
    value = getattr(args, scenario)
    if scenario == "from_file":
        value = _read_plan_file(value)
    r = reset_offsets(bootstrap, args.group, scenario, value, topics=args.topic or (), all_topics=args.all_topics,
                      execute=args.execute, timeout=timeout, warn=_warn)
    if args.export:
        return 0, r, to_csv({(o["topic"], o["partition"]): o["offset"] for o in r["offsets"]}).rstrip("\n")
    return 0, r, _reset_text(r)


_OFFSET_DELETE_HINTS = {"NON_EMPTY_GROUP": " (it has members; stop them first)",
                        "GROUP_ID_NOT_FOUND": " (no such group)",
                        "GROUP_SUBSCRIBED_TO_TOPIC": " (its members consume that topic)"}

LAG_FOOTNOTE = ("LAG -: the committed offset is past the log-end offset: groupd does not hold those records "
                "(records.plane: none keeps none; or the partition's records were removed from the data dir)")


def _read_plan_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise AdminError(f"cannot read --from-file {path}: {e.strerror or e}") from None


def table(header: list[str], rows: list[list[Any]]) -> str:
    cells = [header] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _partitions(assignment: dict[str, list[int]] | None, size: int) -> str:
    if assignment is None:
        return f"({size} bytes)"
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(assignment.items())) or "-"


def _describe_text(d: dict) -> str:
    members = d["members"]
    plural = "s" if len(members) != 1 else ""
    if d["type"] == "consumer":
        out = [f"group {d['group']}: consumer group {d['state']}, group epoch {d['group_epoch']}, assignment "
               f"epoch {d['assignment_epoch']}, assignor {d['protocol']}, {len(members)} member{plural}"]
        if members:
            out += ["", table(["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "EPOCH", "ASSIGNMENT", "TARGET"],
                               [[m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"],
                                 m["member_epoch"], _partitions(m["assignment"], 0),
                                 _partitions(m["target_assignment"], 0)] for m in members])]
    else:
        out = [f"group {d['group']}: {d['state']}, protocol type {d['protocol_type'] or '-'}, "
               f"protocol {d['protocol'] or '-'}, {len(members)} member{plural}"]
    if members and d["type"] == "classic":
        out += ["", table(["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "ASSIGNMENT"],
                           [[m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"],
                             _partitions(m["assignment"], m["assignment_bytes"])] for m in members])]
    out += ["", table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                       "CLIENT-ID"],  # kafka-consumer-groups --describe's columns
                      [[o["topic"], o["partition"], o["offset"], o["log_end_offset"], o["lag"], o["member_id"],
                        o["client_host"], o["client_id"]]
                       for o in d["offsets"]])
            if d["offsets"] else "no committed offsets"]
    return "\n".join(out)


def _reset_text(r: dict) -> str:
    rows = table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                 [[r["group"], o["topic"], o["partition"], o["offset"]] for o in r["offsets"]])
    if not r["execute"]:
        return rows + "\n(dry run: nothing committed; add --execute to commit)"
    return rows + f"\ncommitted {len(r['offsets'])} offset{'s' if len(r['offsets']) != 1 else ''}" + (
        f" (group {r['group']} is new)" if r["created"] else "")
