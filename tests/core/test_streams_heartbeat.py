"""StreamsGroupHeartbeat (KIP-1071, Kafka 4.3) through the runner with a fake clock: joins with
client-generated ids and the topology, NOT_READY until the internal topics exist, the sticky target,
revoke-before-assign, leaving, session expiry, the status codes and errors; after each scenario the
written records are replayed into a fresh partition and must rebuild the same groups."""

import uuid

import pytest

from groupd.coordinator.core.consumer.machine import TopicsImage
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.core.streams.group import StreamsGroup
from groupd.coordinator.core.streams.machine import StreamsHeartbeatRequest, StreamsSettings
from groupd.coordinator.core.streams.tasks import Tasks
from groupd.protocol import ErrorCode
from groupd.storage.catalog import Topic
from groupd.storage.consumer_records import decode, encode_key, encode_value
from groupd.storage.streams_records import (
    CopartitionGroup,
    StreamsGroupTopologyValue,
    StreamsTopicInfo,
    Subtopology,
    TopicConfig,
)

E = ErrorCode
SESSION_MS = 45_000
INPUT, OTHER = uuid.UUID(int=1), uuid.UUID(int=2)
REPART, CHANGELOG = uuid.UUID(int=3), uuid.UUID(int=4)
COMPACT = (TopicConfig("cleanup.policy", "compact"),)
# word count: 0 reads `input` and writes app-repartition; 1 reads it and keeps a store (Kafka Streams
# names a repartition topic a subtopology reads among its repartition sources only, not its sources)
TOPOLOGY = StreamsGroupTopologyValue(0, (
    Subtopology("0", ("input",), (), (), ("app-repartition",), (), ()),
    Subtopology("1", (), (), (StreamsTopicInfo("app-store-changelog", 0, 0, COMPACT),), (),
                (StreamsTopicInfo("app-repartition", 0, 0, ()),), ()),
))


def image(*topics, version=1):
    return TopicsImage.of(version, list(topics))


BASE = image(Topic("input", 3, INPUT))
READY = image(Topic("input", 3, INPUT), Topic("app-repartition", 3, REPART),
              Topic("app-store-changelog", 3, CHANGELOG), version=2)


def join(member_id, process="p1", topology=TOPOLOGY, **kw):
    return StreamsHeartbeatRequest("g", member_id, 0, rebalance_timeout_ms=60_000, topology=topology,
                                   process_id=process, client_id="client", client_host="/127.0.0.1", **kw)


def hb(member_id, epoch, owned=None, **kw):
    return StreamsHeartbeatRequest("g", member_id, epoch, owned=owned, client_id="client",
                                   client_host="/127.0.0.1", **kw)


def tasks(reply, kind="active_tasks"):
    t = reply[kind]
    return None if t is None else {(e["subtopology_id"], p) for e in t for p in e["partitions"]}


def owned(reply_tasks, standby=()):
    active, stand = {}, {}
    for s, p in reply_tasks or ():
        active.setdefault(s, set()).add(p)
    for s, p in standby:
        stand.setdefault(s, set()).add(p)
    return Tasks({s: frozenset(ps) for s, ps in active.items()}, {s: frozenset(ps) for s, ps in stand.items()}, {})


def statuses(reply):
    return {s["status_code"] for s in reply["status"] or ()}


@pytest.fixture
def d():
    """No initial delay and no assignment interval: these scenarios follow reconciliation one step at
    a time, each change assigned at once (the batching has its own tests)."""
    from .driver import Driver
    return Driver(GroupSettings(streams=StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0)))


def group(d) -> StreamsGroup:
    return d.shard.groups["g"]


def durable(g: StreamsGroup) -> dict:
    return {"epoch": g.group_epoch, "hash": g.metadata_hash, "assignment_epoch": g.assignment_epoch,
            "topology": g.topology, "targets": g.targets,
            "members": {m.member_id: (m.metadata, m.current) for m in g.members.values()}}


def assert_replay_matches(d):
    fresh = d.replay()
    live = {gid: durable(g) for gid, g in d.shard.groups.items() if isinstance(g, StreamsGroup)}
    assert {gid: durable(g) for gid, g in fresh.groups.items() if isinstance(g, StreamsGroup)} == live


