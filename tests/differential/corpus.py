"""The differential corpus: request sequences over the group APIs, each a function of a `Side`.

Every scenario runs once against Apache Kafka and once against groupd (test_corpus.py); its recorded
answers are compared after normalisation (diff.py). A scenario only uses the topics `TOPICS` (created
on both servers first) and groups named after itself (`s.group(...)`), so scenarios never see each
other. Requests are the same on both servers; ids a server hands out are taken from its own answers.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import time
import uuid
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.consumer import encode_assignment, encode_subscription
from groupd.storage.records_plane.batches import iter_batches

from .diff import Scenario, Side

TOPICS = {"dt1": 1, "dt3": 3}
GROUP_APIS = [ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP,
              ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
              ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE, ApiKey.CONSUMER_GROUP_HEARTBEAT,
              ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE]

ms = lambda n: datetime.timedelta(milliseconds=n)  # noqa: E731

# the versions of the classic APIs that go together (what a client of JoinGroup vN sends next)
SYNC_FOR_JOIN = {0: 0, 1: 0, 2: 1, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 5, 9: 5}
HEARTBEAT_FOR_JOIN = {0: 0, 1: 0, 2: 1, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4, 8: 4, 9: 4}
LEAVE_FOR_JOIN = {0: 0, 1: 0, 2: 1, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4, 8: 5, 9: 5}
DESCRIBE_FOR_JOIN = {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 8: 5, 9: 5}
SUB = encode_subscription(["dt3"])


def join(group: str, member: str = "", instance: str | None = None, session: int = 10_000,
         rebalance: int = 10_000, protocol_type: str = "consumer", protocols: Any = None) -> dict:
    return {"group_id": group, "session_timeout": ms(session), "rebalance_timeout": ms(rebalance),
            "member_id": member, "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": protocols if protocols is not None else [{"name": "range", "metadata": SUB}],
            "reason": None}


def sync(group: str, generation: int, member: str, assignments: dict[str, dict[str, list[int]]] | None = None,
         instance: str | None = None, protocol_type: str | None = "consumer",
         protocol_name: str | None = "range") -> dict:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
            "protocol_type": protocol_type, "protocol_name": protocol_name,
            "assignments": [{"member_id": m, "assignment": encode_assignment(a)}
                            for m, a in (assignments or {}).items()]}


def described(groups: list[str]) -> dict:
    """A DescribeGroups request (without authorized operations)."""
    return {"groups": groups, "include_authorized_operations": False}


def heartbeat(group: str, generation: int, member: str, instance: str | None = None) -> dict:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance}


def leave(group: str, member: str, instance: str | None = None) -> dict:
    return {"group_id": group, "member_id": member,
            "members": [{"member_id": member, "group_instance_id": instance, "reason": None}]}


def commit(group: str, offsets: dict[str, dict[int, int]], generation: int = -1, member: str = "",
           instance: str | None = None, metadata: str = "") -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": instance, "retention_time": ms(-1),
            "topics": [{"name": t, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "commit_timestamp": -1,
                 "committed_metadata": metadata} for p, o in parts.items()]} for t, parts in offsets.items()]}


def fetch(version: int, group: str, topics: dict[str, list[int]] | None, member: str | None = None,
          epoch: int = -1) -> dict:
    ts = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    if version >= 8:
        return {"groups": [{"group_id": group, "member_id": member, "member_epoch": epoch, "topics": ts}],
                "require_stable": False}
    return {"group_id": group, "topics": ts, "require_stable": False}


def join_alone(s: Side, group: str, version: int = 9, client: str = "c", label: str = "join",
               **kw: Any) -> tuple[str, int]:
    """One member joins `group` (retrying MEMBER_ID_REQUIRED) and, as leader, syncs `dt3` to itself."""
    r = s.call(label, ApiKey.JOIN_GROUP, version, join(group, **kw), client)
    if r.error_code == ErrorCode.member_id_required:
        r = s.call(label + "-again", ApiKey.JOIN_GROUP, version, join(group, **{**kw, "member": r.member_id}), client)
    if r.error_code != ErrorCode.none:
        return r.member_id, r.generation_id
    s.call(label + "-sync", ApiKey.SYNC_GROUP, SYNC_FOR_JOIN[version],
           sync(group, r.generation_id, r.member_id, {r.member_id: {"dt3": [0, 1, 2]}},
                instance=kw.get("instance")), client)
    return r.member_id, r.generation_id


def wait_state(s: Side, group: str, state: str, timeout: float = 60.0) -> None:
    """Poll DescribeGroups (unrecorded) until `group` is in `state`: a request sent on one connection
    must have landed before the next one on another connection may race it. A bound, not a sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = s.client("poll").request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group],
                                                                 "include_authorized_operations": False})
        if r.groups[0].group_state == state:
            return
        time.sleep(0.02)


CORPUS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    CORPUS[fn.__name__] = fn
    return fn


def versions(name: str, vs: range, body) -> None:
    """A scenario per version: `name-v<N>`."""
    for v in vs:
        def run(s: Side, v: int = v) -> None:
            body(s, v)
        run.__name__ = f"{name}-v{v}"
        CORPUS[run.__name__] = run


# ---- ApiVersions and FindCoordinator ------------------------------------------------------------

@scenario
def api_versions_groups(s: Side) -> None:
    r = s.client().request(ApiKey.API_VERSIONS, 3, {"client_software_name": "groupd-differential",
                                                    "client_software_version": "1"})
    table = {k.api_key: [k.min_version, k.max_version] for k in r.api_keys}
    s.record("api-versions", {ApiKey(k).name: table.get(k) for k in GROUP_APIS})


def _find_coordinator(s: Side, v: int) -> None:
    for label, key in (("group", s.group()), ("empty-key", "")):
        s.call(f"find-{label}", ApiKey.FIND_COORDINATOR, v,
               {"key": key, "key_type": 0, "coordinator_keys": [key]})


versions("find_coordinator", range(0, 7), _find_coordinator)


# ---- one member through a whole classic life, at each JoinGroup version ----------------------

def _classic_life(s: Side, v: int) -> None:
    g = s.group()
    instance = "static-1" if v >= 5 else None
    member, gen = join_alone(s, g, v, instance=instance)
    s.call("heartbeat", ApiKey.HEARTBEAT, HEARTBEAT_FOR_JOIN[v], heartbeat(g, gen, member, instance))
    s.call("commit", ApiKey.OFFSET_COMMIT, min(max(v, 2), 9),
           commit(g, {"dt3": {0: 5, 1: 6}}, gen, member, instance if v >= 7 else None))
    s.call("describe", ApiKey.DESCRIBE_GROUPS, DESCRIBE_FOR_JOIN[v],
           described([g]))
    s.call("leave", ApiKey.LEAVE_GROUP, LEAVE_FOR_JOIN[v], leave(g, member, instance))
    s.call("describe-after-leave", ApiKey.DESCRIBE_GROUPS, DESCRIBE_FOR_JOIN[v],
           described([g]))
    s.call("fetch", ApiKey.OFFSET_FETCH, 6, fetch(6, g, {"dt3": [0, 1, 2]}))


versions("classic_life", range(0, 10), _classic_life)


# ---- JoinGroup's errors ----------------------------------------------------------------------------

@scenario
def join_errors(s: Side) -> None:
    g = s.group()
    s.call("empty-group-id", ApiKey.JOIN_GROUP, 9, join(""))
    s.call("session-too-small", ApiKey.JOIN_GROUP, 9, join(g, session=500))
    s.call("session-too-large", ApiKey.JOIN_GROUP, 9, join(g, session=1_800_001))
    s.call("no-protocols", ApiKey.JOIN_GROUP, 9, join(g, protocols=[]))
    s.call("empty-protocol-type", ApiKey.JOIN_GROUP, 9, join(g, protocol_type=""))
    s.call("unknown-member-new-group", ApiKey.JOIN_GROUP, 9, join(g, member="nobody-1"))
    member, gen = join_alone(s, g)
    s.call("unknown-member", ApiKey.JOIN_GROUP, 9, join(g, member="nobody-2"), client="d")
    s.call("other-protocol-type", ApiKey.JOIN_GROUP, 9, join(g, protocol_type="connect"), client="d")
    s.call("no-common-protocol", ApiKey.JOIN_GROUP, 5,
           join(g, protocols=[{"name": "roundrobin", "metadata": SUB}]), client="d")
    s.call("leave", ApiKey.LEAVE_GROUP, 5, leave(g, member))


@scenario
def join_v4_member_id_required(s: Side) -> None:
    g = s.group()
    first = s.call("join", ApiKey.JOIN_GROUP, 4, join(g))
    s.call("join-other-id", ApiKey.JOIN_GROUP, 4, join(g, member="made-up"))
    s.call("join-given-id", ApiKey.JOIN_GROUP, 4, join(g, member=first.member_id))


