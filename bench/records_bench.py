"""Records plane throughput: produce and fetch MB/s and records/s through real clients (librdkafka via
confluent-kafka) against `python -m groupd.coordinator serve`, per plane (disk, memory), acks (1,
all) and record size, with the server's CPU per MB.

    python bench/records_bench.py                                   # the default matrix, one table
    python bench/records_bench.py --planes disk --acks all --sizes 100 --mb 20 --producers 4

Each row: a fresh server on a fresh data dir (disk plane: the tmp dir's file system; fsync per batch,
the default `log.flush.interval.ms=0`), `--producers` producer processes each sending `--mb` / N MB of
`size`-byte values to one 4-partition topic (linger.ms=5, 1 MB batches, no compression); the produce
rate is the bytes acknowledged over the time from the first produce to the last acknowledgement. Then
one connection reads everything back with Fetch requests (no client library: the server's fetch
path; the disk plane serves it from the page cache, the segments were just written); fetch MB/s
counts the batches' bytes. Server CPU is utime+stime from /proc over each
phase, in CPU-seconds per MB. Bounded: every wait has a deadline.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.support.process import GroupdProcess  # noqa: E402

TOPIC, PARTITIONS = "bench", 4


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _produce(bootstrap: str, acks: str, size: int, count: int, index: int, out) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 18, "compression.type": "none"})
    value = os.urandom(size)
    acked = [0]

    def done(err, _m) -> None:
        if err is None:
            acked[0] += 1

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(TOPIC, value=value, partition=(i + index) % PARTITIONS, on_delivery=done)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(300)
    out.put((acked[0], started, time.perf_counter()))


def produce(bootstrap: str, acks: str, size: int, total_mb: float, producers: int) -> tuple[int, float]:
    """(records acknowledged, seconds)."""
    per = max(int(total_mb * (1 << 20) / size / producers), 1)
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_produce, args=(bootstrap, acks, size, per, i, out))
             for i in range(producers)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(60)
    return sum(r[0] for r in results), max(r[2] for r in results) - min(r[1] for r in results)


def fetch(bootstrap: str, expected: int) -> tuple[int, int, float]:
    """(records, bytes, seconds) reading every partition from offset 0 to its end with Fetch v12
    requests (10 MB per partition, 50 MB per response) on one connection, one request at a time:
    the server's fetch path, without a client library's per-message cost."""
    from groupd.protocol.apis import ApiKey
    from groupd.storage.records_plane.batches import iter_batches
    from tests.storage.test_records_plane import fetch_request, list_offset
    from tests.support.process import WireClient

    with WireClient(bootstrap, timeout=60) as c:
        ends = {p: list_offset(c, TOPIC, p, -1).offset for p in range(PARTITIONS)}
        offsets = dict.fromkeys(range(PARTITIONS), 0)
        records = size = 0
        started = time.perf_counter()
        while any(offsets[p] < ends[p] for p in offsets):
            r = c.request(ApiKey.FETCH, 12, fetch_request([(TOPIC, p, o) for p, o in offsets.items() if o < ends[p]],
                                                          max_bytes=50 << 20, partition_max=10 << 20))
            for part in r.responses[0].partitions:
                data = part.records or b""
                size += len(data)
                last = None
                for batch in iter_batches(data):  # headers only: where the next fetch starts
                    last = batch
                    records += batch.next_offset - batch.base_offset
                if last is not None:
                    offsets[part.partition_index] = last.next_offset
        elapsed = time.perf_counter() - started
    return records, size, elapsed


def run(plane: str, acks: str, size: int, total_mb: float, producers: int) -> dict:
    data_dir = tempfile.mkdtemp(prefix=f"records-bench-{plane}-")
    server = GroupdProcess(data_dir, f"records.plane={plane}", f"topics={TOPIC}:{PARTITIONS}",
                           "records.retention.bytes=2147483647", "records.memory.max.bytes=4294967296").start()
    try:
        pid = server.proc.pid
        cpu0 = _cpu(pid)
        records, seconds = produce(server.bootstrap, acks, size, total_mb, producers)
        cpu1 = _cpu(pid)
        got, got_bytes, fetch_seconds = fetch(server.bootstrap, records)
        cpu2 = _cpu(pid)
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    mb = records * size / (1 << 20)
    fetched_mb = got_bytes / (1 << 20)
    return {"plane": plane, "acks": acks, "size": size, "producers": producers, "records": records,
            "produce_mb_s": mb / seconds, "produce_rec_s": records / seconds,
            "produce_cpu_per_mb": (cpu1 - cpu0) / mb if mb else 0.0,
            "fetch_mb_s": fetched_mb / fetch_seconds, "fetch_rec_s": got / fetch_seconds,
            "fetch_cpu_per_mb": (cpu2 - cpu1) / fetched_mb if fetched_mb else 0.0, "fetched": got}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--planes", default="disk,memory")
    ap.add_argument("--acks", default="1,all")
    ap.add_argument("--sizes", default="100,10240", help="value sizes in bytes")
    ap.add_argument("--mb", type=float, default=40.0, help="MB of values produced per row")
    ap.add_argument("--producers", type=int, default=1)
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {args.mb:g} MB per row, "
          f"{args.producers} producer process(es), 4 partitions")
    head = (f"{'plane':<7}{'acks':>5}{'size':>7}{'records':>10}{'prod MB/s':>11}{'prod rec/s':>12}"
            f"{'cpu s/MB':>10}{'fetch MB/s':>12}{'fetch rec/s':>13}{'cpu s/MB':>10}")
    print(head)
    for plane in args.planes.split(","):
        for acks in args.acks.split(","):
            for size in map(int, args.sizes.split(",")):
                r = run(plane, acks, size, args.mb, args.producers)
                flag = "" if r["fetched"] == r["records"] else f"  (fetched {r['fetched']} of {r['records']})"
                print(f"{plane:<7}{acks:>5}{size:>7}{r['records']:>10,}{r['produce_mb_s']:>11.1f}"
                      f"{r['produce_rec_s']:>12,.0f}{r['produce_cpu_per_mb']:>10.3f}{r['fetch_mb_s']:>12.1f}"
                      f"{r['fetch_rec_s']:>13,.0f}{r['fetch_cpu_per_mb']:>10.3f}{flag}", flush=True)


if __name__ == "__main__":
    main()
