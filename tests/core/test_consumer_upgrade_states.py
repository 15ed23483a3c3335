"""Online upgrade (spec §7.4) at every point of a classic group's life, through the runner with a fake
clock: three classic members run a cooperative-sticky rebalance the way librdkafka does (a, b, then n
joins: two rounds), and at each point a consumer-protocol member joins. Kafka converts the group in
every state (Empty is replaced; PreparingRebalance, CompletingRebalance and Stable are converted with
each member's last assignment, empty when it has none or a rebalance reset it) and answers the parked
JoinGroup and SyncGroup requests REBALANCE_IN_PROGRESS; it refuses only for its policy, protocol type
and size checks, a malformed embedded protocol, or assignment userData (GroupMetadataManager
validateOnlineUpgrade and convertToConsumerGroup, ConsumerGroup.fromClassicGroup). librdkafka's leader
echoes each member's sticky userData into its assignment once the member had an assignment before, so
with the echo on, the points after the first round's assignment are refused, exactly as Kafka refuses
them; with it off every point upgrades."""

from __future__ import annotations

import dataclasses

import pytest

from groupd.coordinator.core.classic.group import ClassicGroup
from groupd.coordinator.core.consumer.group import ConsumerGroup
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.observability import observe
from groupd.protocol import ErrorCode
from groupd.protocol.consumer import (
    assigned_partitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

from .driver import Driver
from .test_consumer_heartbeat import FOO, TOPICS, assert_replay_matches, hb, join

E = ErrorCode
PROTOCOL = "cooperative-sticky"
CUSTOM_ASSIGNOR = ("Cannot upgrade classic group g to consumer group because an unsupported custom assignor is in "
                   "use. Please refer to the documentation or switch to a default assignor before re-attempting "
                   "the upgrade.")


@dataclasses.dataclass
class Client:
    """What a classic client knows: its member id, generation, next step and owned partitions."""

    name: str
    member_id: str = ""
    generation: int = -1
    step: str = "join"  # "join" (a JoinGroup is due), "sync" (joined, SyncGroup due), "stable", "parked-…"
    owned: list = dataclasses.field(default_factory=list)
    had_assignment: bool = False  # librdkafka's sticky assignor state: userData in its subscription
    join_ticket: str = ""
    sync_ticket: str = ""


class Cooperative:
    """Classic cooperative-sticky members on a Driver, moved one request at a time; the leader's
    assignments echo each member's subscription userData when `echo` (librdkafka's leader does)."""

    def __init__(self, d: Driver, echo: bool) -> None:
        self.d, self.echo = d, echo
        self.clients: dict[str, Client] = {}
        self.tickets = 0

    def ticket(self, what: str) -> str:
        self.tickets += 1
        return f"{what}-{self.tickets}"

    def subscription(self, c: Client) -> bytes:
        user_data = f"sticky-{c.name}".encode() if self.echo and c.had_assignment else b""
        return encode_subscription(["foo"], user_data, owned={"foo": c.owned})

    def join(self, name: str) -> dict | None:
        """A JoinGroup (a new member first learns its id: MEMBER_ID_REQUIRED); None while parked."""
        c = self.clients.setdefault(name, Client(name))
        args = dict(protocols=[(PROTOCOL, self.subscription(c))], client_id=name, session_timeout_ms=10_000,
                    rebalance_timeout_ms=300_000)
        if not c.member_id:
            first = self.d.join("g", ticket=self.ticket(f"id-{name}"), **args)
            assert first["error_code"] == E.member_id_required, first
            c.member_id = first["member_id"]
        ticket = self.ticket(f"join-{name}")
        c.step, c.join_ticket = "parked-join", ticket
        return self.joined(c, self.d.join("g", c.member_id, ticket=ticket, **args))

    def joined(self, c: Client, reply: dict | None) -> dict | None:
        if reply is not None:
            assert reply["error_code"] in (E.none, E.rebalance_in_progress), reply
            if reply["error_code"] == E.none:
                c.generation, c.step = reply["generation_id"], "sync"
            else:
                c.step = "join"
        return reply

    def collect(self) -> None:
        """Parked joins and syncs answered since: each client takes its answer."""
        for c in self.clients.values():
            if c.step == "parked-join" and c.join_ticket in self.d.replies:
                self.joined(c, self.d.replies[c.join_ticket])
            if c.step == "parked-sync" and c.sync_ticket in self.d.replies:
                self.synced(c, self.d.replies[c.sync_ticket])

    def sync(self, name: str, assignment: dict[str, list[int]] | None = None) -> dict | None:
        """A SyncGroup; the leader's carries `assignment` (name → partitions) with the echoed userData."""
        c = self.clients[name]
        assignments = {}
        if assignment is not None:
            group = self.d.group()
            for other, partitions in assignment.items():
                member = group.members[self.clients[other].member_id]
                user_data = decode_subscription(member.metadata(PROTOCOL)).user_data or b""
                assignments[member.member_id] = encode_assignment({"foo": partitions}, user_data)
        ticket = self.ticket(f"sync-{name}")
        c.step, c.sync_ticket = "parked-sync", ticket
        return self.synced(c, self.d.sync("g", c.member_id, c.generation, ticket=ticket, assignments=assignments,
                                          protocol_type="consumer", protocol_name=PROTOCOL))

    def synced(self, c: Client, reply: dict | None) -> dict | None:
        if reply is not None:
            assert reply["error_code"] in (E.none, E.rebalance_in_progress), reply
            if reply["error_code"] == E.none:
                c.owned = assigned_partitions(reply["assignment"]).get("foo", [])
                c.had_assignment, c.step = True, "stable"
            else:
                c.step = "join"
        return reply

    def heartbeat(self, name: str) -> ErrorCode:
        c = self.clients[name]
        error = self.d.heartbeat("g", c.member_id, c.generation)
        if error != E.none:
            c.step = "join"
        return error

    def move(self, name: str) -> None:
        """The client's next request, as its state machine sends it (outside a scripted rebalance)."""
        c = self.clients[name]
        if c.step == "join":
            self.join(name)
        elif c.step == "sync":
            self.sync(name)
        elif c.step == "stable":
            self.heartbeat(name)
        self.collect()


def group_state(d: Driver) -> str:
    return d.shard.groups["g"].state_name


# the cooperative rebalance, step by step (each step leaves the group at a point worth upgrading from)
def a_joins(co):  # PreparingRebalance, generation 0: the initial delay runs
    co.join("a")


def b_joins(co):
    co.join("b")


def join_phase_completes(co):  # CompletingRebalance, generation 1: nobody synced
    co.d.advance_until(lambda: group_state(co.d) != "PreparingRebalance")
    co.collect()


def leader_syncs_first(co):  # Stable, generation 1: b joined but has not synced
    co.sync("a", {"a": [0, 1], "b": [2, 3]})


def b_syncs(co):
    co.sync("b")


def n_joins(co):  # PreparingRebalance, generation 1: n parked, a and b not yet re-joined
    co.join("n")


def a_rejoins(co):
    co.join("a")


def b_rejoins(co):  # CompletingRebalance, generation 2: the first cooperative round
    co.join("b")
    co.collect()


def leader_syncs_round_one(co):  # Stable, generation 2: a and b give up a partition each, n gets none
    co.sync("a", {"a": [0], "b": [2], "n": []})


def b_and_n_sync(co):
    co.sync("b")
    co.sync("n")


def a_rejoins_for_round_two(co):  # PreparingRebalance, generation 2: the cooperative second round
    co.join("a")


def b_and_n_rejoin(co):  # CompletingRebalance, generation 3
    co.join("b")
    co.join("n")
    co.collect()


def leader_syncs_round_two(co):  # Stable, generation 3: n gets the released partitions
    co.sync("a", {"a": [0], "b": [2], "n": [1, 3]})


def b_and_n_sync_again(co):
    co.sync("b")
    co.sync("n")


STEPS = [a_joins, b_joins, join_phase_completes, leader_syncs_first, b_syncs, n_joins, a_rejoins, b_rejoins,
         leader_syncs_round_one, b_and_n_sync, a_rejoins_for_round_two, b_and_n_rejoin, leader_syncs_round_two,
         b_and_n_sync_again]


def a_rejoins_while_completing(co):  # CompletingRebalance → PreparingRebalance: Kafka resets every assignment
    co.join("a")


def leader_sync_in_flight(co):  # the leader's assignment applied, not yet durable; the others parked
    co.sync("b")  # b syncs first and is parked until the leader's write is durable
    co.d.hold_writes()
    co.sync("a", {"a": [0], "b": [2], "n": []})


POINTS = {f"{i:02}-after-{STEPS[i - 1].__name__}": STEPS[:i] for i in range(1, len(STEPS) + 1)}
POINTS["08b-round-one-reset-by-a-rejoin"] = STEPS[:8] + [a_rejoins_while_completing]
POINTS["09b-round-one-sync-in-flight"] = STEPS[:8] + [leader_sync_in_flight]
# where Kafka refuses when the leader echoes the sticky userData: some member was given an assignment
# carrying it (from the first round's sync on; not while that sync's write is in flight, nor after a
# rebalance from CompletingRebalance reset the assignments)
REFUSED_WITH_ECHO = {name for name in POINTS if name[:2] >= "09"} - {"09b-round-one-sync-in-flight"}


def run_to(name: str, echo: bool) -> tuple[Driver, Cooperative]:
    d = Driver(GroupSettings())
    co = Cooperative(d, echo)
    for step in POINTS[name]:
        step(co)
    return d, co


def parked(group: ClassicGroup) -> dict:
    tickets = {}
    for m in group.members.values():
        if m.awaiting_join is not None:
            tickets[m.awaiting_join] = m.member_id
        if m.awaiting_sync is not None:
            tickets[m.awaiting_sync] = m.member_id
    return tickets


def consumer_join(d: Driver, ticket: str = "c-join") -> dict | None:
    return d._op(ticket, lambda t: d.shard.consumer_heartbeat(join("c"), TOPICS, d.clock.read()))


def partitions(reply: dict) -> list[int] | None:
    a = reply["assignment"]
    return None if a is None else sorted(p for tp in a["topic_partitions"] for p in tp["partitions"])


def converge(d: Driver, co: Cooperative, joined: dict) -> list[int]:
    """The classic clients and c (its join answered `joined`) go on until the group is Stable and c
    holds its share; c's partitions."""
    epoch, c = joined["member_epoch"], partitions(joined) or []
    for _ in range(12):
        for name in co.clients:
            co.move(name)
        r = d.consumer_heartbeat(hb("c", epoch, [(FOO, c)] if c else []), TOPICS)
        assert r["error_code"] == E.none, r
        epoch = r["member_epoch"]
        c = c if r["assignment"] is None else partitions(r)
        owners = [p for cl in co.clients.values() for p in cl.owned] + c
        assert len(owners) == len(set(owners)), (owners, co.clients)  # never two owners at once
        if (sorted(owners) == [0, 1, 2, 3] and c and group_state(d) == "Stable"
                and all(cl.step == "stable" for cl in co.clients.values())):
            return c
    raise AssertionError(f"no convergence: {co.clients}, c={c}, {group_state(d)}")


def no_ticket_answered_twice(d: Driver) -> None:
    tickets = [t for t, _ in d.answers]
    assert len(tickets) == len(set(tickets)), [t for t in tickets if tickets.count(t) > 1]


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_consumer_protocol_member_upgrades_the_group_at_every_point(point):
    d, co = run_to(point, echo=False)
    classic = d.shard.groups["g"]
    assert isinstance(classic, ClassicGroup)
    generation, waiting = classic.generation, parked(classic)
    # what each member was given: a leader's assignment still being written has reached nobody (09b)
    last = {m.member_id: decode_assignment(m.propagated)[0].get("foo", []) for m in classic.members.values()}
    r = consumer_join(d)
    if d.holding:
        assert r is None  # behind the leader's write
        d.finish_writes()
        r = d.replies["c-join"]
    assert (r["error_code"], r["member_epoch"]) == (E.none, generation + 1), r
    group = d.shard.groups["g"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == set(last) | {"c"}
    for member_id, partitions in last.items():  # each classic member as it was: its last assignment, Stable
        m = group.members[member_id]
        assert (m.member_epoch, m.assignment.state.name) == (generation, "STABLE")
        assert m.assignment.assigned_partitions.get(FOO, frozenset()) == frozenset(partitions)
    for ticket, member_id in waiting.items():  # parked joins and syncs: answered once, to re-join
        assert d.answers_to(ticket) and d.answers_to(ticket)[0]["error_code"] == E.rebalance_in_progress
        if "join" in ticket:
            assert d.answers_to(ticket)[0]["member_id"] == member_id
    no_ticket_answered_twice(d)
    assert [type(e).__name__ for e in d.events if type(e).__name__ in ("GroupConverted", "UpgradeRefused")] == \
        ["GroupConverted"]
    co.collect()
    assert converge(d, co, r)
    no_ticket_answered_twice(d)
    assert_replay_matches(d)


@pytest.mark.parametrize("point", sorted(POINTS))
def test_with_librdkafkas_echoed_user_data_kafka_refuses_exactly_where_an_assignment_carries_it(point, caplog):
    d, co = run_to(point, echo=True)
    classic = d.shard.groups["g"]
    state, generation, waiting = classic.state_name, classic.generation, parked(classic)
    r = consumer_join(d)
    if d.holding:
        d.finish_writes()
        r = d.replies["c-join"]
    converted = [e for e in d.events if type(e).__name__ in ("GroupConverted", "UpgradeRefused")]
    if point not in REFUSED_WITH_ECHO:
        assert r["error_code"] == E.none and isinstance(d.shard.groups["g"], ConsumerGroup)
        assert [type(e).__name__ for e in converted] == ["GroupConverted"]
        co.collect()
        assert converge(d, co, r)
        return
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, CUSTOM_ASSIGNOR)
    assert [(type(e).__name__, e.reason) for e in converted] == [("UpgradeRefused", "custom-assignor")]
    group = d.shard.groups["g"]
    if point == "09b-round-one-sync-in-flight":
        state = "Stable"  # the leader's write landed after the refusal
    assert group is classic and (group.state_name, group.generation) == (state, generation)
    # Kafka answers the parked requests before it reads the members' protocols: they re-join the classic group
    for ticket in waiting:
        assert [a["error_code"] for a in d.answers_to(ticket)] == [E.rebalance_in_progress]
    no_ticket_answered_twice(d)
    with caplog.at_level("INFO", logger="groupd.group"):
        observe.emit(converted)
    assert [(rec.levelname, rec.getMessage()) for rec in caplog.records] == [(
        "WARNING", f"upgrade refused group=g reason=custom-assignor: {CUSTOM_ASSIGNOR} "
                   "(userData from a custom assignor would be lost)")]
    co.collect()
    for _ in range(6):  # the classic group goes on without c
        for name in co.clients:
            co.move(name)
    assert group_state(d) == "Stable" and all(cl.step == "stable" for cl in co.clients.values())
    d.assert_replay_matches()


def test_an_empty_classic_group_is_replaced_not_converted():
    d, co = run_to(f"{len(STEPS):02}-after-{STEPS[-1].__name__}", echo=True)
    for name in ("a", "b", "n"):
        d.leave("g", co.clients[name].member_id)
    assert group_state(d) == "Empty"
    r = consumer_join(d)
    assert (r["error_code"], r["member_epoch"]) == (E.none, 1)  # a new group: userData no longer matters
    assert [type(e).__name__ for e in d.events if type(e).__name__ in ("GroupConverted", "UpgradeRefused")] == []


@pytest.mark.parametrize("policy, protocol_type, max_size, reason, because", [
    ("disabled", "consumer", 10, "disabled", "online upgrade is disabled"),
    ("downgrade", "consumer", 10, "disabled", "online upgrade is disabled"),
    ("bidirectional", "connect", 10, "protocol-type", "the group does not use the consumer embedded protocol"),
    ("bidirectional", "consumer", 1, "max-size", "the group size exceeds the consumer group maximum size"),
])
def test_kafkas_validation_refuses_before_answering_anything(policy, protocol_type, max_size, reason, because,
                                                               caplog):
    d = Driver(GroupSettings())
    d.settings.consumer.migration_policy, d.settings.consumer.max_size = policy, max_size
    co = Cooperative(d, echo=False)
    for step in STEPS[:7]:  # PreparingRebalance with n's and a's joins parked
        step(co)
    if protocol_type != "consumer":
        d.group().protocol_type = protocol_type
    waiting = parked(d.group())
    r = consumer_join(d)
    message = f"Cannot upgrade classic group g to consumer group because {because}."
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, message)
    assert all(ticket not in d.replies for ticket in waiting)  # still parked, still classic
    assert isinstance(d.shard.groups["g"], ClassicGroup)
    refused = [e for e in d.events if type(e).__name__ == "UpgradeRefused"]
    assert [(e.reason, e.message) for e in refused] == [(reason, message)]
    with caplog.at_level("INFO", logger="groupd.group"):
        observe.emit(refused)
    assert [(rec.levelname, rec.getMessage()) for rec in caplog.records] == [
        ("INFO", f"upgrade refused group=g reason={reason}: {message}")]


def test_a_malformed_assignment_refuses_with_kafkas_message():
    d, co = run_to("05-after-b_syncs", echo=False)
    member = d.group().members[co.clients["b"].member_id]
    member.assignment = member.propagated = b"\x00\x00\x00\x00\x00\x05"  # five topics announced, none there
    r = consumer_join(d)
    assert (r["error_code"], r["error_message"]) == (
        E.group_id_not_found,
        "Cannot upgrade classic group g to consumer group because the embedded consumer protocol is malformed.")
    assert [e.reason for e in d.events if type(e).__name__ == "UpgradeRefused"] == ["malformed"]
    assert isinstance(d.shard.groups["g"], ClassicGroup)


def test_a_heartbeat_with_an_epoch_for_a_classic_group_is_told_it_is_not_a_consumer_group():
    d, _ = run_to("05-after-b_syncs", echo=False)
    r = d.consumer_heartbeat(hb("c", 3), TOPICS)
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, "Group g is not a consumer group.")
