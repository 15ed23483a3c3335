"""The operations commands, at par with kafka-consumer-groups: `groupd groups list|describe|delete`,
`groupd offsets reset|delete`, `groupd health`.

They talk to a running groupd over the Kafka protocol with a small blocking client. groupd is a
single node and the coordinator of every group, so every request goes to the bootstrap address
itself: the client never follows Metadata or FindCoordinator to an advertised address. That is
why `groupd groups list --bootstrap 127.0.0.1:9092` works from a host whose groupd runs in a
compose network and advertises `groupd:9092`, a name only that network can resolve.

This module gathers plain data (`list_groups`, `describe_group`, `delete_groups`, `delete_offsets`,
`reset_offsets`, `health`) through the client (client.py); commands.py parses the command line and
prints it as a table (render.py) or, with `--json`, as one JSON document. Without `--bootstrap` a command
finds groupd where the settings `serve` reads
(--config, GROUPD_* variables, --set) make it listen. A TLS or SASL listener is reached with Kafka's
client properties, `--command-config FILE` or `--set key=value` as Kafka's tools take them
(coordinator/tools/client_config.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.runtime.offsets_topic import NAME as OFFSETS_TOPIC
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.consumer import BadConsumerProtocol, assigned_partitions

from .client import (
    API_VERSIONS_V,
    CONSUMER_GROUP_DESCRIBE_V,
    DELETE_GROUPS_V,
    DESCRIBE_GROUPS_V,
    DESCRIBE_SHARE_GROUP_OFFSETS_V,
    EARLIEST,
    LATEST,
    LIST_GROUPS_V,
    METADATA_V,
    OFFSET_COMMIT_V,
    OFFSET_DELETE_V,
    OFFSET_FETCH_V,
    SHARE_GROUP_DESCRIBE_V,
    STREAMS_GROUP_DESCRIBE_V,
    AdminConnection,
    AdminError,
    Brokers,
    address,
    check,
)
from .client_config import ClientConfig
from .offset_reset import Partition, clamp, parse_datetime, parse_duration, parse_topics, read_csv


def _describe(conn: AdminConnection, group: str):
    """The DescribeGroups entry of `group`, or None when groupd does not know the group."""
    (g,) = conn.request(ApiKey.DESCRIBE_GROUPS, DESCRIBE_GROUPS_V,
                        {"groups": [group], "include_authorized_operations": False}).groups
    if g.error_code is ErrorCode.group_id_not_found:
        return None
    check(g.error_code, f"DescribeGroups {group}", g.error_message)
    return g


def _describe_consumer_group(conn: AdminConnection, group: str):
    """The ConsumerGroupDescribe entry of `group`, or None when it is not a consumer group."""
    (g,) = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_DESCRIBE_V,
                        {"group_ids": [group], "include_authorized_operations": False}).groups
    if g.error_code in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
        return None
    check(g.error_code, f"ConsumerGroupDescribe {group}", g.error_message)
    return g


def _describe_share_group(conn: AdminConnection, group: str):
    """The ShareGroupDescribe entry of `group`, or None when it is not a share group."""
    (g,) = conn.request(ApiKey.SHARE_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE_V,
                        {"group_ids": [group], "include_authorized_operations": False}).groups
    if g.error_code is ErrorCode.group_id_not_found:
        return None
    check(g.error_code, f"ShareGroupDescribe {group}", g.error_message)
    return g


def _describe_streams_group(conn: AdminConnection, group: str):
    """The StreamsGroupDescribe entry of `group`, or None when it is not a streams group."""
    (g,) = conn.request(ApiKey.STREAMS_GROUP_DESCRIBE, STREAMS_GROUP_DESCRIBE_V,
                        {"group_ids": [group], "include_authorized_operations": False}).groups
    if g.error_code in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
        return None
    check(g.error_code, f"StreamsGroupDescribe {group}", g.error_message)
    return g


def _named(assignment) -> dict[str, list[int]]:
    return {tp.topic_name: sorted(tp.partitions) for tp in assignment.topic_partitions}


def _committed(conn: AdminConnection, group: str) -> dict[tuple[str, int], tuple[int, str | None]]:
    r = conn.request(ApiKey.OFFSET_FETCH, OFFSET_FETCH_V,
                     {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
    (g,) = r.groups
    check(g.error_code, f"OffsetFetch {group}")
    out = {}
    for t in g.topics:
        for p in t.partitions:
            check(p.error_code, f"OffsetFetch {group} {t.name}-{p.partition_index}")
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
                timeout: float = 10.0, security: ClientConfig | None = None) -> list[dict]:
    """Every group, or those in one of `states` and of one of `types` (ListGroups filters)."""
    with Brokers(bootstrap, timeout, security) as cluster:  # each broker lists the groups it coordinates
        replies = [conn.request(ApiKey.LIST_GROUPS, LIST_GROUPS_V, {"states_filter": list(states),
                                                                    "types_filter": list(types)})
                   for conn in cluster.each()]
    for r in replies:
        check(r.error_code, "ListGroups")
    return sorted(({"group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type,
                    "type": g.group_type} for r in replies for g in r.groups), key=lambda g: g["group"])


def _group_state(conn: AdminConnection, group: str) -> str | None:
    """The state of a group of any type, or None when groupd does not know it."""
    g = (_describe(conn, group) or _describe_consumer_group(conn, group) or _describe_share_group(conn, group)
         or _describe_streams_group(conn, group))
    return None if g is None else g.group_state


class UnknownGroup(AdminError):
    def __init__(self, group: str) -> None:
        super().__init__(f"group {group!r} does not exist")


def describe_group(bootstrap: str, group: str, timeout: float = 10.0, security: ClientConfig | None = None) -> dict:
    """State, protocol, members (assignments decoded for the consumer protocol) and committed
    offsets with the log-end offset and lag of each partition."""
    with Brokers(bootstrap, timeout, security) as cluster:
        return _describe_group(cluster, group)


def describe_groups(bootstrap: str, groups: Iterable[str], timeout: float = 10.0,
                    security: ClientConfig | None = None) -> tuple[list[dict], list[str]]:
    """Each group's description, and the names of those groupd does not know."""
    found, missing = [], []
    with Brokers(bootstrap, timeout, security) as cluster:
        for group in groups:
            try:
                found.append(_describe_group(cluster, group))
            except UnknownGroup:
                missing.append(group)
    return found, missing


