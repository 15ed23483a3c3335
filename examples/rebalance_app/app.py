"""A small consumer application, as an example of code whose rebalance handling is worth testing:
it counts the words in the messages of a topic, and commits what it has counted when partitions are
revoked, so that the member taking them over neither counts a message twice nor skips one.

    counter = WordCounter("127.0.0.1:9092", "words", group="counter")
    counter.run(stop)          # until the threading.Event `stop` is set
"""

from __future__ import annotations

import collections
import threading

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition


class WordCounter:
    def __init__(self, bootstrap: str, topic: str, group: str, **config) -> None:
        self.topic = topic
        self.group = group
        self.counts: collections.Counter[str] = collections.Counter()
        self.processed: list[tuple[int, int]] = []  # (partition, offset) of every message counted
        self.assignments: list[list[int]] = []  # each assignment received, in order
        self.revocations: list[list[int]] = []
        self.commit_failures: list[str] = []
        self._positions: dict[int, int] = {}  # partition → next offset to commit
        self._lock = threading.Lock()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            **config})

    # -- rebalance handling: the part under test ---------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.assignments.append(sorted(p.partition for p in partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.commit()  # hand over exactly what was counted
        with self._lock:
            self.revocations.append(sorted(p.partition for p in partitions))
            for p in partitions:
                self._positions.pop(p.partition, None)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # the partitions already belong to someone else: committing now would be refused
        with self._lock:
            self.revocations.append(sorted(p.partition for p in partitions))
            for p in partitions:
                self._positions.pop(p.partition, None)

    def commit(self) -> None:
        with self._lock:
            offsets = [TopicPartition(self.topic, p, o) for p, o in self._positions.items()]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            error = e.args[0]
            if error.code() != KafkaError._NO_OFFSET:
                self.commit_failures.append(error.name())

    # -- the loop --------------------------------------------------------------------------------

    def run(self, stop: threading.Event, commit_every: int = 10) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)
        since_commit = 0
        try:
            while not stop.is_set():
                msg = self.consumer.poll(0.1)
                if msg is None and since_commit:  # caught up: commit what was counted
                    self.commit()
                    since_commit = 0
                if msg is None or msg.error():
                    continue
                with self._lock:
                    self.counts.update(msg.value().decode().split())
                    self.processed.append((msg.partition(), msg.offset()))
                    self._positions[msg.partition()] = msg.offset() + 1
                since_commit += 1
                if since_commit >= commit_every:
                    self.commit()
                    since_commit = 0
            self.commit()
        finally:
            self.consumer.close()