# ---- SyncGroup and Heartbeat errors ---------------------------------------------------------------

@scenario
def sync_heartbeat_errors(s: Side) -> None:
    g = s.group()
    s.call("sync-unknown-group", ApiKey.SYNC_GROUP, 5, sync(g, 1, "nobody"))
    s.call("heartbeat-unknown-group", ApiKey.HEARTBEAT, 4, heartbeat(g, 1, "nobody"))
    s.call("heartbeat-empty-group-id", ApiKey.HEARTBEAT, 4, heartbeat("", 1, "nobody"))
    s.call("sync-empty-group-id", ApiKey.SYNC_GROUP, 5, sync("", 1, "nobody"))
    member, gen = join_alone(s, g)
    s.call("sync-unknown-member", ApiKey.SYNC_GROUP, 5, sync(g, gen, "nobody"))
    s.call("sync-bad-generation", ApiKey.SYNC_GROUP, 5, sync(g, gen + 1, member))
    s.call("sync-wrong-protocol-type", ApiKey.SYNC_GROUP, 5, sync(g, gen, member, protocol_type="connect"))
    s.call("sync-wrong-protocol-name", ApiKey.SYNC_GROUP, 5, sync(g, gen, member, protocol_name="roundrobin"))
    s.call("sync-again-stable", ApiKey.SYNC_GROUP, 5, sync(g, gen, member, {member: {"dt1": [0]}}))
    s.call("heartbeat-unknown-member", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, "nobody"))
    s.call("heartbeat-bad-generation", ApiKey.HEARTBEAT, 4, heartbeat(g, gen + 1, member))
    s.call("heartbeat-old-generation", ApiKey.HEARTBEAT, 4, heartbeat(g, gen - 1, member))
    s.call("heartbeat-ok", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, member))
    s.call("leave-unknown-member", ApiKey.LEAVE_GROUP, 5, leave(g, "nobody"))
    s.call("leave-v0-unknown-member", ApiKey.LEAVE_GROUP, 0, leave(g, "nobody"))
    s.call("leave-unknown-group", ApiKey.LEAVE_GROUP, 5, leave(s.group("none"), "nobody"))
    s.call("leave", ApiKey.LEAVE_GROUP, 5, leave(g, member))


# ---- a rebalance: a second member, REBALANCE_IN_PROGRESS, the leader's assignment -------------------

@scenario
def rebalance_two_members(s: Side) -> None:
    g = s.group()
    a, gen = join_alone(s, g, client="a")
    b0 = s.call("b-join", ApiKey.JOIN_GROUP, 9, join(g), client="b")
    pending_b = s.send("b-join-again", ApiKey.JOIN_GROUP, 9, join(g, member=b0.member_id), client="b")
    wait_state(s, g, "PreparingRebalance")  # b's join is on another connection: let it land first
    s.call("a-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, a), client="a")
    s.call("a-commit-preparing", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 1}}, gen, a), client="c")
    s.call("describe-preparing", ApiKey.DESCRIBE_GROUPS, 5, described([g]), client="c")
    ra = s.call("a-rejoin", ApiKey.JOIN_GROUP, 9, join(g, member=a), client="a")
    rb = pending_b.result()
    s.call("describe-completing", ApiKey.DESCRIBE_GROUPS, 5, described([g]), client="c")
    s.call("a-heartbeat-completing", ApiKey.HEARTBEAT, 4, heartbeat(g, ra.generation_id, a), client="c")
    s.call("commit-completing", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 2}}, ra.generation_id, a),
           client="c")
    follower = s.send("b-sync", ApiKey.SYNC_GROUP, 5, sync(g, rb.generation_id, rb.member_id), client="b")
    s.call("a-sync", ApiKey.SYNC_GROUP, 5, sync(g, ra.generation_id, a, {
        a: {"dt3": [0, 1]}, rb.member_id: {"dt3": [2]}}), client="a")
    follower.result()
    s.call("a-heartbeat-stable", ApiKey.HEARTBEAT, 4, heartbeat(g, ra.generation_id, a), client="a")
    s.call("describe-stable", ApiKey.DESCRIBE_GROUPS, 5, described([g]), client="c")
    s.call("list", ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}, client="c")
    s.call("b-leave", ApiKey.LEAVE_GROUP, 5, leave(g, rb.member_id), client="b")
    s.call("a-heartbeat-after-leave", ApiKey.HEARTBEAT, 4, heartbeat(g, ra.generation_id, a), client="a")
    s.call("a-leave", ApiKey.LEAVE_GROUP, 5, leave(g, a), client="a")


