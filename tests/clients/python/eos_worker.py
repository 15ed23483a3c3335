"""An exactly-once consume-transform-produce worker for the crash tests (confluent-kafka):

    python eos_worker.py BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID

reads IN in GROUP (read_committed), writes each value + "!" to OUT partition 0 and sends the consumed
positions with send_offsets_to_transaction, one transaction per poll, forever. Prints "copied N"
after each commit. A transaction that must be aborted, or any other error, ends the process (exit 3;
exit 2 when fenced): the test starts a new one, which resumes from the group's committed offsets and
fences this one's transactional id.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, Producer


def main() -> int:
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 10000})
    copied = 0
    try:
        producer.init_transactions(60)
        consumer.subscribe([source])
        while True:
            batch = [m for m in consumer.consume(3, 0.5) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce(sink, m.value() + b"!", partition=0)
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            copied += len(batch)
            print(f"copied {copied}", flush=True)
    except KafkaException as e:
        error = e.args[0]
        print(f"error {error}", flush=True)
        return 2 if "fenced" in str(error).lower() else 3


if __name__ == "__main__":
    sys.exit(main())