def all_group_ids(bootstrap: str, timeout: float = 10.0, security: ClientConfig | None = None) -> list[str]:
    return [g["group"] for g in list_groups(bootstrap, timeout=timeout, security=security)]


def _describe_group(cluster: Brokers, group: str) -> dict:
    conn = cluster.coordinator(group)
    g = _describe(conn, group)
    c = _describe_consumer_group(conn, group) if g is None else None
    if g is None and c is None:
        share = _describe_share_group(conn, group)
        if share is not None:
            return _share_description(group, share, _share_offsets(cluster, conn, group))
    s = _describe_streams_group(conn, group) if g is None and c is None else None
    committed = _committed(conn, group)
    if g is None and c is None and s is None and not committed:
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
    if s is not None:
        return _streams_description(group, s, offsets)
    if c is not None:
        return {"group": group, "type": "consumer", "state": c.group_state, "protocol_type": "consumer",
                "protocol": c.assignor_name, "group_epoch": c.group_epoch, "assignment_epoch": c.assignment_epoch,
                "members": members, "offsets": offsets}
    return {"group": group, "type": "classic", "state": g.group_state if g is not None else "Empty",
            "protocol_type": g.protocol_type if g is not None else "",
            "protocol": g.protocol_data if g is not None else "",
            "members": members, "offsets": offsets}


def _share_offsets(cluster: Brokers, conn: AdminConnection, group: str) -> list[dict]:
    """Each share-partition's start offset and lag (DescribeShareGroupOffsets v1 at the group's
    coordinator, every initialized share-partition) with its log end; None where there is no state yet."""
    (g,) = conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DESCRIBE_SHARE_GROUP_OFFSETS_V,
                        {"groups": [{"group_id": group, "topics": None}]}).groups
    check(g.error_code, f"DescribeShareGroupOffsets {group}", g.error_message)
    rows = [(t.topic_name, p) for t in g.topics for p in t.partitions]
    log_end = cluster.list_offsets(_by_topic((topic, p.partition_index) for topic, p in rows), LATEST)
    return [{"topic": topic, "partition": p.partition_index,
             "offset": p.start_offset if p.start_offset >= 0 else None,
             "log_end_offset": log_end.get((topic, p.partition_index)), "lag": p.lag if p.lag >= 0 else None}
            for topic, p in rows if p.error_code is ErrorCode.none]


def _share_description(group: str, s, offsets: list[dict]) -> dict:
    """A share group: its epochs and members, each with the partitions it shares, and each
    share-partition's start offset (as `offset`), log end and lag."""
    members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "subscribed_topics": list(m.subscribed_topic_names), "assignment": _named(m.assignment)}
               for m in s.members]
    return {"group": group, "type": "share", "state": s.group_state, "protocol_type": "share",
            "protocol": s.assignor_name, "group_epoch": s.group_epoch, "assignment_epoch": s.assignment_epoch,
            "members": members, "offsets": offsets}