def rejoin_both(s: Side, g: str, gen: int, first: tuple[str, str, Any], second: tuple[str, str, Any],
                label: str) -> int:
    """`first` (client, member id, subscription) sends a JoinGroup that starts a rebalance; once the group
    is PreparingRebalance, `second` heartbeats (REBALANCE_IN_PROGRESS) and rejoins; both answers are
    recorded; the leader (of the two answers, the one with members) syncs dt3 split between them."""
    (c1, m1, sub1), (c2, m2, sub2) = first, second
    p1 = s.send(f"{label}-{c1}-join", ApiKey.JOIN_GROUP, 9,
                join(g, member=m1, protocols=[{"name": "range", "metadata": sub1}]), client=c1)
    wait_state(s, g, "PreparingRebalance")
    s.call(f"{label}-{c2}-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, m2), client=c2)
    r2 = s.call(f"{label}-{c2}-join", ApiKey.JOIN_GROUP, 9,
                join(g, member=m2, protocols=[{"name": "range", "metadata": sub2}]), client=c2)
    r1 = p1.result()
    leader, follower = ((c1, r1), (c2, r2)) if r1.members else ((c2, r2), (c1, r1))
    pending = s.send(f"{label}-{follower[0]}-sync", ApiKey.SYNC_GROUP, 5,
                     sync(g, follower[1].generation_id, follower[1].member_id), client=follower[0])
    s.call(f"{label}-{leader[0]}-sync", ApiKey.SYNC_GROUP, 5, sync(g, leader[1].generation_id, leader[1].member_id, {
        leader[1].member_id: {"dt3": [0, 1]}, follower[1].member_id: {"dt3": [2]}}), client=leader[0])
    pending.result()
    return r1.generation_id


@scenario
def classic_rejoin_stable(s: Side) -> None:
    """JoinGroup from a member of a Stable group: a follower with unchanged metadata gets its generation
    back at once; changed metadata, or the leader rejoining, starts a rebalance."""
    g = s.group()
    a, gen = join_alone(s, g, client="a")
    b = s.call("b-join", ApiKey.JOIN_GROUP, 9, join(g), client="b").member_id
    gen = rejoin_both(s, g, gen, ("b", b, SUB), ("a", a, SUB), "second-member")
    s.call("b-rejoin-unchanged", ApiKey.JOIN_GROUP, 9, join(g, member=b), client="b")
    s.call("b-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, b), client="b")
    gen = rejoin_both(s, g, gen, ("b", b, encode_subscription(["dt1", "dt3"])), ("a", a, SUB), "b-changed")
    rejoin_both(s, g, gen, ("a", a, SUB), ("b", b, encode_subscription(["dt1", "dt3"])), "leader-rejoins")
    s.call("describe", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    s.call("leave-both", ApiKey.LEAVE_GROUP, 5, {"group_id": g, "members": [
        {"member_id": m, "group_instance_id": None, "reason": "done"} for m in (a, b, "nobody")]})


# ---- timing: the clocks set short, waits bounded by the socket's timeout, never a sleep ---------------

@scenario
def session_expiry(s: Side) -> None:
    """A member that stops heartbeating is removed after its session timeout (1 s)."""
    g = s.group()
    member, gen = join_alone(s, g, session=1000, rebalance=1000)
    wait_state(s, g, "Empty")  # the server's own timer does the work
    s.record("expired", s.client("poll").request(ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": [g], "include_authorized_operations": False}))
    s.call("heartbeat-expired", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, member))
    s.call("commit-expired", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt1": {0: 1}}, gen, member))


@scenario
def rebalance_timeout(s: Side) -> None:
    """A member that does not rejoin within the rebalance timeout (1.5 s) is dropped from the generation."""
    g = s.group()
    a, _ = join_alone(s, g, client="a", session=30_000, rebalance=1500)
    b0 = s.call("b-join", ApiKey.JOIN_GROUP, 9, join(g, session=30_000, rebalance=1500), client="b")
    pending_b = s.send("b-join-again", ApiKey.JOIN_GROUP, 9, join(g, member=b0.member_id, session=30_000,
                                                                   rebalance=1500), client="b")
    rb = pending_b.result()  # a never rejoins: the join phase ends at the rebalance timeout without it
    s.call("a-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, 1, a), client="a")
    s.call("describe", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    s.call("b-sync", ApiKey.SYNC_GROUP, 5, sync(g, rb.generation_id, rb.member_id, {rb.member_id: {"dt3": [0]}}),
           client="b")
    s.call("b-leave", ApiKey.LEAVE_GROUP, 5, leave(g, rb.member_id), client="b")


# ---- static membership: replacing an instance, fencing ----------------------------------------------

@scenario
def static_member_fencing(s: Side) -> None:
    g = s.group()
    old, gen = join_alone(s, g, instance="i-1", client="a")
    new = s.call("replace", ApiKey.JOIN_GROUP, 9, join(g, instance="i-1"), client="b")
    s.call("old-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, old, "i-1"), client="a")
    s.call("old-sync", ApiKey.SYNC_GROUP, 5, sync(g, gen, old, instance="i-1"), client="a")
    s.call("old-commit", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt1": {0: 3}}, gen, old, "i-1"), client="a")
    s.call("old-join", ApiKey.JOIN_GROUP, 9, join(g, member=old, instance="i-1"), client="a")
    s.call("new-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, new.generation_id, new.member_id, "i-1"), client="b")
    s.call("new-commit", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt1": {0: 4}}, new.generation_id, new.member_id, "i-1"),
           client="b")
    s.call("describe", ApiKey.DESCRIBE_GROUPS, 5, described([g]), client="c")
    s.call("leave-wrong-member", ApiKey.LEAVE_GROUP, 5, leave(g, old, "i-1"), client="a")
    s.call("leave-unknown-instance", ApiKey.LEAVE_GROUP, 5, leave(g, "", "i-2"), client="a")
    s.call("leave-by-instance", ApiKey.LEAVE_GROUP, 5, leave(g, "", "i-1"), client="b")
    s.call("describe-after", ApiKey.DESCRIBE_GROUPS, 5, described([g]), client="c")


# ---- OffsetCommit / OffsetFetch ---------------------------------------------------------------

def _commit_simple(s: Side, v: int) -> None:
    g = s.group()
    s.call("commit", ApiKey.OFFSET_COMMIT, v, commit(g, {"dt1": {0: 10}, "dt3": {1: 11, 2: 12}}, metadata="m"))
    s.call("commit-unknown-topic", ApiKey.OFFSET_COMMIT, v, commit(g, {"nosuch": {0: 1}}))
    s.call("commit-unknown-partition", ApiKey.OFFSET_COMMIT, v, commit(g, {"dt1": {7: 1}}))
    s.call("commit-metadata-too-large", ApiKey.OFFSET_COMMIT, v, commit(g, {"dt1": {0: 20}}, metadata="x" * 4097))
    s.call("commit-metadata-at-limit", ApiKey.OFFSET_COMMIT, v, commit(g, {"dt1": {0: 21}}, metadata="y" * 4096))
    s.call("commit-negative-offset", ApiKey.OFFSET_COMMIT, v, commit(g, {"dt3": {0: -5}}))
    s.call("commit-empty-group-id", ApiKey.OFFSET_COMMIT, v, commit("", {"dt1": {0: 1}}))
    s.call("commit-unknown-member", ApiKey.OFFSET_COMMIT, v, commit(g, {"dt1": {0: 1}}, 3, "nobody"))
    s.call("fetch", ApiKey.OFFSET_FETCH, 7, fetch(7, g, {"dt1": [0], "dt3": [0, 1, 2], "nosuch": [0]}))


versions("offset_commit_simple", range(2, 10), _commit_simple)


def _fetch(s: Side, v: int) -> None:
    g = s.group()
    s.call("commit", ApiKey.OFFSET_COMMIT, 8, commit(g, {"dt1": {0: 10}, "dt3": {1: 11}}, metadata="meta"))
    s.call("fetch", ApiKey.OFFSET_FETCH, v, fetch(v, g, {"dt1": [0], "dt3": [0, 1, 5], "nosuch": [0]}))
    s.call("fetch-unknown-group", ApiKey.OFFSET_FETCH, v, fetch(v, s.group("none"), {"dt1": [0]}))
    if v >= 2:
        s.call("fetch-all", ApiKey.OFFSET_FETCH, v, fetch(v, g, None))
        s.call("fetch-all-unknown-group", ApiKey.OFFSET_FETCH, v, fetch(v, s.group("none"), None))
    s.call("fetch-empty-group-id", ApiKey.OFFSET_FETCH, v, fetch(v, "", {"dt1": [0]}))


versions("offset_fetch", range(1, 10), _fetch)


@scenario
def offset_commit_member(s: Side) -> None:
    g = s.group()
    member, gen = join_alone(s, g)
    s.call("commit", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 1}}, gen, member))
    s.call("commit-bad-generation", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 2}}, gen + 1, member))
    s.call("commit-unknown-member", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 2}}, gen, "nobody"))
    s.call("commit-simple-on-live-group", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 2}}))
    s.call("commit-unknown-instance", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 2}}, gen, member, "i-9"))
    s.call("commit-v2-bad-generation", ApiKey.OFFSET_COMMIT, 2, commit(g, {"dt3": {0: 2}}, gen + 1, member))
    s.call("fetch-v9-classic-member", ApiKey.OFFSET_FETCH, 9, fetch(9, g, {"dt3": [0]}, member, gen))
    s.call("fetch-v9-bad-member", ApiKey.OFFSET_FETCH, 9, fetch(9, g, {"dt3": [0]}, "nobody", 1))
    s.call("leave", ApiKey.LEAVE_GROUP, 5, leave(g, member))
    s.call("commit-after-leave", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 3}}, gen, member))
    s.call("fetch", ApiKey.OFFSET_FETCH, 8, fetch(8, g, {"dt3": [0]}))


# ---- DescribeGroups, ListGroups, DeleteGroups, OffsetDelete ----------------------------------------

def offset_delete_request(group: str, topics: dict[str, list[int]]) -> dict:
    return {"group_id": group, "topics": [{"name": n, "partitions": [{"partition_index": p} for p in ps]}
                                          for n, ps in topics.items()]}


def live_and_empty(s: Side) -> tuple[str, str, str]:
    """A Stable group of one member (on connection "a") and an Empty one that only has offsets."""
    live, empty = s.group("live"), s.group("empty")
    member, _ = join_alone(s, live, client="a")
    s.call("commit", ApiKey.OFFSET_COMMIT, 8, commit(empty, {"dt1": {0: 1}}))
    return live, empty, member


def _describe(s: Side, v: int) -> None:
    live, empty, member = live_and_empty(s)
    s.call("describe", ApiKey.DESCRIBE_GROUPS, v,
           {"groups": [live, empty, s.group("none"), ""], "include_authorized_operations": v >= 3})
    s.call("leave", ApiKey.LEAVE_GROUP, 5, leave(live, member), client="a")


versions("describe_groups", range(0, 7), _describe)


def _list(s: Side, v: int) -> None:
    live, empty, member = live_and_empty(s)
    s.call("list", ApiKey.LIST_GROUPS, v, {"states_filter": [], "types_filter": []})
    if v >= 4:
        s.call("list-stable", ApiKey.LIST_GROUPS, v, {"states_filter": ["Stable"], "types_filter": []})
        s.call("list-empty-lowercase", ApiKey.LIST_GROUPS, v, {"states_filter": ["empty"], "types_filter": []})
        s.call("list-bad-state", ApiKey.LIST_GROUPS, v, {"states_filter": ["Nonsense"], "types_filter": []})
    if v >= 5:
        s.call("list-classic", ApiKey.LIST_GROUPS, v, {"states_filter": [], "types_filter": ["classic"]})
        s.call("list-consumer", ApiKey.LIST_GROUPS, v, {"states_filter": [], "types_filter": ["consumer"]})
        s.call("list-bad-type", ApiKey.LIST_GROUPS, v, {"states_filter": [], "types_filter": ["nonsense"]})
    s.call("leave", ApiKey.LEAVE_GROUP, 5, leave(live, member), client="a")


versions("list_groups", range(0, 6), _list)


def _delete(s: Side, v: int) -> None:
    live, empty, member = live_and_empty(s)
    s.call("delete", ApiKey.DELETE_GROUPS, v, {"groups_names": [live, empty, s.group("none"), ""]})
    s.call("fetch-deleted", ApiKey.OFFSET_FETCH, 8, fetch(8, empty, {"dt1": [0]}))
    s.call("describe-deleted", ApiKey.DESCRIBE_GROUPS, 5, described([empty]))
    s.call("leave", ApiKey.LEAVE_GROUP, 5, leave(live, member), client="a")
    s.call("delete-after-leave", ApiKey.DELETE_GROUPS, v, {"groups_names": [live]})
    s.call("delete-again", ApiKey.DELETE_GROUPS, v, {"groups_names": [live]})


