"""The steady ConsumerGroupHeartbeat's short cut (ConsumerMachine.steady_heartbeat, which the server
tries before the general path) against the general path through the runner: random groups go through
joins, acknowledgements, leaves, session expiries, topic changes and session-timeout changes, and at
every heartbeat that changes nothing on the client's side the short cut runs on a copy of the shard.
Where it answers, its reply and the state it leaves must equal what the general path gave and left,
and the general path must have written no record, armed no timer and reported no event; where it
declines, the copy must be untouched."""

import copy
import random
import uuid

import pytest

from groupd.coordinator.core.consumer.group import ConsumerGroup
from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, TopicsImage
from groupd.coordinator.core.group_config import CONSUMER_SESSION_TIMEOUT_MS
from groupd.coordinator.core.partition import GroupSettings
from groupd.protocol import ErrorCode
from groupd.storage.catalog import Topic

from .driver import Driver

E = ErrorCode
FOO, BAR = uuid.UUID(int=1), uuid.UUID(int=2)
GROUPS = ("g", "h")


def image(version: int, foo: int, bar: int | None) -> TopicsImage:
    topics = [Topic("foo", foo, FOO)] + ([Topic("bar", bar, BAR)] if bar is not None else [])
    return TopicsImage.of(version, topics)


def state(shard) -> tuple:
    """Everything a consumer heartbeat may change in the shard (durable and in memory)."""
    c = shard.consumer
    groups = {}
    for gid, g in shard.groups.items():
        if isinstance(g, ConsumerGroup):
            groups[gid] = (g.metadata, g.target_epoch, g.subscription_metadata, g.target_assignment, g.regexes,
                           dict(g.static_members), dict(g.partition_epochs), g.metadata_version, g.regex_version,
                           {m.member_id: (m.metadata, m.current, m.assignment) for m in g.members.values()})
    return (groups, dict(c.session), dict(c.rebalance), dict(c.classic_deadlines), c.topics, set(c.resolving),
            {gid: dict(v) for gid, v in c.settings.group_configs.items()})


class Client:
    """What a consumer-protocol client knows of its membership, as the Java client keeps it."""

    def __init__(self, rng: random.Random, group_id: str, name: str) -> None:
        self.group_id, self.member_id = group_id, f"{group_id}-{name}"
        self.instance_id = f"i-{name}" if rng.random() < 0.3 else None
        self.rack_id = rng.choice([None, "r1", "r2"])
        self.assignor = rng.choice([None, "uniform", "range"])
        self.rebalance_timeout_ms = rng.choice([30_000, 300_000])
        self.topics = tuple(rng.choice([("foo",), ("foo", "bar"), ("bar",)]))
        self.regex = "^ba.*" if rng.random() < 0.1 else None
        self.epoch: int | None = None  # None: not a member
        self.owned: list | None = None  # what it owns, to acknowledge on its next heartbeat

    def join(self) -> ConsumerHeartbeatRequest:
        return ConsumerHeartbeatRequest(self.group_id, self.member_id, 0, self.instance_id, self.rack_id,
                                        self.rebalance_timeout_ms, None if self.regex else self.topics, self.regex,
                                        self.assignor, [])

    def acknowledge(self) -> ConsumerHeartbeatRequest:
        return ConsumerHeartbeatRequest(self.group_id, self.member_id, self.epoch, self.instance_id, None, -1,
                                        None, None, None, self.owned)

    def steady(self, rng: random.Random) -> ConsumerHeartbeatRequest:
        """Every optional field null or resent as it is, now and then one that differs."""
        def maybe(value):
            return value if rng.random() < 0.5 else None
        req = ConsumerHeartbeatRequest(self.group_id, self.member_id, self.epoch, maybe(self.instance_id),
                                       maybe(self.rack_id), rng.choice([-1, self.rebalance_timeout_ms]), None, None,
                                       maybe(self.assignor), None)
        odd = rng.random()
        if odd < 0.03:
            req.rack_id = "r9"
        elif odd < 0.06:
            req.client_id = "another"
        elif odd < 0.09:
            req.member_epoch = self.epoch + 1
        elif odd < 0.12:
            req.rebalance_timeout_ms = 1234
        elif odd < 0.14:
            req.server_assignor = "nosuch"
        elif odd < 0.16:
            req.instance_id = "i-other"
        return req

    def answered(self, reply: dict, leaving: bool = False) -> None:
        if leaving or reply["error_code"] != E.none:
            self.epoch, self.owned = None, None
            return
        self.epoch = reply["member_epoch"]
        a = reply["assignment"]
        self.owned = None if a is None else [(tp["topic_id"], list(tp["partitions"])) for tp in a["topic_partitions"]]


