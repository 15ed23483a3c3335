"""Records plane throughput: produce and fetch MB/s and records/s against `python -m groupd.coordinator
serve`, per plane (disk, memory), acks (1, all), record size and number of concurrent producers, with
the echo server (bench/echo_server.py) sent the very same Produce frames in the same run, as the
machine's limit, and the server's CPU per MB.

    python bench/records_bench.py                          # the default matrix, one table (~40 s)
    python bench/records_bench.py --mb 4 --producers 1,10 --sizes 100     # quicker
    python bench/records_bench.py --targets disk --acks all --sizes 100 --mb 20 --producers 4 --client rdkafka

Each row: a fresh server on a fresh data dir (disk plane: the tmp dir's file system; fsync per batch,
the default `log.flush.interval.ms=0`, so acks=all waits for an fsync and acks=1 does not), one
4-partition topic. Producers (`--client raw`, the default): N connections from this process, each
sending Produce v8 requests with one pre-encoded batch of `--batch-kb` of `size`-byte values (no
compression, no producer id; connection i writes to partition i mod 4), one request in flight per
connection, until `--mb` MB of values have been acknowledged in all. Every reply is checked (its
correlation id and error code 0). The produce rate is the values' bytes (and records) acknowledged
over the time from the first request to the last reply. The echo rows send those same frames to the
echo server, which answers each with a small fixed reply as groupd answers a Produce: the fastest
this framing and this request size go through a Python asyncio server on this machine.
`--client rdkafka`: N librdkafka producer processes instead (linger.ms=5, 1 MB batches), no echo row.

Then one connection reads everything back with Fetch v12 requests (no client library: the server's
fetch path; the disk plane serves it from the page cache, the segments were just written); fetch MB/s
counts the batches' bytes. Server CPU is utime+stime from /proc/<pid>/stat over each phase, in
CPU-milliseconds per MB; client CPU is this process's over the produce phase, as % of one core.
Bounded: every wait has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import multiprocessing
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.pinning import pin_server  # noqa: E402
from tests.support.process import GroupdProcess, free_port  # noqa: E402

TOPIC, PARTITIONS = "bench", 4
_i32 = struct.Struct(">i")
_MS = datetime.timedelta(milliseconds=1)


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the raw producer: pre-encoded Produce frames, N connections in this process ------------------

def produce_frames(acks: int, size: int, batch_kb: int, topic: str = TOPIC) -> tuple[list[bytes], int]:
    """One Produce v8 frame per partition (correlation id 0, spliced per request) carrying one batch of
    as many `size`-byte values as fit in `batch_kb` (at least one), and that number of records."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    from groupd.protocol.apis import ApiKey
    from groupd.protocol.codec import RequestHeader, build_request, encode_request

    count = max(1, batch_kb * 1024 // size)
    value = os.urandom(size)
    now = int(time.time() * 1000)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(count):
        b.append(i, timestamp=now, key=None, value=value, headers=[])
    records = bytes(b.build())
    frames = []
    for p in range(PARTITIONS):
        body = build_request(ApiKey.PRODUCE, 8, {
            "transactional_id": None, "acks": acks, "timeout": 30_000 * _MS, "topic_data": [
                {"name": topic, "partition_data": [{"index": p, "records": records}]}]})
        frames.append(encode_request(RequestHeader(ApiKey.PRODUCE, 8, 0, "records-bench"), body))
    return frames, count


def _produce_ok(body: bytes) -> bool:
    """Produce v8 reply (header v0) after the correlation id: one topic, one partition, error code 0."""
    name_len = struct.unpack_from(">h", body, 8)[0]
    return struct.unpack_from(">h", body, 8 + 2 + name_len + 8)[0] == 0


def _echo_ok(body: bytes) -> bool:
    return body[4:6] == b"\x00\x00"  # the echo's fixed ApiVersions-style reply


async def _drive(port: int, frames: list[bytes], requests: int, connections: int, ok) -> dict:
    """`connections` connections, one request in flight each, until `requests` replies in all: the
    replies (good, bad), the seconds from the first request to the last reply, this process's CPU."""
    left = [requests]
    done = [0, 0]  # good replies, bad replies
    connected, ready, go = [0], asyncio.Event(), asyncio.Event()

    async def one(i: int) -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, limit=1 << 20), 30)
        frame = bytearray(frames[i % len(frames)])
        connected[0] += 1
        if connected[0] == connections:
            ready.set()
        await go.wait()  # every connection is up before the clock starts
        corr = 0
        try:
            while left[0] > 0:
                left[0] -= 1
                frame[8:12] = _i32.pack(corr)
                writer.write(frame)
                (n,) = _i32.unpack(await asyncio.wait_for(reader.readexactly(4), 120))
                body = await reader.readexactly(n)
                done[not (_i32.unpack_from(body)[0] == corr and ok(body))] += 1
                corr += 1
        finally:
            writer.close()

    tasks = [asyncio.ensure_future(one(i)) for i in range(connections)]
    await asyncio.wait_for(ready.wait(), 60)
    cpu0, t0 = time.process_time(), time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    return {"ok": done[0], "bad": done[1], "seconds": time.perf_counter() - t0,
            "client_cpu": time.process_time() - cpu0}