versions("delete_groups", range(0, 3), _delete)


@scenario
def offset_delete(s: Side) -> None:
    live, empty = s.group("live"), s.group("empty")
    member, gen = join_alone(s, live, client="a")  # subscribed to dt3
    s.call("commit-live", ApiKey.OFFSET_COMMIT, 8, commit(live, {"dt1": {0: 1}, "dt3": {0: 2}}, gen, member))
    s.call("commit-empty", ApiKey.OFFSET_COMMIT, 8, commit(empty, {"dt1": {0: 1}, "dt3": {0: 2}}))
    d = offset_delete_request
    s.call("delete-subscribed", ApiKey.OFFSET_DELETE, 0, d(live, {"dt3": [0]}))
    s.call("delete-not-subscribed", ApiKey.OFFSET_DELETE, 0, d(live, {"dt1": [0]}))
    s.call("delete-empty-group", ApiKey.OFFSET_DELETE, 0, d(empty, {"dt1": [0], "dt3": [0, 1]}))
    s.call("delete-unknown-group", ApiKey.OFFSET_DELETE, 0, d(s.group("none"), {"dt1": [0]}))
    s.call("delete-unknown-topic", ApiKey.OFFSET_DELETE, 0, d(empty, {"nosuch": [0]}))
    s.call("delete-empty-group-id", ApiKey.OFFSET_DELETE, 0, d("", {"dt1": [0]}))
    s.call("fetch-live", ApiKey.OFFSET_FETCH, 8, fetch(8, live, None))
    s.call("fetch-empty", ApiKey.OFFSET_FETCH, 8, fetch(8, empty, None))
    s.call("leave", ApiKey.LEAVE_GROUP, 5, leave(live, member), client="a")


# ---- KIP-848: ConsumerGroupHeartbeat and ConsumerGroupDescribe ------------------------------------

def cgh(group: str, member: str, epoch: int, topics: list[str] | None = None, instance: str | None = None,
        assignor: str | None = None, owned: list | None = None, rebalance: int = 30_000,
        regex: str | None = None) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": instance, "rack_id": None,
            "rebalance_timeout": ms(rebalance), "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
            "server_assignor": assignor,
            "topic_partitions": owned if owned is not None else ([] if epoch == 0 else None)}


def owned_of(s: Side, response: Any) -> list[dict] | None:
    """The partitions a ConsumerGroupHeartbeat answer assigns, as the next request's owned partitions."""
    if response.assignment is None:
        return None
    return [{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in response.assignment.topic_partitions]


class Member:
    """A KIP-848 member as a client keeps it: id, epoch, owned partitions, from its answers."""

    def __init__(self, s: Side, group: str, member_id: str, client: str, version: int = 1, **join: Any) -> None:
        self.s, self.group, self.id, self.client, self.version = s, group, member_id, client, version
        self.epoch, self.owned, self.join = 0, [], join

    def heartbeat(self, label: str | None, **kw: Any) -> Any:
        values = cgh(self.group, self.id, self.epoch, owned=self.owned if self.epoch else [], **{**self.join, **kw}) \
            if self.epoch == 0 else cgh(self.group, self.id, self.epoch, owned=self.owned, **kw)
        if label is None:
            r = self.s.client(self.client).request(ApiKey.CONSUMER_GROUP_HEARTBEAT, self.version, values)
        else:
            r = self.s.call(label, ApiKey.CONSUMER_GROUP_HEARTBEAT, self.version, values, self.client)
        if r.error_code == ErrorCode.none:
            self.id = r.member_id or self.id
            self.epoch = r.member_epoch
            owned = owned_of(self.s, r)
            if owned is not None:
                self.owned = owned
        return r

    def settle(self, label: str | None, rounds: int = 50) -> None:
        """Heartbeat (unrecorded), owning what it is given, until an answer changes nothing; record
        where it settled (epoch, owned partitions by topic name). A bound, not a wait: no clock."""
        for _ in range(rounds):
            before = (self.epoch, self.owned)
            r = self.heartbeat(None)
            if r.error_code != ErrorCode.none or (r.assignment is None and (self.epoch, self.owned) == before):
                break
        if label is not None:
            owned = sorted((self.s.topic_ids.get(t["topic_id"], "?"), sorted(t["partitions"])) for t in self.owned)
            self.s.record(label, {"error_code": r.error_code, "member_epoch": self.epoch, "owned": owned})

    def settle_assigned(self, label: str, timeout: float = 30.0) -> None:
        """Heartbeat until the member owns partitions (a regex resolves off the heartbeat path in both
        servers, Kafka's on a background thread): a bounded poll, then `settle(label)`."""
        deadline = time.monotonic() + timeout
        while not self.owned and time.monotonic() < deadline:
            self.heartbeat(None)
            time.sleep(0.05)
        self.settle(label)

    def leave(self, label: str) -> Any:
        r = self.s.call(label, ApiKey.CONSUMER_GROUP_HEARTBEAT, self.version,
                        cgh(self.group, self.id, -1, instance=self.join.get("instance")), self.client)
        return r


def _consumer_life(s: Side, v: int) -> None:
    g = s.group()
    m = Member(s, g, "" if v == 0 else "8b1f1a43-0c5e-4bd5-9e62-1d2b6a1c9b10", "c", v, topics=["dt3"])
    m.heartbeat("join")
    m.settle("settled")
    s.call("heartbeat", ApiKey.CONSUMER_GROUP_HEARTBEAT, v, cgh(g, m.id, m.epoch))
    epoch, mid = m.epoch, m.id
    s.call("commit", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 7}}, epoch, mid))
    s.call("commit-stale-epoch", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 8}}, epoch - 1, mid))
    s.call("commit-future-epoch", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 8}}, epoch + 1, mid))
    s.call("commit-unknown-member", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 8}}, epoch, "nobody"))
    s.call("commit-simple", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 8}}))
    s.call("fetch-member", ApiKey.OFFSET_FETCH, 9, fetch(9, g, {"dt3": [0]}, mid, epoch))
    s.call("fetch-stale-epoch", ApiKey.OFFSET_FETCH, 9, fetch(9, g, {"dt3": [0]}, mid, epoch - 1))
    s.call("describe-classic-api", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    s.call("describe-classic-api-v6", ApiKey.DESCRIBE_GROUPS, 6, described([g]))
    s.call("list", ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    s.call("list-stable-consumer", ApiKey.LIST_GROUPS, 5, {"states_filter": ["Stable"], "types_filter": ["consumer"]})
    s.call("offset-delete-subscribed", ApiKey.OFFSET_DELETE, 0, offset_delete_request(g, {"dt3": [0]}))
    s.call("cg-describe", ApiKey.CONSUMER_GROUP_DESCRIBE, 1 if v else 0,
           {"group_ids": [g, s.group("none")], "include_authorized_operations": False})
    s.call("stale-epoch", ApiKey.CONSUMER_GROUP_HEARTBEAT, v, cgh(g, mid, epoch + 5))
    s.call("unknown-member", ApiKey.CONSUMER_GROUP_HEARTBEAT, v, cgh(g, "4a8f5b8e-0d7e-4c4a-8d6e-3c2f1e0d9a8b", 3))
    s.call("delete-non-empty", ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})
    m.leave("leave")
    s.call("cg-describe-empty", ApiKey.CONSUMER_GROUP_DESCRIBE, 1 if v else 0,
           {"group_ids": [g], "include_authorized_operations": False})
    s.call("offset-delete-empty", ApiKey.OFFSET_DELETE, 0, offset_delete_request(g, {"dt3": [0]}))
    s.call("fetch-after-offset-delete", ApiKey.OFFSET_FETCH, 9, fetch(9, g, None))
    s.call("delete", ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})


versions("consumer_life", range(0, 2), _consumer_life)


@scenario
def consumer_heartbeat_errors(s: Side) -> None:
    g = s.group()
    mid = "0f0e0d0c-0b0a-4908-8706-050403020100"
    s.call("empty-group-id", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh("", mid, 0, ["dt3"]))
    s.call("empty-member-id-v1", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, "", 0, ["dt3"]))
    s.call("join-no-subscription", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, mid, 0, None))
    s.call("join-no-rebalance-timeout", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, mid, 0, ["dt3"], rebalance=-1))
    s.call("join-unknown-assignor", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, mid, 0, ["dt3"], assignor="nope"))
    s.call("join-bad-epoch", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, mid, 4, ["dt3"]))
    m = Member(s, g, mid, "c", topics=["nosuch"])
    m.heartbeat("join-unknown-topic")
    m.heartbeat("heartbeat")
    m.heartbeat("resubscribe", topics=["dt1", "dt3"])
    m.settle("settled")
    m.heartbeat("bad-regex", regex="(unclosed")
    m.leave("leave")
    m.leave("leave-again")


