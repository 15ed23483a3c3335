"""Real clients against Apache Kafka and against groupd, what they observe compared: consumers in a group
on `dt3` (3 partitions) — confluent-kafka (librdkafka) in process, classic (cooperative-sticky) and
KIP-848; the Java client (classic and KIP-848), KafkaJS and @platformatic/kafka (KIP-848) through the
JSON-lines client tools of tests/clients/.

One consumer joins and gets every partition; a second joins and the two split them; the first commits
offsets for what it holds; the second leaves and the first gets everything back. What is compared is
what an application sees: the partition counts at each stage, that the split is disjoint and complete,
the offsets committed() reads back, and any error the clients reported. (Which partition moves is the
assignor's choice from random member ids, so the counts are compared, not the partitions.)
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from groupd.protocol.apis import ApiKey
from tests.support.harness import ClientProcess, stack_available, wait_until
from tests.support.process import WireClient

from .corpus import GROUP_RESOURCE
from .diff import on_both

pytestmark = pytest.mark.differential

PARTITIONS = {0, 1, 2}


class Member:
    def __init__(self, bootstrap: str, group: str, protocol: str, name: str, errors: list[str]) -> None:
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "group.protocol": protocol,
                "error_cb": lambda e: errors.append(f"{name}: {e.name()}")}
        if protocol == "classic":
            conf.update({"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 10_000,
                         "heartbeat.interval.ms": 500})
        self.consumer = Consumer(conf)
        self.owned: set[int] = set()
        self.consumer.subscribe(["dt3"], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)

    # the callbacks only watch: confluent-kafka (in)crementally (un)assigns itself when they return
    def _assign(self, consumer, partitions) -> None:
        self.owned |= {p.partition for p in partitions}

    def _revoke(self, consumer, partitions) -> None:
        self.owned -= {p.partition for p in partitions}


def poll_until(members: list[Member], condition, timeout: float = 90.0) -> bool:
    """Poll every member (0.1 s each) until `condition()` holds; False after `timeout` (a bound)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        for m in members:
            m.consumer.poll(0.1)
    return True


def fast_heartbeats(bootstrap: str, group: str) -> None:
    """A KIP-848 group reconciles in 500 ms heartbeats rather than the default 5 s (a group config)."""
    with WireClient(bootstrap) as c:
        r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [
                {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "500"}]}],
            "validate_only": False})
        assert r.responses[0].error_code == 0, r


def observe(bootstrap: str, protocol: str) -> dict:
    group = f"clients-{protocol}"
    if protocol == "consumer":
        fast_heartbeats(bootstrap, group)
    errors: list[str] = []
    seen: dict = {}
    a = Member(bootstrap, group, protocol, "a", errors)
    try:
        seen["a alone"] = poll_until([a], lambda: a.owned == PARTITIONS) and len(a.owned)
        b = Member(bootstrap, group, protocol, "b", errors)
        try:
            split = poll_until([a, b], lambda: a.owned and b.owned and not a.owned & b.owned
                               and a.owned | b.owned == PARTITIONS)
            seen["split"] = split and sorted([len(a.owned), len(b.owned)])
            offsets = [TopicPartition("dt3", p, 10 + p) for p in sorted(a.owned)]
            a.consumer.commit(offsets=offsets, asynchronous=False)
            seen["committed by a"] = len(offsets)
        finally:
            b.consumer.close()
        seen["a after b left"] = poll_until([a], lambda: a.owned == PARTITIONS) and len(a.owned)
        committed = a.consumer.committed([TopicPartition("dt3", p) for p in sorted(PARTITIONS)], timeout=30)
        seen["committed"] = sorted((t.partition, t.offset) for t in committed if t.offset >= 0)
        seen["committed offsets match"] = all(o == 10 + p for p, o in seen["committed"])
    finally:
        a.consumer.close()
    seen["errors"] = errors
    return seen


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_confluent_kafka_consumers_observe_the_same(protocol, servers):
    on_kafka, on_groupd = on_both(lambda server: observe(server.bootstrap, protocol), *servers)
    assert on_kafka["split"] == [1, 2] and on_kafka["a after b left"] == 3, on_kafka  # the scenario works
    # the committed partitions are the ones a held, which the assignor picks: compare how many
    on_kafka["committed"], on_groupd["committed"] = len(on_kafka["committed"]), len(on_groupd["committed"])
    assert on_groupd == on_kafka, (on_kafka, on_groupd)


# the client tools' options per (stack, protocol): a consumer of dt3 that runs until told to leave
TOOL_OPTS = {
    ("java", "classic"): {"assignor": "cooperative-sticky", "session.timeout.ms": 10_000,
                          "heartbeat.interval.ms": 500},
    ("java", "consumer"): {"group.protocol": "consumer"},
    ("kafkajs", "classic"): {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 500},
    ("platformatic", "consumer"): {"group.protocol": "consumer"},
}


def split_of(a: ClientProcess, b: ClientProcess):
    x, y = a.assignment(), b.assignment()
    if x and y and not set(x) & set(y) and len(set(x) | set(y)) == 3:
        return sorted([len(x), len(y)])
    return None


def observe_tool(bootstrap: str, stack: str, protocol: str) -> dict:
    group = f"tool-{stack}-{protocol}"
    if protocol == "consumer":
        fast_heartbeats(bootstrap, group)
    opts = {"topic": "dt3", "group": group, "seconds": 0, **TOOL_OPTS[(stack, protocol)]}
    seen: dict = {}
    a = ClientProcess(stack, "subscribe", bootstrap, opts)
    b = None
    try:
        seen["a alone"] = wait(lambda: len(a.assignment() or ()) == 3 and 3)
        b = ClientProcess(stack, "subscribe", bootstrap, opts)
        seen["split"] = wait(lambda: split_of(a, b))
        seen["b exit"] = b.close()
        seen["a after b left"] = wait(lambda: len(a.assignment() or ()) == 3 and 3)
    finally:
        seen["a exit"] = a.close()
        if b is not None:
            b.close()
    seen["errors"] = sorted({e.get("type", "?") for c in (a, b) if c is not None for e in c.errors()})
    return seen


def wait(check, timeout: float = 90.0):
    """The first truthy value of `check()` (harness.wait_until), or None after `timeout` (a bound): a
    stage that never comes is recorded, and the comparison with Kafka's run says what differs."""
    try:
        return wait_until(check, timeout)
    except AssertionError:
        return None


@pytest.mark.parametrize("stack,protocol", list(TOOL_OPTS))
def test_client_tools_observe_the_same(stack, protocol, servers):
    why = stack_available(stack)
    if why:
        pytest.fail(why)  # never a skip: CI installs every stack
    on_kafka, on_groupd = on_both(lambda server: observe_tool(server.bootstrap, stack, protocol), *servers)
    assert on_kafka["split"] and on_kafka["a after b left"] == 3, on_kafka  # the scenario works on Kafka
    assert on_groupd == on_kafka
