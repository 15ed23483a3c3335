"""Transactions side by side: groupd (disk plane, fsync per write: the default) and Apache Kafka in the
same run, driven by librdkafka (confluent-kafka), the client most exactly-once Python apps use.

    python bench/txn_bench.py                                  # both targets (~2 min with Kafka's start)
    python bench/txn_bench.py --targets groupd --seconds 3     # quicker

Per target, a fresh server and a one-partition topic:
- **commits/s** of a transactional producer that loops begin → produce N values of 100 bytes → commit,
  for N = 1, 10, 100, for `--seconds` each; with `--offsets` rows also sending the offsets of a
  consumer group (send_offsets_to_transaction: AddOffsetsToTxn + TxnOffsetCommit) in each transaction,
  as a consume-transform-produce loop does;
- **end-to-end latency** of one such loop: a record produced (non-transactionally) to `in`, read by a
  read_committed consumer, written to `out` in a transaction with its offset, committed, and read back
  from `out` by a read_committed consumer: p50 / p99 over `--loops` records;
- **read_committed vs read_uncommitted fetch**: `--fetch-mb` MB written in transactions of 100 values,
  then read back by one consumer per isolation level, MB/s.
Every wait has a deadline; servers bind 127.0.0.1.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.support.process import GroupdProcess, WireClient  # noqa: E402

VALUE = b"x" * 100


def create_topics(bootstrap: str, *names: str) -> None:
    from groupd.protocol.apis import ApiKey

    with WireClient(bootstrap, timeout=60) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for n in names], "timeout": datetime.timedelta(seconds=60), "validate_only": False})
        assert all(t.error_code == 0 for t in r.topics), r.topics


def producer(bootstrap: str, txn_id: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(60)
    return p


def commits_per_second(bootstrap: str, topic: str, records: int, seconds: float, offsets: bool) -> float:
    from confluent_kafka import Consumer, TopicPartition

    p = producer(bootstrap, f"bench-{uuid.uuid4().hex[:8]}")
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-g-{uuid.uuid4().hex[:6]}"}) \
        if offsets else None
    done, position, t0 = 0, 0, time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            p.begin_transaction()
            for _ in range(records):
                p.produce(topic, VALUE, partition=0)
            if group is not None:
                position += records
                p.send_offsets_to_transaction([TopicPartition(topic, 0, position)],
                                              group.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            done += 1
        return done / (time.perf_counter() - t0)
    finally:
        if group is not None:
            group.close()
        p.flush(10)


def loop_latency(bootstrap: str, loops: int) -> tuple[float, float]:
    """p50, p99 ms of one record through a consume-transform-produce loop (see the module note)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    tag = uuid.uuid4().hex[:6]
    create_topics(bootstrap, f"in-{tag}", f"out-{tag}")
    source = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    p = producer(bootstrap, f"loop-{tag}")
    inp = Consumer({"bootstrap.servers": bootstrap, "group.id": f"loop-{tag}", "isolation.level": "read_committed",
                    "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    inp.assign([TopicPartition(f"in-{tag}", 0, 0)])
    out = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sink-{tag}", "isolation.level": "read_committed",
                    "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out.assign([TopicPartition(f"out-{tag}", 0, 0)])
    latencies = []
    try:
        for i in range(loops):
            t0 = time.perf_counter()
            source.produce(f"in-{tag}", VALUE, partition=0)
            source.flush(30)
            m = _one(inp, 30)
            p.begin_transaction()
            p.produce(f"out-{tag}", m.value(), partition=0)
            p.send_offsets_to_transaction([TopicPartition(f"in-{tag}", 0, m.offset() + 1)],
                                          inp.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            _one(out, 30)
            latencies.append(1000 * (time.perf_counter() - t0))
    finally:
        inp.close()
        out.close()
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]


def _one(consumer, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            return m
    raise TimeoutError("no record within the deadline")


def fetch_rates(bootstrap: str, mb: float) -> tuple[float, float]:
    """MB/s read back by a read_committed and a read_uncommitted consumer of `mb` MB of values
    written in transactions of 100 values."""
    from confluent_kafka import Consumer, TopicPartition

    topic = f"fetch-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, topic)
    p = producer(bootstrap, f"fill-{topic}")
    count = int(mb * 1e6 / len(VALUE))
    for start in range(0, count, 100):
        p.begin_transaction()
        for _ in range(min(100, count - start)):
            p.produce(topic, VALUE, partition=0)
        p.commit_transaction(60)
    rates = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                      "isolation.level": isolation, "enable.auto.commit": False, "fetch.max.bytes": 50 << 20})
        c.assign([TopicPartition(topic, 0, 0)])
        got, t0, deadline = 0, time.perf_counter(), time.monotonic() + 300
        try:
            while got < count and time.monotonic() < deadline:
                got += sum(1 for m in c.consume(10000, 0.5) if m.error() is None)
            rates.append(got * len(VALUE) / 1e6 / (time.perf_counter() - t0))
        finally:
            c.close()
    return rates[0], rates[1]


def run_target(name: str, bootstrap: str, args) -> dict:
    topic = f"txn-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, topic)
    row = {"target": name}
    for n in (1, 10, 100):
        row[f"commits_{n}"] = commits_per_second(bootstrap, topic, n, args.seconds, offsets=False)
        if args.offsets:
            row[f"commits_{n}_offsets"] = commits_per_second(bootstrap, topic, n, args.seconds, offsets=True)
    row["loop_p50_ms"], row["loop_p99_ms"] = loop_latency(bootstrap, args.loops)
    row["read_committed_mb_s"], row["read_uncommitted_mb_s"] = fetch_rates(bootstrap, args.fetch_mb)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="groupd,kafka")
    ap.add_argument("--seconds", type=float, default=5.0, help="per commits/s figure")
    ap.add_argument("--offsets", action="store_true", help="also rows with the group's offsets in each transaction")
    ap.add_argument("--loops", type=int, default=200, help="records through the consume-transform-produce loop")
    ap.add_argument("--fetch-mb", type=float, default=20.0)
    args = ap.parse_args()
    rows = []
    for name in args.targets.split(","):
        data = tempfile.mkdtemp(prefix=f"txn-bench-{name}-")
        try:
            if name == "kafka":
                from tests.support.kafka import KafkaBroker

                server = KafkaBroker(data, jvm=[]).start()
                try:
                    rows.append(run_target(name, server.bootstrap, args))
                finally:
                    server.stop()
            else:
                server = GroupdProcess(data, "group.initial.rebalance.delay.ms=0").start()
                try:
                    rows.append(run_target(name, server.bootstrap, args))
                finally:
                    server.stop()
        finally:
            shutil.rmtree(data, ignore_errors=True)
    keys = [k for k in rows[0] if k != "target"]
    print(f"{datetime.date.today()}  {os.cpu_count()} cores  librdkafka transactional producer, 100-byte values")
    print("target   " + "  ".join(f"{k:>22}" for k in keys))
    for r in rows:
        print(f"{r['target']:8} " + "  ".join(f"{r[k]:>22,.1f}" for k in keys))


if __name__ == "__main__":
    main()