@scenario
def consumer_first_epoch(s: Side) -> None:
    """The epoch a new group's first member gets, by what it subscribes to (FINDINGS.md F2)."""
    for name, topics, regex in (("names", ["dt1"], None), ("empty-names", [], None), ("regex", None, "dt.*"),
                                ("unknown-topic", ["nosuch"], None)):
        m = Member(s, s.group(name), "eeeeeeee-0000-4000-8000-00000000000e", "c", topics=topics, regex=regex)
        m.heartbeat(f"{name}-join" if regex is None else None)  # Kafka may resolve a regex before answering
        if regex is None:
            m.settle(f"{name}-settled")
        else:
            m.settle_assigned(f"{name}-settled")
        s.call(f"{name}-describe", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
               {"group_ids": [s.group(name)], "include_authorized_operations": False})
        m.leave(f"{name}-leave")


GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP


@scenario
def consumer_session_expiry(s: Side) -> None:
    """A group config sets a 2 s consumer session (KIP-848); a member that stops heartbeating is removed."""
    g = s.group()
    s.call("alter-configs", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": GROUP_RESOURCE, "resource_name": g, "configs": [
            {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "2000"},
            {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "500"}]}],
        "validate_only": False})
    s.call("alter-configs-too-short", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": GROUP_RESOURCE, "resource_name": g, "configs": [
            {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "1000"}]}],
        "validate_only": False})
    s.call("describe-configs", ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": GROUP_RESOURCE, "resource_name": g,
        "configuration_keys": ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"]}, {
        "resource_type": 2, "resource_name": "dt1", "configuration_keys": ["cleanup.policy"]}],
        "include_synonyms": False, "include_documentation": False})
    m = Member(s, g, "dddddddd-0000-4000-8000-0000000000d1", "c", topics=["dt3"])
    m.heartbeat("join")
    m.settle("settled")
    deadline = time.monotonic() + 60  # the server's session timer does the work; a bound on the poll
    while time.monotonic() < deadline:
        r = s.client("poll").request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [g],
                                                                          "include_authorized_operations": False})
        if r.groups[0].group_state == "Empty":
            break
        time.sleep(0.05)
    s.record("expired", r)
    s.call("heartbeat-expired", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, m.id, m.epoch))
    s.call("commit-expired", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 1}}, m.epoch, m.id))


@scenario
def consumer_static_member(s: Side) -> None:
    g = s.group()
    a, b = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
    r = s.call("a-join", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, a, 0, ["dt3"], instance="i-1"))
    s.call("b-same-instance", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, b, 0, ["dt3"], instance="i-1"))
    s.call("a-temporary-leave", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, a, -2, instance="i-1"))
    s.call("b-takes-over", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, b, 0, ["dt3"], instance="i-1"))
    s.call("a-heartbeat-fenced", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, a, r.member_epoch, instance="i-1"))
    s.call("describe", ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [g], "include_authorized_operations": False})
    s.call("b-leave", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(g, b, -1, instance="i-1"))


@scenario
def consumer_two_members(s: Side) -> None:
    g = s.group()
    a = Member(s, g, "aaaaaaaa-0000-4000-8000-00000000000a", "a", topics=["dt3"], assignor="range")
    b = Member(s, g, "bbbbbbbb-0000-4000-8000-00000000000b", "b", topics=["dt3"], assignor="range")
    a.heartbeat("a-join")
    a.settle("a-settled")
    b.heartbeat("b-join")
    a.heartbeat("a-heartbeat")  # told to give up what b gets
    for _ in range(5):  # revocation, then b's assignment, each in some heartbeat: settle both
        a.settle(None)
        b.settle(None)
    a.settle("a-settled-2")
    b.settle("b-settled")
    s.call("describe", ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [g], "include_authorized_operations": False})
    s.call("describe-classic-api", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    a.leave("a-leave")
    b.settle("b-settled-alone")
    b.leave("b-leave")


def _migration(s: Side, v: int) -> None:
    """KIP-848 online migration (policy bidirectional): a consumer-protocol member joins a classic group
    (upgrade), the classic member rejoins the consumer group through JoinGroup, then the consumer-protocol
    member leaves (downgrade back to a classic group). `v`: the classic member's ConsumerProtocol
    subscription version (the assignments the coordinator builds for it follow it)."""
    g = s.group()
    sub = encode_subscription(["dt3"]) if v == 0 else encode_subscription(["dt3"], owned={})
    protocols = [{"name": "range", "metadata": sub}]
    a, gen = join_alone(s, g, client="a", session=30_000, rebalance=10_000, protocols=protocols)
    s.call("describe-classic", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    b = Member(s, g, "bbbbbbbb-0000-4000-8000-0000000000b8", "b", topics=["dt3"])
    b.heartbeat("b-join")
    s.call("cg-describe-upgraded", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
           {"group_ids": [g], "include_authorized_operations": False})
    s.call("a-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, a), client="a")
    ra = s.call("a-rejoin", ApiKey.JOIN_GROUP, 9, join(g, member=a, session=30_000, rebalance=10_000,
                                                       protocols=protocols), client="a")
    s.call("a-sync", ApiKey.SYNC_GROUP, 5, sync(g, ra.generation_id, a), client="a")
    b.settle("b-settled")
    s.call("a-heartbeat-2", ApiKey.HEARTBEAT, 4, heartbeat(g, ra.generation_id, a), client="a")
    s.call("cg-describe-mixed", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
           {"group_ids": [g], "include_authorized_operations": False})
    s.call("list-mixed", ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    b.leave("b-leave")
    s.call("describe-downgraded", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    s.call("cg-describe-downgraded", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
           {"group_ids": [g], "include_authorized_operations": False})
    s.call("list-downgraded", ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    s.call("a-leave", ApiKey.LEAVE_GROUP, 5, leave(g, a), client="a")


versions("migration_upgrade_downgrade", range(0, 2), _migration)


@scenario
def classic_member_in_consumer_group(s: Side) -> None:
    """A classic consumer (JoinGroup/SyncGroup/Heartbeat/OffsetCommit/LeaveGroup) in a KIP-848 group."""
    g = s.group()
    b = Member(s, g, "bbbbbbbb-0000-4000-8000-0000000000b9", "b", topics=["dt3"])
    b.heartbeat("b-join")
    b.settle("b-settled")
    j = s.call("a-join", ApiKey.JOIN_GROUP, 9, join(g), client="a")
    j = s.call("a-join-again", ApiKey.JOIN_GROUP, 9, join(g, member=j.member_id), client="a")
    a, gen = j.member_id, j.generation_id
    s.call("a-sync-early", ApiKey.SYNC_GROUP, 5, sync(g, gen, a), client="a")
    b.settle("b-revoked")  # b gives up what the new member gets
    s.call("a-heartbeat", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, a), client="a")
    j = s.call("a-rejoin", ApiKey.JOIN_GROUP, 9, join(g, member=a), client="a")
    gen = j.generation_id
    s.call("a-sync", ApiKey.SYNC_GROUP, 5, sync(g, gen, a), client="a")
    s.call("a-heartbeat-2", ApiKey.HEARTBEAT, 4, heartbeat(g, gen, a), client="a")
    s.call("a-heartbeat-bad-generation", ApiKey.HEARTBEAT, 4, heartbeat(g, gen + 7, a), client="a")
    s.call("a-commit", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 4}}, gen, a), client="a")
    s.call("a-commit-bad-generation", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt3": {0: 4}}, gen + 7, a), client="a")
    s.call("a-commit-v2", ApiKey.OFFSET_COMMIT, 2, commit(g, {"dt3": {0: 5}}, gen, a), client="a")
    s.call("describe-classic-api", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    s.call("cg-describe", ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [g], "include_authorized_operations": False})
    s.call("a-leave", ApiKey.LEAVE_GROUP, 5, leave(g, a), client="a")
    b.settle("b-after-a-left")
    s.call("cg-describe-after", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
           {"group_ids": [g], "include_authorized_operations": False})
    b.leave("b-leave")


@scenario
def mixed_protocols(s: Side) -> None:
    """A classic JoinGroup for a consumer group and a ConsumerGroupHeartbeat for a classic group."""
    cg, classic = s.group("cg"), s.group("classic")
    mid = "cccccccc-0000-4000-8000-00000000000c"
    r = s.call("cg-join", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(cg, mid, 0, ["dt3"]))
    s.call("classic-join-consumer-group", ApiKey.JOIN_GROUP, 9, join(cg, protocol_type="connect"))
    s.call("cg-describe-classic", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
           {"group_ids": [classic], "include_authorized_operations": False})
    member, _ = join_alone(s, classic, client="a", protocol_type="connect")
    s.call("cgh-on-connect-group", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
           cgh(classic, "dddddddd-0000-4000-8000-00000000000d", 0, ["dt3"]))
    s.call("cg-describe-classic-live", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
           {"group_ids": [classic], "include_authorized_operations": False})
    s.call("leave-classic", ApiKey.LEAVE_GROUP, 5, leave(classic, member), client="a")
    s.call("cg-leave", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cgh(cg, mid, -1))
    assert r is not None


# -- share groups (KIP-932): membership only (ShareFetch is not served yet) ------------------------

def sgh(group: str, member: str, epoch: int, topics: list[str] | None = None) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
            "subscribed_topic_names": topics}


class ShareMember:
    """A share-group member as a client keeps it: its own id, its epoch and partitions, from its answers."""

    def __init__(self, s: Side, group: str, member_id: str, client: str, topics: list[str]) -> None:
        self.s, self.group, self.id, self.client, self.topics = s, group, member_id, client, topics
        self.epoch, self.assigned = 0, []

    def heartbeat(self, label: str | None) -> Any:
        values = sgh(self.group, self.id, self.epoch, self.topics if self.epoch == 0 else None)
        if label is None:
            r = self.s.client(self.client).request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, values)
        else:
            r = self.s.call(label, ApiKey.SHARE_GROUP_HEARTBEAT, 1, values, self.client)
        if r.error_code == ErrorCode.none:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.assigned = sorted((self.s.topic_ids.get(t.topic_id, "?"), sorted(t.partitions))
                                       for t in r.assignment.topic_partitions)
        return r

    def settle(self, label: str, want: int, timeout: float = 30.0) -> None:
        """Heartbeat until the member holds `want` partitions and an answer changes nothing (Kafka
        initializes share-partitions off the heartbeat path and assigns them a heartbeat later): a
        bounded poll; record where it settled."""
        deadline = time.monotonic() + timeout
        r = None
        while time.monotonic() < deadline:
            before = (self.epoch, self.assigned)
            r = self.heartbeat(None)
            if r.error_code != ErrorCode.none or (
                    sum(len(ps) for _, ps in self.assigned) == want and (self.epoch, self.assigned) == before):
                break
            time.sleep(0.05)
        self.s.record(label, {"error_code": r.error_code if r is not None else None, "member_epoch": self.epoch,
                              "assigned": self.assigned})


@scenario
def share_group_membership(s: Side) -> None:
    g = s.group()
    a = ShareMember(s, g, "aaaaaaaa-0000-4000-8000-00000000000a", "a", ["dt1"])
    b = ShareMember(s, g, "bbbbbbbb-0000-4000-8000-00000000000b", "b", ["dt1"])
    s.call("no-group-id", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh("", a.id, 0, ["dt1"]))
    s.call("join-without-topics", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, a.id, 0, []))
    s.call("member-id-too-long", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, "x" * 37, 0, ["dt1"]))
    s.call("unknown-group", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, a.id, 3))
    s.call("leave-unknown-group", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, a.id, -1))
    a.heartbeat("a-join")
    a.settle("a-settled", 1)
    b.heartbeat("b-join")
    b.settle("b-settled", 1)
    a.settle("a-shares", 1)  # two members, one partition: both hold it
    s.call("describe", ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [g, s.group("none")],
                                                        "include_authorized_operations": False})
    s.call("unknown-member", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, "cccccccc-0000-4000-8000-00000000000c", 1))
    s.call("fenced", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, a.id, a.epoch + 5))
    s.call("list-share", ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
    s.call("list-v4", ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    s.call("describe-classic-api-v5", ApiKey.DESCRIBE_GROUPS, 5, described([g]))
    s.call("describe-classic-api-v6", ApiKey.DESCRIBE_GROUPS, 6, described([g]))
    s.call("consumer-heartbeat", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
           cgh(g, "dddddddd-0000-4000-8000-00000000000d", 0, ["dt1"]))
    s.call("consumer-describe", ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
           {"group_ids": [g], "include_authorized_operations": False})
    s.call("join-group", ApiKey.JOIN_GROUP, 9, join(g))
    s.call("fetch-offsets", ApiKey.OFFSET_FETCH, 9, fetch(9, g, {"dt1": [0]}))
    s.call("commit-simple", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt1": {0: 3}}))
    s.call("commit-member", ApiKey.OFFSET_COMMIT, 9, commit(g, {"dt1": {0: 3}}, a.epoch, a.id))
    s.call("offset-delete", ApiKey.OFFSET_DELETE, 0, offset_delete_request(g, {"dt1": [0]}))
    s.call("delete-non-empty", ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})
    s.call("a-leave", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, a.id, -1), "a")
    s.call("a-leave-again", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, a.id, -1), "a")
    b.settle("b-alone", 1)
    s.call("b-leave", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(g, b.id, -1), "b")
    s.call("describe-empty", ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [g], "include_authorized_operations": False})
    s.call("delete-empty", ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})
    s.call("describe-deleted", ApiKey.SHARE_GROUP_DESCRIBE, 1,
           {"group_ids": [g], "include_authorized_operations": False})


