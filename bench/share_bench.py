"""Share groups (KIP-932): records/s delivered and acknowledged to 1, 10 and 100 share consumers
(confluent-kafka 2.16's ShareConsumer, librdkafka) on topics of 1 and 10 partitions, each row side by
side with a consumer group (KIP-848, the same client library) of as many members reading the same
topic in the same run; then the redelivery latency of records whose consumer dies.

    python bench/share_bench.py                                  # the default run (~2 min)
    python bench/share_bench.py --records 5000 --consumers 1,10  # quicker

One server (`groupd serve`, disk plane, default settings but a 1 s minimum lock duration) for the
whole run; topics `p1` (1 partition) and `p10` (10), each filled with `--records` 100-byte records
before any group reads. Each row is a fresh group (share.auto.offset.reset=earliest for the share
groups, auto.offset.reset=earliest for the consumer groups) of N consumers, run as threads in up to
`--procs` processes. A share consumer acknowledges every record ACCEPT (explicit mode) and commits
the acknowledgements synchronously after each poll; a record counts once that commit succeeded. A
consumer-group member counts a record when polled (offsets auto-committed, as applications do).
records/s = records over the time from the first counted record to the last (the join and first
assignment are left out and shown apart as "first s": from the consumers' start to the first
record) and "total s" (from the start to the last record: what an application waits). librdkafka's
consumer prefetches whole partitions ahead of the application, so a consumer group's first→last
rate is mostly its client's queue; compare "total s". Redeliveries are counted too, so a share row
above `--records` would show one.

Redelivery: a share group (share.record.lock.duration.ms=1000) of two consumer processes on a
one-partition topic; one record is produced; the consumer that gets it (delivery count 1) reports
the time and then either stops itself (SIGSTOP: a hung consumer, its connection open, so the record
comes back when its lock expires) or exits without closing (its connection closes: groupd, as Kafka,
releases what the session held at once); the other reports when it gets the record (delivery count
2). `--rounds` rounds of each, fresh processes and group every round; the table shows the median and
the worst. Bounded: every wait has a deadline; every process started is ended.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.support.process import GroupdProcess  # noqa: E402

TOPICS = {"p1": 1, "p10": 10}
LOCK_MS = 1000


def _admin_set(bootstrap: str, group: str, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    client = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()])
    client.incremental_alter_configs([resource])[resource].result(30)


def _fill(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144})
    value = b"x" * 100
    partitions = TOPICS[topic]
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(60) != 0:
        raise SystemExit(f"records for {topic} not all acknowledged")


# -- one consumer thread, of either kind --------------------------------------------------------

def _share_loop(bootstrap: str, group: str, topic: str, count, first, stop) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "max.poll.records": 500})
    c.subscribe([topic])
    try:
        while not stop.is_set():
            got = [m for m in c.poll(0.2) if m.error() is None]
            for m in got:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if got and all(v is None for v in c.commit_sync(30).values()):
                _count(count, first, len(got))
    finally:
        c.close()


def _group_loop(bootstrap: str, group: str, topic: str, count, first, stop) -> None:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "queued.max.messages.kbytes": 4096})
    c.subscribe([topic])
    try:
        while not stop.is_set():
            got = [m for m in c.consume(500, 0.2) if m.error() is None]
            if got:
                _count(count, first, len(got))
    finally:
        c.close()


def _count(count, first, n: int) -> None:
    with count.get_lock():
        if count.value == 0:
            first.value = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process
        count.value += n


def _process(loop, bootstrap: str, group: str, topic: str, threads: int, count, first, stop) -> None:
    """One process of `threads` consumers (librdkafka releases the GIL while it waits)."""
    event = threading.Event()
    workers = [threading.Thread(target=loop, args=(bootstrap, group, topic, count, first, event)) for _ in range(threads)]
    for w in workers:
        w.start()
    stop.wait()
    event.set()
    for w in workers:
        w.join(60)


def run_group(kind: str, bootstrap: str, topic: str, consumers: int, records: int, procs: int, row: int,
              deadline_s: float) -> tuple[float | None, float | None, float | None, int]:
    """(records/s first→last, s from the start to the first record, s from the start to the last,
    records counted) for one group."""
    ctx = multiprocessing.get_context("spawn")
    count, first, stop = ctx.Value("q", 0), ctx.Value("d", 0.0), ctx.Event()
    group = f"{kind}-{topic}-{consumers}-{row}"
    loop = _share_loop if kind == "share" else _group_loop
    if kind == "share":
        _admin_set(bootstrap, group, **{"share.auto.offset.reset": "earliest"})
    n_procs = min(procs, consumers)
    shares = [consumers // n_procs + (1 if i < consumers % n_procs else 0) for i in range(n_procs)]
    started = time.monotonic()
    processes = [ctx.Process(target=_process, args=(loop, bootstrap, group, topic, k, count, first, stop))
                 for k in shares]
    for p in processes:
        p.start()
    last = None
    try:
        while time.monotonic() - started < deadline_s:
            if count.value >= records:
                last = time.monotonic()
                break
            time.sleep(0.01)  # the harness's own polling of a shared counter, not a wait on a client
    finally:
        stop.set()
        for p in processes:
            p.join(60)
            if p.is_alive():
                p.kill()
                p.join()
    if last is None or first.value == 0.0:
        return None, (first.value - started if first.value else None), None, count.value
    span = max(last - first.value, 1e-6)
    return records / span, first.value - started, last - started, count.value


# -- redelivery latency -------------------------------------------------------------------------

def _redelivery_consumer(bootstrap: str, group: str, topic: str, how: str, reports) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    reports.put(("ready", os.getpid(), time.monotonic()))
    while True:
        for m in c.poll(0.1):
            if m.error() is not None:
                continue
            reports.put(("got", m.delivery_count(), time.monotonic()))
            if m.delivery_count() == 1:
                reports.close()
                reports.join_thread()  # the report is sent before this process stops or ends
                if how == "hang":
                    os.kill(os.getpid(), signal.SIGSTOP)  # connection stays open: the lock must expire
                os._exit(0)  # connection closes without a ShareFetch epoch -1: released at once
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)


def redelivery(bootstrap: str, how: str, rounds: int) -> list[float]:
    from confluent_kafka import Producer
    ctx = multiprocessing.get_context("spawn")
    out = []
    for r in range(rounds):
        topic, group = "lat", f"lat-{how}-{r}"
        _admin_set(bootstrap, group, **{"share.auto.offset.reset": "latest", "share.record.lock.duration.ms":
                                        str(LOCK_MS)})
        reports = ctx.Queue()
        procs = [ctx.Process(target=_redelivery_consumer, args=(bootstrap, group, topic, how, reports))
                 for _ in range(2)]
        for p in procs:
            p.start()
        try:
            ready = [reports.get(timeout=60) for _ in procs]
            assert all(r[0] == "ready" for r in ready), ready
            # both members joined and fetching: the share-partition starts at the log end on the first
            # ShareFetch; produce until one of them gets a record (the first may land before it started)
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
            taken = None
            deadline = time.monotonic() + 60
            while taken is None and time.monotonic() < deadline:
                producer.produce(topic, b"r", partition=0)
                producer.flush(10)
                try:
                    taken = reports.get(timeout=1.0)
                except queue.Empty:  # nothing delivered yet
                    taken = None
            if taken is None or taken[:2] != ("got", 1):
                raise SystemExit(f"redelivery round {r}: no first delivery ({taken})")
            again = reports.get(timeout=60)
            while again[:2] == ("got", 1):  # another record produced while waiting: skip its first delivery
                again = reports.get(timeout=60)
            if again[:2] != ("got", 2):
                raise SystemExit(f"redelivery round {r}: {again}")
            out.append((again[2] - taken[2]) * 1000)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()  # SIGKILL ends a stopped process too
                p.join(30)
    return out


# -- the run ------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000, help="records per topic (default 20000)")
    parser.add_argument("--consumers", default="1,10,100", help="consumers per group (default 1,10,100)")
    parser.add_argument("--topics", default="p1,p10", help="topics: p1 (1 partition), p10 (10 partitions)")
    parser.add_argument("--procs", type=int, default=4, help="most processes a group's consumers run in")
    parser.add_argument("--rounds", type=int, default=3, help="redelivery rounds per case (default 3)")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds a group may take (default 60)")
    args = parser.parse_args()
    counts = [int(n) for n in args.consumers.split(",")]
    topics = args.topics.split(",")
    data_dir = tempfile.mkdtemp(prefix="share-bench-")
    server = GroupdProcess(data_dir, "topics=p1:1,p10:10,lat:1", "group.share.min.record.lock.duration.ms=1000",
                           "group.initial.rebalance.delay.ms=0").start()
    try:
        for t in topics:
            _fill(server.bootstrap, t, args.records)
        print(f"share groups vs consumer groups, {args.records} records of 100 B per topic, "
              f"confluent-kafka ShareConsumer/Consumer, up to {args.procs} client processes")
        print(f"{'topic':>5} {'consumers':>9} | {'share rec/s':>11} {'first s':>7} {'total s':>7} {'counted':>7} | "
              f"{'group rec/s':>11} {'first s':>7} {'total s':>7} {'counted':>7}")
        for t in topics:
            for i, n in enumerate(counts):
                cells = []
                for kind in ("share", "group"):
                    rate, first, total, counted = run_group(kind, server.bootstrap, t, n, args.records, args.procs,
                                                            i, args.deadline)
                    cells.append(f"{rate:>11.0f}" if rate else f"{'timeout':>11}")
                    cells += [f"{v:>7.2f}" if v is not None else f"{'-':>7}" for v in (first, total)]
                    cells.append(f"{counted:>7}")
                print(f"{t:>5} {n:>9} | {' '.join(cells[:4])} | {' '.join(cells[4:])}", flush=True)
        print(f"\nredelivery of a record whose consumer dies (share.record.lock.duration.ms={LOCK_MS}), "
              f"{args.rounds} rounds each")
        print(f"{'consumer':>28} | {'median ms':>9} {'worst ms':>8}")
        for how, what in (("hang", "hangs (SIGSTOP, lock expiry)"), ("exit", "exits (connection closed)")):
            latencies = redelivery(server.bootstrap, how, args.rounds)
            print(f"{what:>28} | {statistics.median(latencies):>9.0f} {max(latencies):>8.0f}", flush=True)
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
