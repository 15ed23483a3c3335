"""Crash safety of the disk records plane with the real server process and a real producer: a
produce storm with acks=all (librdkafka) runs while groupd is killed with SIGKILL, groupd restarts
on the same data dir, and every record whose delivery was acknowledged is read back at the offset
it was acknowledged with and with its value. Small segments make the kills land around rolls too;
the cycles alternate fsync-per-batch and interval flushing (a process crash loses neither)."""

from __future__ import annotations

import threading
import uuid

import pytest

from tests.support.harness import wait_until
from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients

PARTITIONS = 3


def storm(bootstrap: str, topic: str, acked: dict, stop: threading.Event, cycle: int,
          partitions: int = PARTITIONS) -> None:
    """Produce with acks=all until `stop` (idempotent in even cycles); `acked[(partition, offset)] =
    value` per acknowledged record."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000,
                  "enable.idempotence": cycle % 2 == 0})

    def delivered(err, m) -> None:
        if err is None:
            acked[(m.partition(), m.offset())] = m.value()

    i = 0
    while not stop.is_set():
        try:
            p.produce(topic, value=f"c{cycle}-{i}-{'x' * (i % 300)}".encode(), partition=i % partitions,
                      on_delivery=delivered)
            i += 1
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.purge()  # what was not acknowledged by now does not count
    p.flush(1)


def read_all(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict:
    """(partition, offset) → value of every record, each partition read to its end."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    def end(p: int) -> tuple[int] | None:
        try:  # a leader that just moved answers NOT_LEADER_OR_FOLLOWER until the metadata is refreshed
            return (c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1],)
        except Exception:  # noqa: BLE001 - KafkaException: retried
            return None

    ends = {p: wait_until(lambda p=p: end(p), 60, f"the high watermark of {topic}-{p}")[0] for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict = {}
    left = {p for p, end in ends.items() if end > 0}
    positions = dict.fromkeys(range(partitions), 0)

    def more() -> bool:
        for m in c.consume(10000, 0.5):
            if not m.error():
                got[(m.partition(), m.offset())] = m.value()
                positions[m.partition()] = m.offset() + 1
                if positions[m.partition()] >= ends[m.partition()]:
                    left.discard(m.partition())
        return not left

    try:
        wait_until(more, 120, "every partition read to its end")
    finally:
        c.close()
    return got


def test_every_acknowledged_record_survives_kill_9(tmp_path):
    topic = "storm"
    acked: dict = {}
    for cycle in range(4):
        flush = "log.flush.interval.ms=0" if cycle % 2 == 0 else "log.flush.interval.ms=50"
        s = GroupdProcess(str(tmp_path), f"topics={topic}:{PARTITIONS}", "log.segment.bytes=1048576", flush)
        s.start()
        stop = threading.Event()
        before = len(acked)
        t = threading.Thread(target=storm, args=(s.bootstrap, topic, acked, stop, cycle), daemon=True)
        t.start()
        try:
            wait_until(lambda: len(acked) >= before + 2000 + cycle * 700, 120, "acknowledged records")
        finally:
            s.kill()
            stop.set()
            t.join(60)
    s = GroupdProcess(str(tmp_path), f"topics={topic}:{PARTITIONS}", "log.segment.bytes=1048576").start()
    try:
        stored = read_all(s.bootstrap, topic)
        lost = {k: v for k, v in acked.items() if stored.get(k) != v}
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
        assert "corrupt" not in s.log()
    finally:
        assert s.stop() == 0, s.log()
