"""The operations commands: `groupd groups list|describe`, `groupd offsets reset`, `groupd health`.

They talk to a running groupd over the Kafka protocol with a small blocking client. groupd is a
single node and the coordinator of every group, so every request goes to the bootstrap address
itself: the client never follows Metadata or FindCoordinator to an advertised address. That is
why `groupd groups list --bootstrap 127.0.0.1:9092` works from a host whose groupd runs in a
compose network and advertises `groupd:9092`, a name only that network can resolve.

Each command gathers plain data first (`list_groups`, `describe_group`, `reset_offsets`,
`health`), then prints it as a table or, with `--json`, as one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from itertools import count
from typing import Any

from protocol import ErrorCode
from protocol.apis import ApiKey
from protocol.codec import RequestHeader, build_request, decode_response, encode_request
from protocol.consumer import BadConsumerProtocol, assigned_partitions

from .offsets_topic import NAME as OFFSETS_TOPIC
from .partitioning import partition_for
from .settings import KEYS_BY_NAME

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
COMMANDS = ("groups", "offsets", "health")

# The versions the commands speak: all inside groupd's table (protocol/apis.py).
LIST_GROUPS_V = 5       # states and each group's type
DESCRIBE_GROUPS_V = 6   # GROUP_ID_NOT_FOUND for an unknown group instead of an empty "Dead" one
CONSUMER_GROUP_DESCRIBE_V = 1  # consumer (KIP-848) groups: epochs, current and target assignments
OFFSET_FETCH_V = 8      # batched groups; topics=null fetches every committed offset
OFFSET_COMMIT_V = 8
METADATA_V = 12
LIST_OFFSETS_V = 7
API_VERSIONS_V = 3


class AdminError(Exception):
    """A command cannot do what it was asked; the message is for the operator."""


# ---------------------------------------------------------------------------------------------
# The wire: one connection, size-prefixed frames, one request at a time (also the tests' client,
# tests/support.py WireClient)


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


def list_groups(bootstrap: str, timeout: float = 10.0) -> list[dict]:
    with AdminConnection(bootstrap, timeout=timeout) as conn:
        r = conn.request(ApiKey.LIST_GROUPS, LIST_GROUPS_V, {"states_filter": [], "types_filter": []})
    _check(r.error_code, "ListGroups")
    return sorted(({"group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type,
                    "type": g.group_type} for g in r.groups), key=lambda g: g["group"])


def describe_group(bootstrap: str, group: str, timeout: float = 10.0) -> dict:
    """State, protocol, members (assignments decoded for the consumer protocol) and committed
    offsets with the log-end offset and lag of each partition."""
    with AdminConnection(bootstrap, timeout=timeout) as conn:
        g = _describe(conn, group)
        c = _describe_consumer_group(conn, group) if g is None else None
        committed = _committed(conn, group)
        if g is None and c is None and not committed:
            raise AdminError(f"group {group!r} does not exist")
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
        by_topic: dict[str, set[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, set()).add(p)
        log_end = _list_offsets(conn, by_topic, LATEST)
    offsets = []
    for topic, p in sorted(partitions):
        offset, metadata = committed.get((topic, p), (None, None))
        end = log_end.get((topic, p))
        member = owner.get((topic, p), {})
        offsets.append({"topic": topic, "partition": p, "offset": offset, "metadata": metadata,
                        "log_end_offset": end,
                        # as kafka-consumer-groups: negative when the commit is past the log end
                        # (always, for a commit above 0 while groupd stores no records)
                        "lag": None if offset is None or end is None else end - offset,
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


def reset_offsets(bootstrap: str, group: str, topic: str, *, to_offset: int | None = None,
                  dry_run: bool = False, timeout: float = 10.0) -> dict:
    """Commit a new offset for every partition of `topic`: its earliest offset (ListOffsets) or
    `to_offset`. Only while the group is Empty (or unknown), as kafka-consumer-groups does: the
    commit uses generation -1, which a group with members would refuse anyway."""
    with AdminConnection(bootstrap, timeout=timeout) as conn:
        g = _describe(conn, group)
        if g is not None and g.group_state != "Empty":
            members = len(g.members)
            raise AdminError(
                f"cannot reset the offsets of group {group!r}: it is {g.group_state} with {members} "
                f"member{'s' if members != 1 else ''}; offsets can only be reset while the group is Empty "
                "(stop its consumers first)")
        meta = conn.request(ApiKey.METADATA, METADATA_V, {
            "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
        (t,) = meta.topics
        _check(t.error_code, f"topic {topic!r}")
        partitions = sorted(p.partition_index for p in t.partitions)
        if to_offset is None:
            earliest = _list_offsets(conn, {topic: partitions}, EARLIEST)
            missing = [p for p in partitions if earliest.get((topic, p)) is None]
            if missing:
                raise AdminError(f"ListOffsets found no earliest offset for {topic} partitions {missing}")
            plan = {p: earliest[(topic, p)] for p in partitions}
        else:
            plan = {p: to_offset for p in partitions}
        result = {"group": group, "topic": topic, "dry_run": dry_run, "created": g is None,
                  "offsets": [{"partition": p, "offset": o} for p, o in plan.items()]}
        if dry_run:
            return result
        r = conn.request(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_V, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p, o in plan.items()]}]})
    failed = {f"{t.name}-{p.partition_index}": p.error_code.name.upper()
              for t in r.topics for p in t.partitions if p.error_code is not ErrorCode.none}
    if failed:
        raise AdminError(f"OffsetCommit for group {group!r} failed: "
                         + ", ".join(f"{tp} {err}" for tp, err in sorted(failed.items())))
    return result


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
    """(loaded, all) offsets partitions: Metadata says how many `__consumer_offsets` has, then one
    DescribeGroups asks about a group of each partition; a partition still loading (or failed)
    answers COORDINATOR_LOAD_IN_PROGRESS (NOT_COORDINATOR) instead of describing it."""
    r = conn.request(ApiKey.METADATA, METADATA_V, {"topics": [{"name": OFFSETS_TOPIC, "topic_id": uuid.UUID(int=0)}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
    (topic,) = r.topics
    if topic.error_code is not ErrorCode.none:
        raise AdminError(f"Metadata for {OFFSETS_TOPIC} answered {topic.error_code.name.upper()}")
    probes = probe_groups(len(topic.partitions))
    d = conn.request(ApiKey.DESCRIBE_GROUPS, DESCRIBE_GROUPS_V, {"groups": probes,
                                                                 "include_authorized_operations": False})
    unloaded = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
    return sum(g.error_code not in unloaded for g in d.groups), len(probes)


def probe_groups(partitions: int) -> list[str]:
    """A group id for each offsets partition (the partition's own hash: coordinator/partitioning.py)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"groupd-ready-{i}"
        found.setdefault(partition_for(name, partitions), name)
        i += 1
    return [found[p] for p in range(partitions)]


# ---------------------------------------------------------------------------------------------
# The command line


def default_bootstrap(env: Mapping[str, str] | None = None) -> str:
    """The first of groupd's own `GROUPD_LISTENERS` when set (a wildcard host becomes loopback),
    so that inside groupd's container the commands (and the HEALTHCHECK) need no flag; else
    127.0.0.1:9092."""
    value = (os.environ if env is None else env).get("GROUPD_LISTENERS", "")
    try:
        listeners = KEYS_BY_NAME["listeners"].parse(value) if value else ()
    except ValueError:
        listeners = ()
    if not listeners:
        return DEFAULT_BOOTSTRAP
    host = listeners[0].host
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{host}]:{listeners[0].port}" if ":" in host else f"{host}:{listeners[0].port}"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `groups`, `offsets` and `health` on groupd's sub-command parser."""
    def common(sp: argparse.ArgumentParser, json_output: bool = True, timeout: float = 10.0) -> None:
        sp.add_argument("--bootstrap", metavar="HOST:PORT", default=None,
                        help="groupd's address (default: the first of GROUPD_LISTENERS, else "
                             f"{DEFAULT_BOOTSTRAP})")
        sp.add_argument("--timeout", type=float, default=timeout, metavar="SECONDS",
                        help=f"network timeout (default {timeout:g})")
        if json_output:
            sp.add_argument("--json", action="store_true", help="print one JSON document instead of tables")

    groups = sub.add_parser("groups", help="list and describe groups of a running groupd")
    groups_sub = groups.add_subparsers(dest="groups_command", required=True)
    common(groups_sub.add_parser("list", help="every group: id, state, protocol type (ListGroups)"))
    describe = groups_sub.add_parser("describe", help="a group's state, members, assignments and committed offsets")
    describe.add_argument("group")
    common(describe)

    offsets = sub.add_parser("offsets", help="change a group's committed offsets")
    offsets_sub = offsets.add_subparsers(dest="offsets_command", required=True)
    reset = offsets_sub.add_parser("reset", help="commit new offsets for every partition of a topic "
                                                 "(only while the group is Empty)")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="each partition's earliest offset (ListOffsets)")
    to.add_argument("--to-offset", type=_non_negative, metavar="N", help="offset N on every partition")
    reset.add_argument("--dry-run", action="store_true", help="print the new offsets without committing them")
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