def test_first_member_is_not_ready_until_the_internal_topics_exist_and_names_them(d):
    reply = d.streams_heartbeat(join("m-1"), BASE)
    assert reply["error_code"] == E.none
    assert reply["member_id"] == "m-1" and reply["member_epoch"] == 1
    assert statuses(reply) == {3}  # MISSING_INTERNAL_TOPICS
    created = {t.name: t for t in reply["internal_topics"]}
    assert set(created) == {"app-repartition", "app-store-changelog"}
    assert created["app-repartition"].partitions == 3  # derived from `input`, which writes it
    assert created["app-store-changelog"].partitions == 3 and created["app-store-changelog"].configs == (
        ("cleanup.policy", "compact"),)
    assert tasks(reply) == set()
    assert group(d).state_name == "NotReady"
    assert group(d).topology == TOPOLOGY
    # once they exist the group is ready: a new epoch and every task
    reply = d.streams_heartbeat(hb("m-1", 1), READY)
    assert statuses(reply) == set() and reply["internal_topics"] == ()
    assert reply["member_epoch"] == 2
    assert tasks(reply) == {(s, p) for s in "01" for p in range(3)}
    assert group(d).state_name == "Stable"
    assert_replay_matches(d)


def test_a_missing_source_topic_is_reported_and_nothing_is_assigned(d):
    reply = d.streams_heartbeat(join("m-1"), image())
    assert statuses(reply) == {1}
    assert reply["status"][0]["status_detail"] == "Source topics input are missing."
    assert reply["internal_topics"] == ()
    assert tasks(reply) == set()


def test_copartitioned_topics_that_disagree_are_incorrectly_partitioned(d):
    join_topology = StreamsGroupTopologyValue(0, (
        Subtopology("0", ("left", "right"), (), (), (), (), (CopartitionGroup((0, 1)),)),))
    reply = d.streams_heartbeat(join("m-1", topology=join_topology),
                                image(Topic("left", 2, INPUT), Topic("right", 3, OTHER)))
    assert statuses(reply) == {2}
    assert "left:2" in reply["status"][0]["status_detail"]


def test_a_changelog_with_a_partition_count_is_an_invalid_topology():
    from .driver import Driver
    d = Driver(GroupSettings(streams=StreamsSettings(initial_rebalance_delay_ms=0)))
    bad = StreamsGroupTopologyValue(0, (Subtopology("0", ("input",), (), (StreamsTopicInfo("c", 4, 0, ()),),
                                                    (), (), ()),))
    reply = d.streams_heartbeat(join("m-1", topology=bad), BASE)
    assert reply["error_code"] == E.streams_invalid_topology
    assert reply["error_message"] == "Changelog topic c must have an undefined partition count, but it is set to 4."
    assert "g" not in d.shard.groups and d.written == []


def test_second_process_gets_half_after_the_first_revokes(d):
    first = d.streams_heartbeat(join("a", "p1"), READY)
    assert len(tasks(first)) == 6
    b = d.streams_heartbeat(join("b", "p2"), READY)
    assert b["member_epoch"] == 2  # b is at the new epoch but waits: its tasks are still a's (unreleased)
    assert tasks(b) == set()
    assert group(d).members["b"].state.name == "UNRELEASED_TASKS"
    a = d.streams_heartbeat(hb("a", 1), READY)
    assert a["member_epoch"] == 1  # revoke first: a keeps its epoch and loses three tasks
    keep = tasks(a)
    assert len(keep) == 3
    assert group(d).members["a"].state.name == "UNREVOKED_TASKS"
    a = d.streams_heartbeat(hb("a", 1, owned=owned(keep)), READY)
    assert a["member_epoch"] == 2 and group(d).members["a"].state.name == "STABLE"
    b = d.streams_heartbeat(hb("b", 2), READY)
    assert b["member_epoch"] == 2
    assert tasks(b) | keep == {(s, p) for s in "01" for p in range(3)} and not tasks(b) & keep
    assert group(d).state_name == "Stable"
    assert_replay_matches(d)