def produce_raw(port: int, acks: int, size: int, total_mb: float, producers: int, batch_kb: int,
                echo: bool = False, topic: str = TOPIC) -> dict:
    frames, per_batch = produce_frames(acks, size, batch_kb, topic)
    requests = max(int(total_mb * (1 << 20) / (per_batch * size)), producers)
    r = asyncio.run(_drive(port, frames, requests, producers, _echo_ok if echo else _produce_ok))
    r["records"] = r["ok"] * per_batch
    return r


# -- `--client rdkafka` and the fetch phase ---------------------------------------------------------

def _rdkafka_producer(bootstrap: str, acks: str, size: int, count: int, index: int, out) -> None:
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


def produce_rdkafka(bootstrap: str, acks: str, size: int, total_mb: float, producers: int) -> tuple[int, float]:
    """`--client rdkafka`: (records acknowledged, seconds) from `producers` librdkafka processes."""
    per = max(int(total_mb * (1 << 20) / size / producers), 1)
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_rdkafka_producer, args=(bootstrap, acks, size, per, i, out))
             for i in range(producers)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(60)
    return sum(r[0] for r in results), max(r[2] for r in results) - min(r[1] for r in results)


def fetch(bootstrap: str, expected: int, topic: str = TOPIC) -> tuple[int, int, float]:
    """(records, bytes, seconds) reading every partition from offset 0 to its end with Fetch v12
    requests (10 MB per partition, 50 MB per response) on one connection, one request at a time:
    the server's fetch path, without a client library's per-message cost."""
    from groupd.protocol.apis import ApiKey
    from groupd.storage.records_plane.batches import iter_batches
    from tests.storage.test_records_plane import fetch_request, list_offset
    from tests.support.process import WireClient

    with WireClient(bootstrap, timeout=60) as c:
        # the disk plane's high watermark is the durable end: with acks=1 the last batches become
        # readable at their fsync, just after the last reply; wait for them, outside the timed part
        deadline = time.monotonic() + 60
        while True:
            ends = {p: list_offset(c, topic, p, -1).offset for p in range(PARTITIONS)}
            if sum(ends.values()) >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        offsets = dict.fromkeys(range(PARTITIONS), 0)
        records = size = 0
        started = time.perf_counter()
        while any(offsets[p] < ends[p] for p in offsets):
            r = c.request(ApiKey.FETCH, 12, fetch_request([(topic, p, o) for p, o in offsets.items() if o < ends[p]],
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




# -- the echo server, started once per run ---------------------------------------------------------

class EchoServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "echo_server.py"),
                                      "--port", str(self.port)], stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.kill()
            raise RuntimeError("the echo server did not start")
        pin_server(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# -- Apache Kafka, started once per run (JVM defaults, as Kafka ships) --------------------------------

class KafkaTarget:
    """The reference broker (tests/support/kafka.py; jars from `make kafka`): one per run (or `broker`, one
    already running, which stop() leaves alone), a fresh 4-partition topic per row. It never fsyncs (Kafka's
    default flush policy leaves that to the OS) and advances a single replica's high watermark at the append:
    compare with groupd's acks=1 rows for the same durability, acks=all for fsynced ones."""

    def __init__(self, broker=None) -> None:
        from tests.support.kafka import KafkaBroker

        self.owned = broker is None
        self.data = tempfile.mkdtemp(prefix="records-bench-kafka-") if self.owned else None
        self.broker = KafkaBroker(self.data, jvm=[]).start() if self.owned else broker
        self.rows = 0

    def topic(self) -> str:
        import datetime

        from groupd.protocol.apis import ApiKey
        from tests.support.process import WireClient

        self.rows += 1
        name = f"{TOPIC}-{self.rows}-{os.getpid()}"
        with WireClient(self.broker.bootstrap, timeout=60) as c:
            r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": name, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [],
                 "configs": [{"name": "retention.bytes", "value": "-1"}]}],
                "timeout": datetime.timedelta(seconds=60), "validate_only": False})
            assert r.topics[0].error_code == 0, r.topics[0]
            deadline = time.monotonic() + 60  # every partition led (CreateTopics answers before that)
            while any(_list_offsets_error(c, name, p) for p in range(PARTITIONS)):
                assert time.monotonic() < deadline, f"{name} has no leader"
                time.sleep(0.05)
        return name

    def stop(self) -> None:
        if self.owned:
            self.broker.stop()
            shutil.rmtree(self.data, ignore_errors=True)