def check_steady(d: Driver, req: ConsumerHeartbeatRequest, topics: TopicsImage) -> tuple[bool, dict]:
    """The short cut on a copy, the general path on the shard: whether the short cut answered, and
    the general path's reply."""
    timers, written, events, in_flight = d.timers, len(d.written), len(d.events), d.writes_in_flight
    twin = copy.deepcopy(d.shard)
    before = copy.deepcopy(state(twin))  # a copy: the state holds the shard's own (mutable) objects
    fast = twin.consumer_steady_heartbeat(copy.deepcopy(req), topics, d.clock.read())
    general = d.consumer_heartbeat(req, topics)
    if fast is None:
        assert state(twin) == before, "a declined short cut changed the shard"
        return False, general
    assert fast == general
    assert state(twin) == state(d.shard)
    assert (d.timers, len(d.written), len(d.events), d.writes_in_flight) == (timers, written, events, in_flight)
    return True, general


@pytest.mark.parametrize("seed", range(6))
def test_the_short_cut_answers_and_changes_what_the_general_path_does(seed):
    rng = random.Random(seed)
    d = Driver(GroupSettings())
    version, foo, bar = 1, 4, None
    topics = image(version, foo, bar)
    clients = [Client(rng, gid, f"m{i}") for gid in GROUPS for i in range(6)]
    answered = declined = 0
    for _ in range(1500):
        c = rng.choice(clients)
        roll = rng.random()
        if c.epoch is None:
            if roll < 0.5:
                c.answered(d.consumer_heartbeat(c.join(), topics))
        elif c.owned is not None:  # acknowledge what it was given first, as a client does
            c.answered(d.consumer_heartbeat(c.acknowledge(), topics))
        elif roll < 0.03:
            leave = ConsumerHeartbeatRequest(c.group_id, c.member_id, -2 if c.instance_id else -1, c.instance_id)
            d.consumer_heartbeat(leave, topics)
            c.answered({}, leaving=True)
        elif roll < 0.8:
            req = c.steady(rng)
            hit, reply = check_steady(d, req, topics)
            answered += hit
            declined += not hit
            c.answered(reply)
        roll = rng.random()
        if roll < 0.05:
            d.advance(rng.choice([100, 2_000, 20_000, 50_000]))  # the longest lets idle sessions expire
        elif roll < 0.06:
            version += 1
            foo, bar = (foo + 1, bar) if rng.random() < 0.5 else (foo, 3 if bar is None else bar + 1)
            topics = image(version, foo, bar)
        elif roll < 0.07:
            overrides = d.shard.consumer.settings.group_configs
            overrides[rng.choice(GROUPS)] = {CONSUMER_SESSION_TIMEOUT_MS: rng.choice([10_000, 45_000, 60_000])}
        if d.effects and rng.random() < 0.5:  # regex resolutions land
            d.run_effects()
    assert answered > 50 and declined > 50, (answered, declined)  # both sides were exercised


def test_a_steady_heartbeat_writes_nothing_and_only_moves_the_session_deadline():
    d = Driver(GroupSettings())
    topics = image(1, 4, None)
    r = d.consumer_heartbeat(ConsumerHeartbeatRequest("g", "a", 0, None, None, 300_000, ("foo",), None, None, []),
                             topics)
    owned = [(tp["topic_id"], list(tp["partitions"])) for tp in r["assignment"]["topic_partitions"]]
    d.consumer_heartbeat(ConsumerHeartbeatRequest("g", "a", 1, topic_partitions=owned), topics)
    d.advance(1_000)
    steady = ConsumerHeartbeatRequest("g", "a", 1)
    reply = d.shard.consumer_steady_heartbeat(steady, topics, d.clock.read())
    assert reply == {"error_code": E.none, "error_message": None, "member_id": "a", "member_epoch": 1,
                     "heartbeat_interval_ms": 5000, "assignment": None}
    assert d.shard.consumer.session[("g", "a")] == d.now + 45_000