def run(args: argparse.Namespace) -> int:
    """Run a parsed `groups`, `offsets` or `health` command; the exit status."""
    bootstrap = args.bootstrap or default_bootstrap()
    if args.command == "health":
        ok, line = health(bootstrap, args.timeout, args.ready)
        print(line)
        return 0 if ok else 1
    try:
        if args.command == "groups" and args.groups_command == "list":
            data: Any = list_groups(bootstrap, args.timeout)
            text = _table(["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"],
                          [[g["group"], g["state"], g["protocol_type"] or "-", g["type"]] for g in data])
        elif args.command == "groups":
            data = describe_group(bootstrap, args.group, args.timeout)
            text = _describe_text(data)
        else:
            data = reset_offsets(bootstrap, args.group, args.topic, to_offset=args.to_offset,
                                 dry_run=args.dry_run, timeout=args.timeout)
            text = _reset_text(data)
    except AdminError as e:
        print(f"groupd: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"groupd: {bootstrap}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(json.dumps(data, indent=2) if args.json else text)
    return 0


def _table(header: list[str], rows: list[list[Any]]) -> str:
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
            out += ["", _table(["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "EPOCH", "ASSIGNMENT", "TARGET"],
                               [[m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"],
                                 m["member_epoch"], _partitions(m["assignment"], 0),
                                 _partitions(m["target_assignment"], 0)] for m in members])]
    else:
        out = [f"group {d['group']}: {d['state']}, protocol type {d['protocol_type'] or '-'}, "
               f"protocol {d['protocol'] or '-'}, {len(members)} member{plural}"]
    if members and d["type"] == "classic":
        out += ["", _table(["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "ASSIGNMENT"],
                           [[m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"],
                             _partitions(m["assignment"], m["assignment_bytes"])] for m in members])]
    out += ["", _table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"],
                       [[o["topic"], o["partition"], o["offset"], o["log_end_offset"], o["lag"], o["member_id"]]
                        for o in d["offsets"]])
            if d["offsets"] else "no committed offsets"]
    return "\n".join(out)


def _reset_text(r: dict) -> str:
    table = _table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                   [[r["group"], r["topic"], o["partition"], o["offset"]] for o in r["offsets"]])
    if r["dry_run"]:
        return table + "\n(dry run: nothing committed)"
    return table + f"\ncommitted {len(r['offsets'])} offset{'s' if len(r['offsets']) != 1 else ''}" + (
        f" (group {r['group']} is new)" if r["created"] else "")
