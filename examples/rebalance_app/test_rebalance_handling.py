"""Testing WordCounter's rebalance handling against groupd: each test makes the coordinator misbehave
the way production does (a rebalance, an expired session, a failed heartbeat, a coordinator failover)
and checks that no message is counted twice or skipped.

Run with the groupd package installed: `pytest examples/rebalance_app` (the fixtures come from the
groupd pytest plugin)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from app import WordCounter
from confluent_kafka import Consumer, Producer, TopicPartition

TOPIC = "words"


def wait_for(check, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def produce(bootstrap: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(lines):
        producer.produce(TOPIC, line.encode(), partition=i % 2)
    assert producer.flush(30) == 0


@pytest.fixture
def counter(groupd_server):
    """A running WordCounter in its own group; stopped (and its final commit made) at the end."""
    app = WordCounter(groupd_server.bootstrap_servers, TOPIC, group=f"counter-{uuid.uuid4().hex[:8]}")
    stop = threading.Event()
    thread = threading.Thread(target=app.run, args=(stop,), kwargs={"commit_every": 5}, daemon=True)
    thread.start()
    wait_for(lambda: app.assignments, what="the first assignment")
    yield app
    stop.set()
    thread.join(30)


def committed(server, group: str) -> list[int]:
    """The group's committed offsets, read by a consumer that does not join it."""
    reader = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": group})
    try:
        return [tp.offset for tp in reader.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30)]
    finally:
        reader.close()


def counted_once(app: WordCounter, lines: list[str]) -> None:
    wait_for(lambda: len(app.processed) >= len(lines), what="every message counted")
    assert len(app.processed) == len(set(app.processed)) == len(lines)
    assert app.counts["apple"] == sum(line.split().count("apple") for line in lines)


def test_a_forced_rebalance_revokes_and_reassigns_and_hands_over_the_counts(groupd_server, counter):
    lines = [f"apple pear {i}" for i in range(20)]
    produce(groupd_server.bootstrap_servers, lines)
    wait_for(lambda: len(counter.processed) == 20, what="the first batch counted")
    groupd_server.rebalance(counter.group)
    wait_for(lambda: len(counter.assignments) >= 2, what="the assignment after the forced rebalance")
    assert counter.revocations and counter.commit_failures == []
    more = [f"apple {i}" for i in range(10)]
    produce(groupd_server.bootstrap_servers, more)
    counted_once(counter, lines + more)


def test_an_expired_session_loses_the_partitions_and_rejoins(groupd_server, counter):
    groupd_server.expire(counter.group)
    wait_for(lambda: len(counter.assignments) >= 2, what="the rejoin after the expiry")
    lines = [f"apple plum {i}" for i in range(10)]
    produce(groupd_server.bootstrap_servers, lines)
    counted_once(counter, lines)


def test_a_heartbeat_answered_rebalance_in_progress_makes_the_member_rejoin(groupd_server, counter):
    groupd_server.error("Heartbeat", "REBALANCE_IN_PROGRESS", counter.group, count=1)
    wait_for(lambda: len(counter.assignments) >= 2, what="the rejoin")
    assert groupd_server.faults() == []  # consumed


def test_counting_carries_on_through_a_coordinator_failover(groupd_server, counter):
    """librdkafka answers the failover's NOT_COORDINATOR by finding the coordinator again; a commit
    caught in it can fail (the member then rejoins), so a message may be counted again, never lost."""
    lines = [f"apple fig {i}" for i in range(10)]
    groupd_server.move_coordinator(counter.group, seconds=3)
    produce(groupd_server.bootstrap_servers, lines)
    wait_for(lambda: not groupd_server.faults(), what="the failover's end")
    more = [f"apple kiwi {i}" for i in range(10)]
    produce(groupd_server.bootstrap_servers, more)
    wait_for(lambda: len(set(counter.processed)) == 20, what="every message counted at least once")
    wait_for(lambda: committed(groupd_server, counter.group) == [10, 10], what="the counts committed")