def _list_offsets_error(c, topic: str, partition: int) -> int:
    from groupd.protocol.apis import ApiKey

    r = c.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    return r.topics[0].partitions[0].error_code


def run_kafka(kafka: KafkaTarget, acks: str, size: int, total_mb: float, producers: int, batch_kb: int) -> dict:
    topic = kafka.topic()
    pid = kafka.broker.proc.pid
    cpu0 = _cpu(pid)
    r = produce_raw(kafka.broker.port, -1 if acks == "all" else int(acks), size, total_mb, producers, batch_kb,
                    topic=topic)
    cpu1 = _cpu(pid)
    got, got_bytes, fetch_seconds = fetch(kafka.broker.bootstrap, r["records"], topic)
    cpu2 = _cpu(pid)
    return _row("kafka", acks, size, producers, r["records"], r["seconds"], r["bad"],
                100 * r["client_cpu"] / r["seconds"], cpu1 - cpu0, got, got_bytes, fetch_seconds, cpu2 - cpu1)


# -- one row ---------------------------------------------------------------------------------------

def run_echo(echo: EchoServer, size: int, total_mb: float, producers: int, batch_kb: int) -> dict:
    cpu0 = _cpu(echo.proc.pid)
    r = produce_raw(echo.port, 1, size, total_mb, producers, batch_kb, echo=True)
    mb = r["records"] * size / (1 << 20)
    return {"target": "echo", "acks": "-", "size": size, "producers": producers, "records": r["records"],
            "errors": r["bad"], "produce_mb_s": mb / r["seconds"], "produce_rec_s": r["records"] / r["seconds"],
            "produce_cpu_ms_mb": 1000 * (_cpu(echo.proc.pid) - cpu0) / mb,
            "client_cpu_pct": 100 * r["client_cpu"] / r["seconds"], "fetched": None}


def run(plane: str, acks: str, size: int, total_mb: float, producers: int, batch_kb: int, client: str) -> dict:
    data_dir = tempfile.mkdtemp(prefix=f"records-bench-{plane}-")
    server = GroupdProcess(data_dir, f"records.plane={plane}", f"topics={TOPIC}:{PARTITIONS}",
                           "records.retention.bytes=2147483647", "records.memory.max.bytes=4294967296").start()
    try:
        pid = server.proc.pid
        pin_server(pid)
        cpu0 = _cpu(pid)
        if client == "raw":
            r = produce_raw(server.port, -1 if acks == "all" else int(acks), size, total_mb, producers, batch_kb)
            records, seconds, errors = r["records"], r["seconds"], r["bad"]
            client_pct = 100 * r["client_cpu"] / seconds
        else:
            (records, seconds), errors, client_pct = produce_rdkafka(server.bootstrap, acks, size, total_mb,
                                                                     producers), 0, None
        cpu1 = _cpu(pid)
        got, got_bytes, fetch_seconds = fetch(server.bootstrap, records)
        cpu2 = _cpu(pid)
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return _row(plane, acks, size, producers, records, seconds, errors, client_pct, cpu1 - cpu0, got, got_bytes,
                fetch_seconds, cpu2 - cpu1)