def test_leave_hands_the_tasks_to_the_survivor(d):
    d.streams_heartbeat(join("a", "p1"), READY)
    d.streams_heartbeat(join("b", "p2"), READY)
    a = d.streams_heartbeat(hb("a", 1), READY)
    d.streams_heartbeat(hb("a", 1, owned=owned(tasks(a))), READY)
    left = d.streams_heartbeat(hb("b", -1), READY)
    assert left["member_epoch"] == -1 and "b" not in group(d).members
    a = d.streams_heartbeat(hb("a", 2, owned=owned({("0", 0)})), READY)
    assert len(tasks(a)) == 6
    assert_replay_matches(d)


def test_session_expiry_fences_the_member_and_the_survivor_takes_over(d):
    d.streams_heartbeat(join("a", "p1"), READY)
    d.streams_heartbeat(join("b", "p2"), READY)
    for _ in range(3):
        d.advance(20_000)
        for m in ("a",):
            epoch = group(d).members[m].member_epoch
            d.streams_heartbeat(hb(m, epoch, owned=owned(_held(d, m))), READY)
    assert "b" not in group(d).members  # b went silent past its session
    epoch = group(d).members["a"].member_epoch
    a = d.streams_heartbeat(hb("a", epoch, owned=owned(_held(d, "a"))), READY)
    assert len(_held(d, "a")) == 6 and a["error_code"] == E.none
    assert_replay_matches(d)


def _held(d, m):
    return {(s, p) for s, ps in group(d).members[m].assigned.active.items() for p in ps}


def test_standbys_never_share_the_active_process():
    from .driver import Driver
    d = Driver(GroupSettings(streams=StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0,
                                                     num_standby_replicas=1)))
    for m, p in (("a", "p1"), ("b", "p2")):
        d.streams_heartbeat(join(m, p), READY)
    g = group(d)
    targets = g.targets
    for m, t in targets.items():
        assert not (set(t.sets()[0]) & set(t.sets()[1]))
    standby_total = sum(len(t.sets()[1]) for t in targets.values())
    assert standby_total == 6  # one standby per task, on the other process


def test_errors_are_kafkas(d):
    assert d.streams_heartbeat(hb("x", 3), READY)["error_code"] == E.group_id_not_found
    d.streams_heartbeat(join("a"), READY)
    r = d.streams_heartbeat(hb("a", 7), READY)
    assert r["error_code"] == E.fenced_member_epoch
    r = d.streams_heartbeat(hb("nobody", 1), READY)
    assert r["error_code"] == E.unknown_member_id
    r = d.streams_heartbeat(join("a", instance_id="i"), READY)
    assert (r["error_code"], r["error_message"]) == (E.invalid_request, "Static membership is not yet supported.")
    r = d.streams_heartbeat(hb("a", -2), READY)
    assert (r["error_code"], r["error_message"]) == (E.invalid_request, "InstanceId can't be null.")
    r = d.streams_heartbeat(StreamsHeartbeatRequest("g", "a", 0, topology=TOPOLOGY), READY)
    assert r["error_message"] == "RebalanceTimeoutMs must be provided in first request."
    changed = StreamsGroupTopologyValue(0, TOPOLOGY.subtopologies[:1])
    r = d.streams_heartbeat(join("b", topology=changed), READY)
    assert (r["error_code"], r["error_message"]) == (E.invalid_request, "Topology updates are not supported yet.")


def test_a_stale_topology_epoch_is_reported_and_a_shutdown_reaches_everyone(d):
    newer = StreamsGroupTopologyValue(1, TOPOLOGY.subtopologies)
    d.streams_heartbeat(join("a", topology=newer), READY)
    b = d.streams_heartbeat(join("b", "p2", topology=TOPOLOGY), READY)
    assert 0 in statuses(b)  # STALE_TOPOLOGY
    d.streams_heartbeat(hb("b", b["member_epoch"], shutdown_application=True), READY)
    a = d.streams_heartbeat(hb("a", group(d).members["a"].member_epoch), READY)
    assert 4 in statuses(a)  # SHUTDOWN_APPLICATION