# ---- transactions (v1: the request versions from before transactions v2) ----------------------

def init_pid(txn: str | None, timeout: int = 60_000, pid: int = -1, epoch: int = -1) -> dict:
    return {"transactional_id": txn, "transaction_timeout": ms(timeout), "producer_id": pid, "producer_epoch": epoch}


def add_partitions(txn: str, pid: int, epoch: int, topics: dict[str, list[int]]) -> dict:
    return {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def end_txn(txn: str, pid: int, epoch: int, commit: bool) -> dict:
    return {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "committed": commit}


def txn_commit(txn: str, group: str, pid: int, epoch: int, offsets: dict[str, dict[int, int]]) -> dict:
    return {"transactional_id": txn, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": ""}
                for p, o in parts.items()]} for t, parts in offsets.items()]}


def stable_fetch(group: str, topics: dict[str, list[int]]) -> dict:
    return {**fetch(8, group, topics), "require_stable": True}


def wait_txn_state(s: Side, pid: int, state: str, timeout: float = 30.0) -> None:
    """Poll ListTransactions (unrecorded) until the producer's transaction is in `state`: markers are
    written after EndTxn is answered, on both servers. A bound, not a sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = s.client("poll").request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [state],
                                                                    "producer_id_filters": [pid]})
        if r.transaction_states:
            return
        time.sleep(0.02)


def txn_ready(s: Side, txn: str, timeout: float = 60.0) -> None:
    """Retry InitProducerId (unrecorded) while the transaction coordinator is not ready, as a client
    does: Kafka creates `__transaction_state` on the first FindCoordinator for a transactional id and
    answers NOT_COORDINATOR until its partitions are led and loaded. Then the id has epoch 0."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.client("poll").request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [txn]})
        r = s.client("poll").request(ApiKey.INIT_PRODUCER_ID, 4, init_pid(txn))
        if r.error_code not in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress,
                                ErrorCode.coordinator_not_available):
            return
        time.sleep(0.05)


def _init_producer_id(s: Side, v: int) -> None:
    t = s.group("txn")
    txn_ready(s, t)
    s.call("find-transaction-coordinator", ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [t]})
    r = s.call("init", ApiKey.INIT_PRODUCER_ID, v, init_pid(t))
    s.call("init-again", ApiKey.INIT_PRODUCER_ID, v, init_pid(t))
    s.call("timeout-over-the-maximum", ApiKey.INIT_PRODUCER_ID, v, init_pid(s.group("long"), 900_001))
    s.call("timeout-zero", ApiKey.INIT_PRODUCER_ID, v, init_pid(s.group("zero"), 0))
    s.call("empty-transactional-id", ApiKey.INIT_PRODUCER_ID, v, init_pid(""))
    s.call("idempotent", ApiKey.INIT_PRODUCER_ID, v, init_pid(None))
    if v >= 3:  # KIP-360: a producer names its id and epoch to bump them
        s.call("bump-with-current-epoch", ApiKey.INIT_PRODUCER_ID, v,
               init_pid(t, pid=r.producer_id, epoch=r.producer_epoch + 1))
        s.call("bump-with-stale-epoch", ApiKey.INIT_PRODUCER_ID, v,
               init_pid(t, pid=r.producer_id, epoch=r.producer_epoch))
        s.call("bump-with-another-id", ApiKey.INIT_PRODUCER_ID, v, init_pid(t, pid=r.producer_id + 7, epoch=0))


versions("init_producer_id", range(0, 6), _init_producer_id)