def _streams_description(group: str, s, offsets: list[dict]) -> dict:
    """A streams group: its epochs, topology epoch and members, each with its process and tasks
    (subtopology id → partitions), and the committed offsets of its source topics."""
    def tasks(entries) -> dict[str, list[int]]:
        return {t.subtopology_id: sorted(t.partitions) for t in entries if t.partitions}

    members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                "process_id": m.process_id, "member_epoch": m.member_epoch, "topology_epoch": m.topology_epoch,
                "user_endpoint": f"{m.user_endpoint.host}:{m.user_endpoint.port}" if m.user_endpoint else None,
                "active_tasks": tasks(m.assignment.active_tasks), "standby_tasks": tasks(m.assignment.standby_tasks),
                "target_active_tasks": tasks(m.target_assignment.active_tasks)}
               for m in s.members]
    return {"group": group, "type": "streams", "state": s.group_state, "protocol_type": "streams",
            "protocol": "sticky", "group_epoch": s.group_epoch, "assignment_epoch": s.assignment_epoch,
            "topology_epoch": s.topology.epoch if s.topology is not None else None,
            "subtopologies": len(s.topology.subtopologies or ()) if s.topology is not None else 0,
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


def delete_groups(bootstrap: str, groups: Iterable[str], timeout: float = 10.0,
                  security: ClientConfig | None = None) -> dict[str, str | None]:
    """{group: None when deleted, else its error name} (DeleteGroups: only Empty groups go)."""
    with Brokers(bootstrap, timeout, security) as cluster:
        by_coordinator: dict[AdminConnection, list[str]] = {}
        for group in dict.fromkeys(groups):
            by_coordinator.setdefault(cluster.coordinator(group), []).append(group)
        results = [g for conn, names in by_coordinator.items()
                   for g in conn.request(ApiKey.DELETE_GROUPS, DELETE_GROUPS_V, {"groups_names": names}).results]
    return {g.group_id: None if g.error_code is ErrorCode.none else g.error_code.name.upper() for g in results}


def delete_offsets(bootstrap: str, group: str, topics: Iterable[str], timeout: float = 10.0,
                   security: ClientConfig | None = None) -> dict:
    """Delete `group`'s committed offsets of `topics` (`T` or `T:P,...`) with OffsetDelete:
    {"error": the group-level error or None, "partitions": [{topic, partition, error}]}."""
    scope = parse_topics(topics)
    with Brokers(bootstrap, timeout, security) as cluster:
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
        check(t.error_code, f"topic {t.name!r}")
        out += [(t.name, p.partition_index) for p in sorted(t.partitions, key=lambda p: p.partition_index)]
    return out


# The reset scenarios (exactly one is given); each names the offset every partition gets.
SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime", "by_duration",
             "from_file")
INACTIVE = ("Empty", "Dead")


def reset_offsets(bootstrap: str, group: str, scenario: str, value: Any = None, *, topics: Iterable[str] = (),
                  all_topics: bool = False, execute: bool = False, timeout: float = 10.0,
                  warn: Callable[[str], None] = lambda line: None, security: ClientConfig | None = None) -> dict:
    """Kafka's --reset-offsets: plan new offsets for the partitions of `topics` (`T`, `T:P,...`),
    of every committed partition (`all_topics`) or of the plan file (`from_file`: its text), and
    commit them with `execute`. Only while the group is inactive (Empty, or unknown: the commit
    creates it), as kafka-consumer-groups: the commit uses generation -1, which a group with
    members refuses anyway, so a member joining in between makes it fail rather than race."""
    with Brokers(bootstrap, timeout, security) as cluster:
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


def health(bootstrap: str, timeout: float = 5.0, ready: bool = False,
           security: ClientConfig | None = None) -> tuple[bool, str]:
    """(healthy, one line): healthy when ApiVersions answers error 0 within `timeout` seconds;
    with `ready`, only once every offsets partition is loaded too (`offsets_partitions_loaded`)."""
    start = time.monotonic()
    try:
        with AdminConnection(bootstrap, client_id="groupd-health", timeout=timeout, security=security) as conn:
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
    addresses = {b.node_id: address(b.host, b.port) for b in r.brokers}
    by_leader: dict[int, list[str]] = {}
    for p in topic.partitions:
        by_leader.setdefault(p.leader_id if len(addresses) > 1 else -2, []).append(probes[p.partition_index])
    unloaded = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
    loaded = 0
    for leader, groups in by_leader.items():
        if leader == -2:  # the only broker: the connection we have
            loaded += _describable(conn, groups, unloaded)
        elif leader in addresses:
            with AdminConnection(addresses[leader], conn.client_id, conn.sock.gettimeout() or 10.0,
                                 security=conn.security) as at:
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