def test_the_initial_rebalance_delay_holds_the_first_assignment():
    from .driver import Driver
    d = Driver(GroupSettings(streams=StreamsSettings(initial_rebalance_delay_ms=3000)))
    r = d.streams_heartbeat(join("a"), READY)
    assert statuses(r) == {5} and tasks(r) is None
    assert r["member_epoch"] == 0  # no target yet: the member stays at epoch 0 and joins again
    d.advance(3000)
    r = d.streams_heartbeat(join("a"), READY)
    assert statuses(r) == set() and len(tasks(r)) == 6


def test_streams_records_round_trip_as_kafkas_types(d):
    d.streams_heartbeat(join("a"), READY)
    types = set()
    for record in d.written:
        key = encode_key(record.key)
        types.add(int.from_bytes(key[:2], "big"))
        assert decode(key, encode_value(record.value)) == record
    assert types == {17, 19, 20, 21, 22, 23}


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(d):
    d.streams_heartbeat(join("a", "p1"), READY)
    d.streams_heartbeat(join("b", "p2"), READY)
    a = d.streams_heartbeat(hb("a", 1), READY)  # told to revoke; never says it did
    assert group(d).members["a"].state.name == "UNREVOKED_TASKS"
    for _ in range(4):  # b keeps its session; a keeps heartbeating without reporting its tasks
        d.advance(20_000)
        d.streams_heartbeat(hb("b", group(d).members["b"].member_epoch), READY)
        if "a" in group(d).members:
            d.streams_heartbeat(hb("a", a["member_epoch"]), READY)
    assert "a" not in group(d).members  # fenced after its 60 s rebalance timeout
    assert_replay_matches(d)


def test_offline_migration_between_classic_and_streams(d):
    d.commit("g", [("input", 0, 5)])  # a classic group holding offsets only
    r = d.streams_heartbeat(join("a"), READY)
    assert r["error_code"] == E.none and group(d).type == "streams"
    assert [o.offset for _t, _p, o in d.fetch("g", [("input", [0])])] == [5]  # the offsets stay
    fresh = d.replay()
    assert fresh.groups["g"].type == "streams"
    assert [o.offset for _t, _p, o in fresh.fetch_offsets("g", [("input", [0])])] == [5]
    live = d.join("g", "", ticket="t1")
    assert live["error_code"] == E.inconsistent_group_protocol  # a live streams group refuses classic members
    d.streams_heartbeat(hb("a", -1), READY)
    d.join("g", "", ticket="t2")
    assert d.shard.groups["g"].type == "classic"  # an empty one becomes a classic group again
    assert [o.offset for _t, _p, o in d.fetch("g", [("input", [0])])] == [5]
    assert d.replay().groups["g"].type == "classic"


def test_partitions_by_user_endpoint_name_each_members_source_partitions(d):
    a = d.streams_heartbeat(join("a", "p1", user_endpoint=("host-a", 7000)), READY)
    assert a["endpoint_information_epoch"] >= 1
    [entry] = a["partitions_by_user_endpoint"]
    assert entry["user_endpoint"] == {"host": "host-a", "port": 7000}
    assert {(t["topic"], p) for t in entry["active_partitions"] for p in t["partitions"]} == {
        ("input", p) for p in range(3)} | {("app-repartition", p) for p in range(3)}
    again = d.streams_heartbeat(hb("a", a["member_epoch"], endpoint_information_epoch=a["endpoint_information_epoch"]),
                                READY)
    assert again["partitions_by_user_endpoint"] is None  # up to date: not sent again


@pytest.mark.parametrize("seed", range(100))
def test_any_topology_a_client_sends_is_configured_or_refused_never_a_crash(seed):
    import random

    from groupd.coordinator.core.streams import topology as topo
    rng = random.Random(seed)
    names = ["t0", "t1", "r0", "r1", "c0"]

    def info(name):
        return StreamsTopicInfo(name, rng.choice([-3, 0, 0, 2, 5]), rng.choice([-1, 0, 1]), ())

    subs = tuple(Subtopology(str(i), tuple(rng.sample(names, rng.randint(0, 3))), (),
                             tuple(info(n) for n in rng.sample(names, rng.randint(0, 2))),
                             tuple(rng.sample(names, rng.randint(0, 2))),
                             tuple(info(n) for n in rng.sample(names, rng.randint(0, 2))),
                             tuple(CopartitionGroup(tuple(rng.randint(-2, 4) for _ in range(2)), (),
                                                    tuple(rng.randint(-2, 4) for _ in range(2)))
                                   for _ in range(rng.randint(0, 2))))
                 for i in range(rng.randint(0, 3)))
    existing = {n: rng.randint(1, 4) for n in rng.sample(names, rng.randint(0, 5))}
    try:
        configured = topo.configure(StreamsGroupTopologyValue(0, subs), existing, 0)
    except topo.InvalidTopology:
        return
    assert configured.ready or configured.status is not None or configured.to_create