def _transaction_life(s: Side, v: int) -> None:
    """One transactional producer through a commit and an abort, each API at version `v`."""
    t, g = s.group("txn"), s.group()
    txn_ready(s, t)
    r = s.call("init", ApiKey.INIT_PRODUCER_ID, 4, init_pid(t))
    pid, epoch = r.producer_id, r.producer_epoch
    s.call("end-empty", ApiKey.END_TXN, v, end_txn(t, pid, epoch, True))
    s.call("add-partitions", ApiKey.ADD_PARTITIONS_TO_TXN, v, add_partitions(t, pid, epoch, {"dt1": [0], "dt3": [0, 1]}))
    s.call("add-partitions-again", ApiKey.ADD_PARTITIONS_TO_TXN, v, add_partitions(t, pid, epoch, {"dt1": [0]}))
    s.call("add-unknown-partition", ApiKey.ADD_PARTITIONS_TO_TXN, v,
           add_partitions(t, pid, epoch, {"dt1": [0, 9], "nope": [0]}))
    s.call("add-stale-epoch", ApiKey.ADD_PARTITIONS_TO_TXN, v, add_partitions(t, pid, epoch - 1, {"dt1": [0]}))
    s.call("add-unknown-producer", ApiKey.ADD_PARTITIONS_TO_TXN, v, add_partitions(t, pid + 7, epoch, {"dt1": [0]}))
    s.call("add-offsets", ApiKey.ADD_OFFSETS_TO_TXN, v,
           {"transactional_id": t, "producer_id": pid, "producer_epoch": epoch, "group_id": g})
    s.call("txn-offset-commit", ApiKey.TXN_OFFSET_COMMIT, v, txn_commit(t, g, pid, epoch, {"dt1": {0: 5}}))
    s.call("fetch-unstable", ApiKey.OFFSET_FETCH, 8, stable_fetch(g, {"dt1": [0]}))
    s.call("fetch-unstable-read-uncommitted", ApiKey.OFFSET_FETCH, 8, fetch(8, g, {"dt1": [0]}))
    s.call("list-ongoing", ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": ["Ongoing"], "producer_id_filters": [pid]})
    s.call("end-commit", ApiKey.END_TXN, v, end_txn(t, pid, epoch, True))
    wait_txn_state(s, pid, "CompleteCommit")
    s.call("fetch-committed", ApiKey.OFFSET_FETCH, 8, stable_fetch(g, {"dt1": [0]}))
    s.call("end-commit-again", ApiKey.END_TXN, v, end_txn(t, pid, epoch, True))
    s.call("end-abort-after-commit", ApiKey.END_TXN, v, end_txn(t, pid, epoch, False))
    s.call("add-offsets-2", ApiKey.ADD_OFFSETS_TO_TXN, v,
           {"transactional_id": t, "producer_id": pid, "producer_epoch": epoch, "group_id": g})
    s.call("txn-offset-commit-2", ApiKey.TXN_OFFSET_COMMIT, v, txn_commit(t, g, pid, epoch, {"dt1": {0: 9}}))
    s.call("end-abort", ApiKey.END_TXN, v, end_txn(t, pid, epoch, False))
    wait_txn_state(s, pid, "CompleteAbort")
    s.call("fetch-after-abort", ApiKey.OFFSET_FETCH, 8, stable_fetch(g, {"dt1": [0]}))


versions("transaction_life", range(0, 4), _transaction_life)


@scenario
def transaction_fenced_by_a_new_init(s: Side) -> None:
    """InitProducerId while a transaction is ongoing aborts it: CONCURRENT_TRANSACTIONS until the
    abort completes, then the epoch after the abort's bump; the old epoch is fenced."""
    t = s.group("txn")
    txn_ready(s, t)
    r = s.call("init", ApiKey.INIT_PRODUCER_ID, 4, init_pid(t))
    pid, epoch = r.producer_id, r.producer_epoch
    s.call("add-partitions", ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(t, pid, epoch, {"dt1": [0]}))
    s.call("init-while-ongoing", ApiKey.INIT_PRODUCER_ID, 4, init_pid(t))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # a client retries CONCURRENT_TRANSACTIONS (unrecorded)
        again = s.client("poll").request(ApiKey.INIT_PRODUCER_ID, 4, init_pid(t))
        if again.error_code != ErrorCode.concurrent_transactions:
            break
        time.sleep(0.02)
    s.record("init-after-abort", {"error_code": again.error_code, "producer_epoch": again.producer_epoch})
    s.call("old-epoch-add", ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(t, pid, epoch, {"dt1": [0]}))
    s.call("old-epoch-end", ApiKey.END_TXN, 3, end_txn(t, pid, epoch, True))
    s.call("old-epoch-offsets", ApiKey.ADD_OFFSETS_TO_TXN, 3,
           {"transactional_id": t, "producer_id": pid, "producer_epoch": epoch, "group_id": s.group()})


# ---- records of a scenario's own topic: produced, then read by a share group -------------------

MS = datetime.timedelta(milliseconds=1)
TS = (int(time.time()) - 3600) * 1000  # an hour ago: Kafka refuses a timestamp an hour ahead (4.x's default)


def produced_batch(n: int, ts: int) -> bytes:
    """A v2 batch of `n` records stamped from `ts`, as a producer sends it (base offset 0)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=None, value=b"v", headers=[])
    data = b.build()
    struct.pack_into(">q", data, 0, 0)
    return bytes(data)


def list_offsets(topic: str, partition: int, timestamp: int) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]}


def ready(s: Side, topic: str, partitions: int) -> None:
    """Wait (unrecorded) until every partition answers ListOffsets: Kafka elects its leaders after
    CreateTopics answers."""
    deadline = time.monotonic() + 60
    for p in range(partitions):
        while s.client().request(ApiKey.LIST_OFFSETS, 7, list_offsets(topic, p, -1)).topics[0].partitions[0] \
                .error_code is not ErrorCode.none:
            assert time.monotonic() < deadline, f"{topic}-{p} has no leader"
            time.sleep(0.1)


ACCEPT, RELEASE, REJECT = 1, 2, 3


def ack_batches(batches: list[tuple[int, int, int]]) -> list[dict]:
    return [{"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in batches]


def transactional_batch(n: int, ts: int, pid: int, epoch: int, seq: int) -> bytes:
    """A transactional v2 batch of `n` records, as a transactional producer sends it (base offset 0)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=None, value=b"v", headers=[])
    data = b.build()
    struct.pack_into(">q", data, 0, 0)
    return bytes(data)


