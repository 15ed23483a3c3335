"""A consume-transform-produce loop (KIP-98, KIP-447) with confluent-kafka's clients, for the tests
of exactly-once over one server and over its workers."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer

from .harness import wait_until


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
