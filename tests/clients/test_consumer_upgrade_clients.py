"""Online upgrade (spec §7.4) with real clients: two classic librdkafka members (cooperative-sticky,
session 10 s, heartbeat 0.5 s) share a 6-partition topic, and a confluent-kafka member with
group.protocol=consumer joins at each point of their cooperative rebalance. Each point is held by
stopping a member's process (SIGSTOP) and reached by waiting on the server's log lines, never on a
fixed sleep.

Where each point ends is Kafka's rule, not chance: the group is converted in whatever state it is
(PreparingRebalance, CompletingRebalance or Stable), unless some member's assignment carries userData
(ConsumerGroup.fromClassicGroup, KAFKA-18134). librdkafka's leader copies each member's sticky
userData into its assignment once that member had held an assignment, so after a cooperative
rebalance that moved partitions the upgrade is refused with GROUP_ID_NOT_FOUND — fatal to librdkafka,
as with Kafka — and the server says why."""

from __future__ import annotations

import signal

import pytest

from tests.support.harness import ClientProcess, wait_until
from tests.support.process import GroupdProcess

from .test_consumer_protocol_clients import SETTINGS, SIX, group_name, owns_exactly

pytestmark = pytest.mark.clients

REFUSED = ("Cannot upgrade classic group {g} to consumer group because an unsupported custom assignor is in use. "
           "Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp("upgrade")), *SETTINGS).start()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def long_initial_delay(tmp_path_factory):
    """A server whose first join phase waits 20 s: a member joins while the group is still in it."""
    s = GroupdProcess(str(tmp_path_factory.mktemp("upgrade-delay")), *SETTINGS,
                      "group.initial.rebalance.delay.ms=20000").start()
    yield s
    assert s.stop() == 0, s.log()


def classic(clients, server, group: str) -> ClientProcess:
    return clients("confluent", "subscribe", server.bootstrap, topic="t6", group=group, seconds=0,
                   assignor="cooperative-sticky", **{"session.ms": 10000, "heartbeat.interval.ms": 500})


def modern(clients, server, group: str) -> ClientProcess:
    return clients("confluent", "subscribe", server.bootstrap, topic="t6", group=group, seconds=0,
                   **{"group.protocol": "consumer"})


def lines(server, group: str) -> list[str]:
    """The server's log lines about `group`, from "rebalance started" on."""
    return [line.split(" groupd.group ", 1)[1] for line in server.log().splitlines()
            if f"group={group} " in line and " groupd.group " in line]


def logged(server, group: str, text: str, after: int = 0) -> int:
    """Wait until a line about `group` past the first `after` contains `text`; how many lines up to
    that one (to look past it next)."""
    def seen():
        found = lines(server, group)
        return next((i + 1 for i in range(after, len(found)) if text in found[i]), 0)
    return wait_until(seen, 60, f"{text!r} in the log of {group}")


def stop(member: ClientProcess) -> None:
    member.proc.send_signal(signal.SIGSTOP)


def resume(member: ClientProcess) -> None:
    if member.proc.poll() is None:
        member.proc.send_signal(signal.SIGCONT)


def failures(member: ClientProcess) -> list[dict]:
    """Its errors but the REBALANCE_IN_PROGRESS answer to a parked JoinGroup or SyncGroup, which
    librdkafka reports through error_cb and answers by re-joining (Kafka answers them so too)."""
    return [e for e in member.errors() if "code=REBALANCE_IN_PROGRESS" not in e["message"]]


def upgraded(server, group: str, members: list[ClientProcess], newcomer: ClientProcess) -> None:
    """The group became a consumer group with all three, each partition owned once, nobody failed."""
    logged(server, group, "group converted")
    wait_until(lambda: owns_exactly(members + [newcomer], SIX) or newcomer.errors(), 90,
               "each partition owned once by the three")
    assert not newcomer.errors() and all(not failures(m) for m in members), [m.errors() for m in members + [newcomer]]
    assert not any("upgrade refused" in line for line in lines(server, group))


def refused(server, group: str, members: list[ClientProcess], newcomer: ClientProcess) -> None:
    """Kafka's refusal: the newcomer's heartbeat gets GROUP_ID_NOT_FOUND (fatal to librdkafka), the
    server logs why, and the classic members go on sharing the partitions."""
    error = newcomer.wait_for(lambda e: e["event"] == "error", 60)
    assert "The group id does not exist" in error["message"], error
    logged(server, group, f"upgrade refused group={group} reason=custom-assignor: {REFUSED.format(g=group)}")
    wait_until(lambda: owns_exactly(members, SIX), 90, "the classic members share everything")
    assert all(not failures(m) for m in members), [m.errors() for m in members]
    assert not any("group converted" in line for line in lines(server, group))


def test_during_the_first_join_phase_the_group_is_upgraded(long_initial_delay, clients, request):
    """PreparingRebalance at generation 0: both classic joins parked, no protocol chosen yet."""
    server, group = long_initial_delay, group_name(request)
    a, b = classic(clients, server, group), classic(clients, server, group)
    logged(server, group, "rebalance started")
    c = modern(clients, server, group)
    upgraded(server, group, [a, b], c)
    assert not any("join phase completed" in line for line in lines(server, group))  # it came first
    assert "Traceback" not in server.log()


def test_when_both_joined_in_one_generation_the_stable_group_is_upgraded(server, clients, request):
    """Stable at generation 1: nobody held an assignment before, so no assignment carries userData."""
    group = group_name(request)
    a, b = classic(clients, server, group), classic(clients, server, group)
    wait_until(lambda: owns_exactly([a, b], SIX), 60, "3+3")
    assert sum("join phase completed" in line for line in lines(server, group)) == 1
    upgraded(server, group, [a, b], modern(clients, server, group))


def test_while_the_first_cooperative_round_waits_for_the_owner_the_group_is_upgraded(server, clients, request):
    """a owns all six; b joins while a is stopped: PreparingRebalance at generation 1, b's join parked,
    a's assignment (its first: no userData) the one to convert."""
    group = group_name(request)
    a = classic(clients, server, group)
    wait_until(lambda: set(a.assignment() or ()) == SIX, 60, "a owns everything")
    stop(a)
    try:
        b = classic(clients, server, group)
        seen = logged(server, group, "rebalance started group=%s generation=1" % group)
        c = modern(clients, server, group)
        logged(server, group, "group converted", seen)
    finally:
        resume(a)
    upgraded(server, group, [a, b], c)


def test_in_the_cooperative_second_round_with_a_member_not_yet_synced_kafka_refuses(server, clients, request):
    """a owns all six; b joins (a and b stopped in turn to hold each step): the first round gives a
    three (its assignment now carries a's sticky userData) and b nothing, b has not synced, a re-joins
    for the second round: PreparingRebalance at generation 2. Kafka refuses: a's assignment has
    userData."""
    group = group_name(request)
    a = classic(clients, server, group)
    wait_until(lambda: set(a.assignment() or ()) == SIX, 60, "a owns everything")
    stop(a)
    b = None
    try:
        b = classic(clients, server, group)
        seen = logged(server, group, "rebalance started group=%s generation=1" % group)
        stop(b)  # its join is parked: it gets its answer, but does not sync, while stopped
        resume(a)
        seen = logged(server, group, "rebalance completed group=%s generation=2" % group, seen)
        logged(server, group, "rebalance started group=%s generation=2" % group, seen)  # a's second round
        c = modern(clients, server, group)
        error = c.wait_for(lambda e: e["event"] == "error", 60)
        assert "The group id does not exist" in error["message"], error
    finally:
        resume(a)
        if b is not None:
            resume(b)
    refused(server, group, [a, b], c)


def test_after_a_cooperative_rebalance_kafka_refuses_and_says_why(server, clients, request):
    """The issue's 2 runs in 5: b joined after a held the partitions, so the group reached 3+3 through
    a cooperative rebalance whose assignments carry the sticky userData: refused, as by Kafka."""
    group = group_name(request)
    a = classic(clients, server, group)
    wait_until(lambda: set(a.assignment() or ()) == SIX, 60, "a owns everything")
    b = classic(clients, server, group)
    wait_until(lambda: owns_exactly([a, b], SIX), 60, "3+3")
    refused(server, group, [a, b], modern(clients, server, group))
    assert "Traceback" not in server.log()