@scenario
def transaction_v2_life(s: Side) -> None:
    """Transactions v2 (KIP-890 part 2), with `transaction.version` finalized at 2 on both servers: the
    feature in ApiVersions, Produce v11 to a partition never added (verified only), Produce v12 adding
    it implicitly, TxnOffsetCommit v5 adding the group implicitly (no AddOffsetsToTxn), EndTxn v5
    bumping the epoch and answering it, its retry with the epoch bumped from, the opposite result, the
    same epoch (the next end: nothing to commit), an abort with no partition; then the committed
    offsets and the topic's last stable offset."""
    r = s.client().request(ApiKey.API_VERSIONS, 4, {"client_software_name": "groupd-differential",
                                                    "client_software_version": "1"})
    s.record("transaction-version-feature", {
        "supported": [(f.min_version, f.max_version) for f in r.supported_features if f.name == "transaction.version"],
        "finalized": [(f.min_version_level, f.max_version_level) for f in r.finalized_features
                      if f.name == "transaction.version"]})
    topic, t, g = f"{s.scenario}-t", s.group("txn"), s.group()
    s.call("create", ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout": 30_000 * MS, "validate_only": False})
    ready(s, topic, 2)
    txn_ready(s, t)
    r = s.call("init", ApiKey.INIT_PRODUCER_ID, 5, init_pid(t))
    pid, epoch = r.producer_id, r.producer_epoch

    def produce(label: str, version: int, partition: int, n: int, seq: int, at_epoch: int) -> None:
        s.call(label, ApiKey.PRODUCE, version, {"transactional_id": t, "acks": -1, "timeout": 5000 * MS,
                                                "topic_data": [{"name": topic, "partition_data": [
                                                    {"index": partition,
                                                     "records": transactional_batch(n, TS, pid, at_epoch, seq)}]}]})

    produce("produce-v11-not-added", 11, 1, 1, 0, epoch)
    produce("produce-v12-implicit-add", 12, 0, 2, 0, epoch)
    s.call("list-ongoing", ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": ["Ongoing"], "producer_id_filters": [pid]})
    s.call("txn-offset-commit-v5", ApiKey.TXN_OFFSET_COMMIT, 5, txn_commit(t, g, pid, epoch, {topic: {0: 5}}))
    s.call("fetch-unstable", ApiKey.OFFSET_FETCH, 8, stable_fetch(g, {topic: [0]}))
    s.call("end-commit-v5", ApiKey.END_TXN, 5, end_txn(t, pid, epoch, True))
    wait_txn_state(s, pid, "CompleteCommit")
    s.call("end-commit-retry", ApiKey.END_TXN, 5, end_txn(t, pid, epoch, True))
    s.call("end-abort-retry", ApiKey.END_TXN, 5, end_txn(t, pid, epoch, False))
    s.call("end-commit-bumped-epoch", ApiKey.END_TXN, 5, end_txn(t, pid, epoch + 1, True))
    s.call("end-commit-stale-epoch", ApiKey.END_TXN, 5, end_txn(t, pid, epoch + 3, True))
    s.call("fetch-committed", ApiKey.OFFSET_FETCH, 8, stable_fetch(g, {topic: [0]}))
    s.call("produce-v12-next-epoch", ApiKey.PRODUCE, 12, {
        "transactional_id": t, "acks": -1, "timeout": 5000 * MS, "topic_data": [{"name": topic, "partition_data": [
            {"index": 0, "records": transactional_batch(1, TS, pid, epoch + 1, 0)}]}]})
    s.call("end-abort-v5", ApiKey.END_TXN, 5, end_txn(t, pid, epoch + 1, False))
    wait_txn_state(s, pid, "CompleteAbort")
    s.call("end-abort-nothing-added", ApiKey.END_TXN, 5, end_txn(t, pid, epoch + 2, False))
    wait_txn_state(s, pid, "CompleteAbort")
    s.call("end-commit-nothing-added", ApiKey.END_TXN, 5, end_txn(t, pid, epoch + 3, True))
    s.call("last-stable-offset", ApiKey.LIST_OFFSETS, 7, {**list_offsets(topic, 0, -1), "isolation_level": 1})


@scenario
def transaction_v2_timed_out(s: Side) -> None:
    """A transactions-v2 transaction past its timeout is aborted by the coordinator (its scan, at most
    `transaction.abort.timed.out.transaction.cleanup.interval.ms` later, 10 s on both) under a fencing
    bump: then the producer's EndTxn v5 with its epoch, either result, and its InitProducerId naming it."""
    topic, t = f"{s.scenario}-t", s.group("txn")
    s.call("create", ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout": 30_000 * MS, "validate_only": False})
    ready(s, topic, 1)
    txn_ready(s, t)
    r = s.call("init", ApiKey.INIT_PRODUCER_ID, 5, init_pid(t, timeout=1000))
    pid, epoch = r.producer_id, r.producer_epoch
    s.call("produce-v12", ApiKey.PRODUCE, 12, {"transactional_id": t, "acks": -1, "timeout": 5000 * MS,
                                               "topic_data": [{"name": topic, "partition_data": [
                                                   {"index": 0, "records": transactional_batch(1, TS, pid, epoch, 0)}]}]})
    wait_txn_state(s, pid, "CompleteAbort", timeout=60)
    state = s.client().request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [t]}).transaction_states[0]
    s.record("after-the-timeout", {"state": state.transaction_state, "producer_epoch": state.producer_epoch})
    s.call("end-commit-fenced", ApiKey.END_TXN, 5, end_txn(t, pid, epoch, True))
    s.call("end-abort-fenced", ApiKey.END_TXN, 5, end_txn(t, pid, epoch, False))
    s.call("init-naming-the-old-epoch", ApiKey.INIT_PRODUCER_ID, 5, init_pid(t, 1000, pid, epoch))


def records_as_offsets(response: Any) -> Any:
    """A ShareFetch answer with each partition's record bytes replaced by the offsets they hold (a
    batch's bytes carry its server's leader epoch)."""
    return dataclasses.replace(response, responses=tuple(
        dataclasses.replace(t, partitions=tuple(
            dataclasses.replace(p, records=tuple(r.offset for b in iter_batches(p.records or b"") for r in b))
            for p in t.partitions)) for t in response.responses))


class ShareSession:
    """A share session as a client keeps it: its member, its topic, its next epoch."""

    def __init__(self, s: Side, group: str, member: str, tid: uuid.UUID) -> None:
        self.s, self.group, self.member, self.tid, self.epoch = s, group, member, tid, 0

    def _epoch(self, epoch: int | None) -> int:
        if epoch is not None:
            return epoch
        epoch, self.epoch = self.epoch, self.epoch + 1
        return epoch

    def _fetch(self, batches=(), wait_ms: int = 500, tid: uuid.UUID | None = None, epoch: int | None = None) -> Any:
        return self.s.client(self.member).request(ApiKey.SHARE_FETCH, 1, {
            "group_id": self.group, "member_id": self.member, "share_session_epoch": self._epoch(epoch),
            "max_wait": wait_ms * MS, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": tid or self.tid, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": ack_batches(list(batches))}]}],
            "forgotten_topics_data": []})

    def fetch(self, label: str, **kw: Any) -> None:
        self.s.record(label, records_as_offsets(self._fetch(**kw)))

    def fetch_until_acquired(self, label: str, timeout: float = 30.0) -> None:
        """ShareFetch until records are acquired (Kafka initializes a share-partition off the fetch
        path: its first fetches may come back empty); the answer that acquired them is recorded."""
        deadline = time.monotonic() + timeout
        while True:
            r = self._fetch()
            if any(p.acquired_records for t in r.responses for p in t.partitions) \
                    or r.error_code != ErrorCode.none or time.monotonic() > deadline:
                self.s.record(label, records_as_offsets(r))
                return

    def acknowledge(self, label: str, batches: list[tuple[int, int, int]], epoch: int | None = None) -> None:
        self.s.record(label, self.s.client(self.member).request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": self.group, "member_id": self.member, "share_session_epoch": self._epoch(epoch),
            "topics": [{"topic_id": self.tid, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": ack_batches(batches)}]}]}))


@scenario
def share_fetch_and_acknowledge(s: Side) -> None:
    """A share group reads its own topic from the earliest offset (the group config set first):
    records acquired, acknowledged ACCEPT / RELEASE / REJECT, the released ones delivered again with
    their delivery count, records not acquired acknowledged, a piggybacked acknowledgement, an unknown
    topic id, a wrong session epoch, the session closed."""
    topic, group = f"{s.scenario}-t", s.group()
    s.call("create", ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout": 30_000 * MS, "validate_only": False})
    ready(s, topic, 1)
    for i in range(3):  # offsets 0-5 in batches at 0, 2, 4
        s.call(f"produce-{i}", ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout": 5000 * MS,
                                                   "topic_data": [{"name": topic, "partition_data": [
                                                       {"index": 0, "records": produced_batch(2, TS + 1000 * i)}]}]})
    s.call("earliest", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
        "validate_only": False})
    tid = s.client().request(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}).topics[0].topic_id
    s.topic_ids[tid] = topic
    member = ShareMember(s, group, "eeeeeeee-0000-4000-8000-00000000000e", "m", [topic])
    deadline = time.monotonic() + 30
    while not member.assigned and time.monotonic() < deadline:  # the join's epochs are F6's (unrecorded)
        member.heartbeat(None)
        time.sleep(0.05)
    session = ShareSession(s, group, member.id, tid)
    session.fetch_until_acquired("acquire-all")
    session.acknowledge("accept-release-reject", [(0, 1, ACCEPT), (2, 3, RELEASE), (4, 5, REJECT)])
    session.fetch_until_acquired("released-again")
    session.acknowledge("not-acquired", [(0, 1, ACCEPT)])
    session.fetch("accept-piggybacked", batches=[(2, 3, ACCEPT)], wait_ms=100)
    session.fetch("unknown-topic-id", tid=uuid.UUID(int=7), wait_ms=0)
    session.fetch("wrong-epoch", epoch=session.epoch + 5, wait_ms=0)
    session.acknowledge("close", [], epoch=-1)
    session.fetch("after-close", epoch=3, wait_ms=0)
    session.fetch("new-session-unknown-topic-id", tid=uuid.UUID(int=7), epoch=0, wait_ms=0)
    session.fetch("its-next-epoch", epoch=1, wait_ms=0)
    s.call("leave", ApiKey.SHARE_GROUP_HEARTBEAT, 1, sgh(group, member.id, -1), member.client)


@scenario
def txn_offset_commit_to_a_share_group(s: Side) -> None:
    """TxnOffsetCommit naming a share group: refused as OffsetCommit is (share groups commit no offsets)."""
    g, t = s.group(), s.group("txn")
    member = ShareMember(s, g, "ffffffff-0000-4000-8000-00000000000f", "m", ["dt1"])
    member.heartbeat(None)
    txn_ready(s, t)
    r = s.call("init", ApiKey.INIT_PRODUCER_ID, 4, init_pid(t))
    pid, epoch = r.producer_id, r.producer_epoch
    s.call("add-offsets", ApiKey.ADD_OFFSETS_TO_TXN, 3,
           {"transactional_id": t, "producer_id": pid, "producer_epoch": epoch, "group_id": g})
    s.call("txn-offset-commit", ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit(t, g, pid, epoch, {"dt1": {0: 1}}))
    s.call("end-abort", ApiKey.END_TXN, 3, end_txn(t, pid, epoch, False))