def _row(target: str, acks: str, size: int, producers: int, records: int, seconds: float, errors: int,
         client_pct: float | None, produce_cpu: float, got: int, got_bytes: int, fetch_seconds: float,
         fetch_cpu: float) -> dict:
    mb = records * size / (1 << 20)
    fetched_mb = got_bytes / (1 << 20)
    return {"target": target, "acks": acks, "size": size, "producers": producers, "records": records,
            "errors": errors, "produce_mb_s": mb / seconds, "produce_rec_s": records / seconds,
            "produce_cpu_ms_mb": 1000 * produce_cpu / mb if mb else 0.0, "client_cpu_pct": client_pct,
            "fetch_mb_s": fetched_mb / fetch_seconds, "fetch_rec_s": got / fetch_seconds,
            "fetch_cpu_ms_mb": 1000 * fetch_cpu / fetched_mb if fetched_mb else 0.0, "fetched": got}


COLUMNS = [("target", 7, "{}"), ("acks", 5, "{}"), ("size", 6, "{}"), ("prod", 5, "{}"), ("records", 10, "{:,}"),
           ("prod MB/s", 10, "{:.1f}"), ("prod rec/s", 11, "{:,.0f}"), ("srv ms/MB", 10, "{:.1f}"),
           ("client%", 8, "{:.0f}"), ("fetch MB/s", 11, "{:.1f}"), ("fetch rec/s", 12, "{:,.0f}"),
           ("srv ms/MB", 10, "{:.1f}")]


def row(r: dict) -> str:
    values = [r["target"], r["acks"], r["size"], r["producers"], r["records"], r["produce_mb_s"], r["produce_rec_s"],
              r["produce_cpu_ms_mb"], r["client_cpu_pct"], r.get("fetch_mb_s"), r.get("fetch_rec_s"),
              r.get("fetch_cpu_ms_mb")]
    cells = [("-" if v is None else fmt.format(v)).rjust(w) for (_, w, fmt), v in zip(COLUMNS, values)]
    notes = []
    if r["errors"]:
        notes.append(f"{r['errors']} bad replies")
    if r["fetched"] is not None and r["fetched"] != r["records"]:
        notes.append(f"fetched {r['fetched']} of {r['records']}")
    return " ".join(cells) + (f"  ({'; '.join(notes)})" if notes else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="echo,disk,memory",
                    help="echo, the records planes (disk, memory) and kafka (Apache Kafka, `make kafka`)")
    ap.add_argument("--acks", default="1,all")
    ap.add_argument("--sizes", default="100,10240", help="value sizes in bytes")
    ap.add_argument("--producers", default="1,10,100", help="concurrent producers (connections, or processes)")
    ap.add_argument("--mb", type=float, default=8.0, help="MB of values produced per row")
    ap.add_argument("--batch-kb", type=int, default=16, help="raw client: KB of values per Produce request")
    ap.add_argument("--client", choices=("raw", "rdkafka"), default="raw")
    args = ap.parse_args()
    from echo_server import install_loop_policy

    loop = install_loop_policy()
    targets = args.targets.split(",")
    if args.client == "rdkafka" and "echo" in targets:
        targets.remove("echo")  # librdkafka cannot talk to the echo server
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"{args.mb:g} MB of values per row, client {args.client} ({loop}), {args.batch_kb} KB per Produce, "
          f"{PARTITIONS} partitions", flush=True)
    print(" ".join(name.rjust(w) for name, w, _ in COLUMNS), flush=True)
    if args.client == "rdkafka" and "kafka" in targets:
        targets.remove("kafka")  # the raw client's rows only
    echo = EchoServer() if "echo" in targets else None
    kafka = KafkaTarget() if "kafka" in targets else None
    try:
        for size in map(int, args.sizes.split(",")):
            for producers in map(int, args.producers.split(",")):
                if echo is not None:
                    print(row(run_echo(echo, size, args.mb, producers, args.batch_kb)), flush=True)
                for target in (t for t in targets if t != "echo"):
                    for acks in args.acks.split(","):
                        r = (run_kafka(kafka, acks, size, args.mb, producers, args.batch_kb) if target == "kafka"
                             else run(target, acks, size, args.mb, producers, args.batch_kb, args.client))
                        print(row(r), flush=True)
    finally:
        if echo is not None:
            echo.stop()
        if kafka is not None:
            kafka.stop()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