def test_offsets_replayed_before_the_streams_records_do_not_hide_the_group(d):
    """KAFKA-20254: after compaction an offset commit can come before the group's records; its
    simple classic group must give way to the streams group on replay (Kafka 4.2.0 failed here)."""
    from groupd.storage.records import OffsetCommitKey
    r = d.streams_heartbeat(join("a"), READY)
    d.commit("g", [("input", 0, 7)], generation=r["member_epoch"], member_id="a")
    offsets = [rec for rec in d.written if isinstance(rec.key, OffsetCommitKey)]
    fresh = d.new_shard()
    for record in offsets + [rec for rec in d.written if rec not in offsets]:
        fresh.apply(record)
    assert fresh.groups["g"].type == "streams" and set(fresh.groups["g"].members) == {"a"}
    assert [o.offset for _t, _p, o in fresh.fetch_offsets("g", [("input", [0])])] == [7]


def test_offset_commits_are_checked_against_each_tasks_assignment_epoch(d):
    """Kafka 4.3's per-task assignment epochs (KIP-1251): a task keeps the epoch it was assigned at
    while the member keeps it; a commit at an older member epoch passes only for tasks the member has
    held since that epoch (as TxnOffsetCommit, whose refusal is ILLEGAL_GENERATION)."""
    from groupd.storage.streams_records import StreamsGroupCurrentMemberAssignmentKey
    topic = {"0": "input", "1": "app-repartition"}  # the topic each subtopology's tasks read
    d.streams_heartbeat(join("a", "p1"), READY)
    d.streams_heartbeat(join("b", "p2"), READY)
    keep = tasks(d.streams_heartbeat(hb("a", 1), READY))
    assert d.streams_heartbeat(hb("a", 1, owned=owned(keep)), READY)["member_epoch"] == 2
    given = tasks(d.streams_heartbeat(hb("b", 2), READY))
    assert len(keep) == len(given) == 3
    [a_record] = [r.value for r in d.written if isinstance(r.key, StreamsGroupCurrentMemberAssignmentKey)
                  and r.key.member_id == "a"][-1:]
    assert {(t.subtopology_id, p, e) for t in a_record.active_tasks for p, e in zip(t.partitions,
                                                                                  t.assignment_epochs)} == {
        (s, p, 1) for s, p in keep}  # kept from epoch 1
    assert all(t.assignment_epochs == () for t in a_record.standby_tasks)  # only active tasks carry them
    kept, lost = sorted(keep)[0], sorted(given)[0]
    at = {"kept": (topic[kept[0]], kept[1], 10), "lost": (topic[lost[0]], lost[1], 10)}

    def commit(member, epoch, *which):
        return set(d.commit("g", [at[w] for w in which], generation=epoch, member_id=member).values())

    assert commit("a", 2, "kept", "lost") == {E.none}  # the current epoch: no per-task check (as Kafka)
    assert commit("a", 1, "kept") == {E.none}  # a's answer at epoch 2 may not have reached it yet
    assert commit("a", 1, "kept", "lost") == {E.stale_member_epoch}  # one task it no longer holds: all refused
    assert commit("a", 3, "kept") == {E.stale_member_epoch}  # newer than the member's
    assert commit("b", 1, "lost") == {E.stale_member_epoch}  # b holds it since epoch 2
    assert commit("a", 1, "kept") == {E.none}
    txn = d.txn_commit("g", [at["lost"]], generation=1, member_id="a")
    assert set(txn.values()) == {E.illegal_generation}
    assert set(d.txn_commit("g", [at["kept"]], generation=1, member_id="a").values()) == {E.none}
    assert_replay_matches(d)
