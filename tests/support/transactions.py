"""Transactions seen through confluent-kafka's clients, for the tests of exactly-once over one server
and over its workers: reading a topic's values read_committed, and a consume-transform-produce loop
(KIP-98, KIP-447)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from .harness import wait_until


def read_values(bootstrap: str, topic: str, partitions: int, enough: Callable[[list[str]], bool], what: str,
                committed: bool = True, rest: bool = False, **config) -> list[str]:
    """The values of `topic`'s partitions 0 .. `partitions` - 1 from their start, read_committed (or
    read_uncommitted), as a new group's consumer, until `enough(values)` holds; `rest`: and then
    whatever else is visible. `config`: the client's security settings."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted", **config})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[str] = []
    try:
        def done():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.append(m.value().decode())
            return enough(seen)
        wait_until(done, 60, f"{what} in {topic}", explain=lambda: f"seen {seen}")
        while rest and (m := c.poll(0.5)) is not None:
            if m.error() is None:
                seen.append(m.value().decode())
    finally:
        c.close()
    return seen


def transform_in_transactions(consumer: Consumer, producer: Producer, out_topic: str, count: int,
                              batch: int) -> list[str]:
    """Until `count` inputs are done: each batch of up to `batch` records the consumer polls goes
    upper-cased to the same partition of `out_topic` in one transaction, with the consumer's positions
    sent to it, committed. The `producer` has its transactions initialized. The inputs' values, in
    the order they were done."""
    done: list[str] = []

    def step():
        records = [m for m in consumer.consume(batch, 1.0) if m.error() is None]
        if records:
            producer.begin_transaction()
            for m in records:
                producer.produce(out_topic, m.value().upper(), partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            done.extend(m.value().decode() for m in records)
        return len(done) >= count
    wait_until(step, 90, "every input transformed")
    return done
