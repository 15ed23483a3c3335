"""Storage benchmark: durable OffsetCommit throughput, offsets-log load time and memory, compaction.

    python bench/storage_bench.py                      # everything (about 6-8 minutes)
    python bench/storage_bench.py --only commit --seconds 3
    python bench/storage_bench.py --only commit --flush 0 --partitions 1 --connections 100 --echo
    python bench/storage_bench.py --only commit --flush 0 --partitions 1,5 --connections 100 --echo --pin 0:1
    python bench/storage_bench.py --only commit --flush 0 --connections 100 --echo --kafka --driver go --pin 0:1
    python bench/storage_bench.py --only load --records 100000,1000000
    python bench/storage_bench.py --only compact --compact-mb 300

1. Commit throughput: N raw connections (pipelined depth 1), each committing to its own group
   (OffsetCommit v8, generation -1, so groups spread over the 50 offsets partitions), 1 or 5
   partitions per commit; with `log.flush.interval.ms=0` (fsync per batch) and `=1000` (interval
   mode). Counted: partitions acknowledged with error 0 per second inside the window, the server's
   CPU use and its CPU µs per acknowledged commit (load-independent enough to compare builds).
   `--kafka`: Apache Kafka at the same points (flush 0: flush.messages=1 on __consumer_offsets);
   `--driver go`: the load from the compiled driver (bench/loadgen-go), so the echo figure is the machine's.
   Every reply is checked byte for byte against the first one, decoded. `--echo`: the echo server
   (bench/echo_server.py) measured the same way at each connection count, for the ratio.
2. Load: a data dir with N distinct committed offsets (N/100 groups x 100 partitions each),
   written directly with `PartitionLog.append` in batches of 2000 records; time from spawning
   `groupd serve` to "offsets log loaded", the server's RSS after load, and (RSS - RSS of an
   empty server) / N as bytes per committed offset.
3. Compaction: one partition of `--compact-mb` MB (16 MiB segments) where each of 50 000 keys is
   written over and over; `storage.compaction.compact` timed in a child process, with its peak RSS.

Data dirs go under --tmp (default: the system temp dir, i.e. the real disk, so fsync costs what it
costs) and are removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import pinning  # noqa: E402
from groupd.coordinator.core.partitioning import partition_for  # noqa: E402
from groupd.protocol import ErrorCode  # noqa: E402
from groupd.protocol.apis import ApiKey  # noqa: E402
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request  # noqa: E402
from groupd.storage.log import PartitionLog  # noqa: E402
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record  # noqa: E402
from tests.support.process import GroupdProcess  # noqa: E402

_SIZE = struct.Struct(">i")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_line(server: GroupdProcess, text: str, since: int, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in server.log()[since:]:
            return time.monotonic()
        if not server.alive():
            raise RuntimeError(server.log()[-2000:])
        time.sleep(0.005)
    raise TimeoutError(text)


# -- 1. commit throughput ---------------------------------------------------------------------------

def commit_frame(group: str, partitions: int) -> bytes:
    body = build_request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [
            {"partition_index": p, "committed_offset": 1000 + p, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p in range(partitions)]}]})
    return encode_request(RequestHeader(ApiKey.OFFSET_COMMIT, 8, 1, "storage-bench"), body)


async def _committer(port: int, group: str, partitions: int, start: float, end: float, out: dict) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    frame = commit_frame(group, partitions)

    async def roundtrip() -> bytes:
        writer.write(frame)
        (n,) = _SIZE.unpack(await reader.readexactly(4))
        return await reader.readexactly(n)

    first = await roundtrip()
    _, reply = decode_response(ApiKey.OFFSET_COMMIT, 8, first)
    errors = {p.error_code for t in reply.topics for p in t.partitions}
    assert errors == {ErrorCode.none}, errors
    loop = asyncio.get_running_loop()
    acked = bad = 0
    while (now := loop.time()) < end:
        got = await roundtrip()
        out["commits"] += 1
        if loop.time() >= start and now >= start:
            if got == first:
                acked += partitions
            else:
                bad += 1
    writer.close()
    out["acked"] += acked
    out["bad"] += bad


async def _commit_load(port: int, connections: int, partitions: int, warmup: float, seconds: float,
                       workers: int = 1) -> dict:
    """`workers`: `groupd serve --workers N` on port..port+N-1; each group commits at its owner."""
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    end = start + seconds
    out = {"acked": 0, "bad": 0, "commits": 0}
    groups = [f"bench-{connections}-{partitions}-{i}" for i in range(connections)]
    await asyncio.gather(*[_committer(port + partition_for(g, 50) % workers, g, partitions, start, end, out)
                           for g in groups])
    return out


def _runner():
    try:
        import uvloop
        return uvloop.run
    except ImportError:
        return asyncio.run


async def _echo_load(port: int, connections: int, warmup: float, seconds: float) -> dict:
    """The echo server answers any frame: the same closed loop, its replies counted, not checked."""
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    end = start + seconds
    out = {"replies": 0}

    async def one() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frame = commit_frame("echo", 1)
        n = 0
        while (now := loop.time()) < end:
            writer.write(frame)
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            await reader.readexactly(size)
            if now >= start:
                n += 1
        writer.close()
        out["replies"] += n

    await asyncio.gather(*[one() for _ in range(connections)])
    return out


def echo_throughput(connections: list[int], seconds: float, warmup: float, driver: str = "python") -> dict[int, float]:
    """Echo server replies/s at each connection count (the ceiling of this framing here)."""
    from bench.run_apiversions import free_port, wait_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "echo_server.py"), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc)
        pinning.pin_server(proc.pid)
        rates = {}
        for n in connections:
            if driver == "go":
                rates[n] = commit_point(port, proc.pid, n, 1, warmup, seconds, "go", echo=True)["commits/s"]
            else:
                rates[n] = _runner()(_echo_load(port, n, warmup, seconds))["replies"] / seconds
            print(f"  echo connections={n}: {rates[n]:,.0f} replies/s", flush=True)
        return rates
    finally:
        proc.terminate()
        proc.wait(10)


COMMIT_ERROR_AT = 13  # OffsetCommit v8 reply after the correlation id: tags, throttle, topics, name "t", partitions,
#                       partition_index, then the first partition's error_code


def commit_point(port: int, pid: int, connections: int, partitions: int, warmup: float, seconds: float,
                 driver: str = "python", echo: bool = False) -> dict:
    """Durable commits at the server `pid` listening on `port`, one measurement: each connection its own group,
    `partitions` per commit, depth 1. driver "python": this process's committers, every reply compared with
    the first; "go": the compiled driver (bench/loadgen-go), each reply's first partition checked, after one
    commit per group decoded here (every partition 0). Server CPU µs per commit from /proc of `pid`."""
    groups = [f"bench-{connections}-{partitions}-{i}" for i in range(connections)]
    if driver == "go":
        from bench import go_loadgen

        frames = [commit_frame(g, partitions) for g in groups]
        if not echo:
            _runner()(_first_commits(port, frames))
        r = go_loadgen.run([(port, f) for f in frames], 1, warmup, seconds, -1 if echo else COMMIT_ERROR_AT,
                           [pid])
        rate, cpu = r["req_per_s"], (r["server_cpu_pct"] or 0) / 100
        return {"connections": connections, "partitions/commit": partitions, "partitions/s": rate * partitions,
                "commits/s": rate, "bad replies": r["errors"], "server cpu": cpu,
                "cpu us/commit": cpu * 1e6 / rate if rate else float("nan"), "p99 us": r["p99_us"]}
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    out = _runner()(_commit_load(port, connections, partitions, warmup, seconds))
    used = cpu_seconds(pid) - cpu0
    commits = out["commits"] or 1  # per commit over the whole run (warm-up included): CPU of all / all commits
    return {"connections": connections, "partitions/commit": partitions, "partitions/s": out["acked"] / seconds,
            "commits/s": out["acked"] / partitions / seconds, "bad replies": out["bad"],
            "server cpu": used / (time.monotonic() - t0), "cpu us/commit": used / commits * 1e6, "p99 us": None}


async def _first_commits(port: int, frames: list[bytes]) -> None:
    """One commit of each frame, decoded: every partition acknowledged with error 0 (the compiled driver
    checks the first partition of each reply after this)."""
    async def one(frame: bytes) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame)
        (n,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), 60))
        _, reply = decode_response(ApiKey.OFFSET_COMMIT, 8, await reader.readexactly(n))
        writer.close()
        errors = {p.error_code for t in reply.topics for p in t.partitions}
        assert errors == {ErrorCode.none}, errors

    await asyncio.gather(*(one(f) for f in frames))


def _report(label: str, row: dict) -> None:
    print(f"  {label} connections={row['connections']} partitions/commit={row['partitions/commit']}: "
          f"{row['partitions/s']:,.0f} partitions/s, server cpu {row['server cpu']:.0%}, "
          f"{row['cpu us/commit']:.0f} cpu µs/commit", flush=True)


def commit_throughput(tmp: str, connections: list[int], seconds: float, warmup: float, flushes=(0, 1000),
                      partition_counts=(1, 5), driver: str = "python") -> list[dict]:
    rows = []
    for flush in flushes:
        data_dir = tempfile.mkdtemp(prefix="commit-", dir=tmp)
        server = GroupdProcess(data_dir, "topics=t:8", f"log.flush.interval.ms={flush}").start()
        try:
            wait_for_line(server, "offsets log loaded", 0)
            pinning.pin_server(server.proc.pid)
            for partitions in partition_counts:
                for n in connections:
                    row = commit_point(server.port, server.proc.pid, n, partitions, warmup, seconds, driver)
                    rows.append({"target": "groupd", "flush.interval.ms": flush, **row})
                    _report(f"groupd flush={flush}", row)
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)
    return rows


def kafka_commit_throughput(broker, connections: list[int], seconds: float, warmup: float, flushes=(0, 1000),
                            partition_counts=(1, 5), driver: str = "python") -> list[dict]:
    """The same points against a running Apache Kafka (bench/kafka_reference.py, topic t created): groupd's
    flush 0 (fsync per batch) is matched by flush.messages=1 on __consumer_offsets (an fsync per append
    before the acknowledgement); any other value by Kafka's default (no fsync of its own, the OS writes back)."""
    from bench.kafka_reference import set_offsets_flush

    rows = []
    for flush in flushes:
        set_offsets_flush(broker.bootstrap, 1 if flush == 0 else None)
        for partitions in partition_counts:
            for n in connections:
                row = commit_point(broker.port, broker.proc.pid, n, partitions, warmup, seconds, driver)
                rows.append({"target": "kafka", "flush.interval.ms": flush, **row})
                _report(f"kafka {'flush.messages=1' if flush == 0 else 'no fsync'}", row)
    return rows


# -- 2. load time and memory --------------------------------------------------------------------------

def write_offsets_log(data_dir: str, records: int, batch: int = 2000) -> float:
    """`records` distinct offsets: records/100 groups x 100 partitions of topic t; returns seconds."""
    started = time.monotonic()
    by_partition: dict[int, list[str]] = {}
    for g in range(records // 100):
        group = f"bench-group-{g}"
        by_partition.setdefault(partition_for(group, 50), []).append(group)
    now = int(time.time() * 1000)
    for p, groups in by_partition.items():
        plog = PartitionLog(data_dir, p, 104857600)
        plog.load(lambda record: None)
        pending: list[Record] = []
        for group in groups:
            for part in range(100):
                pending.append(Record(OffsetCommitKey(group, "t", part),
                                      OffsetCommitValue(100_000 + part, -1, "", now)))
                if len(pending) >= batch:
                    plog.append(pending, fsync=False)
                    pending = []
        if pending:
            plog.append(pending, fsync=False)
        plog.close()
    return time.monotonic() - started


def start_and_measure(data_dir: str) -> dict:
    server = GroupdProcess(data_dir, "topics=t:100")
    since = len(server.log()) if os.path.exists(server.log_path) else 0
    t0 = time.monotonic()
    server.start(timeout=600)
    t1 = wait_for_line(server, "offsets log loaded", since)
    time.sleep(0.5)  # let the loader threads' garbage go
    rss = rss_kib(server.proc.pid)
    line = re.search(r"offsets log loaded .*", server.log()[since:]).group(0)
    server.stop()
    return {"seconds": t1 - t0, "rss_kib": rss, "line": line}


def load_bench(tmp: str, sizes: list[int]) -> list[dict]:
    empty_dir = tempfile.mkdtemp(prefix="load-empty-", dir=tmp)
    try:
        empty = start_and_measure(empty_dir)
    finally:
        shutil.rmtree(empty_dir, ignore_errors=True)
    print(f"  empty data dir: start to loaded {empty['seconds']:.2f} s, RSS {empty['rss_kib'] / 1024:.1f} MiB",
          flush=True)
    rows = [{"records": 0, "log MB": 0, "build s": 0, "load s": empty["seconds"], "rss MiB": empty["rss_kib"] / 1024,
             "bytes/offset": None}]
    for n in sizes:
        data_dir = tempfile.mkdtemp(prefix=f"load-{n}-", dir=tmp)
        try:
            build = write_offsets_log(data_dir, n)
            size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data_dir) for f in fs)
            m = start_and_measure(data_dir)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
        per = (m["rss_kib"] - empty["rss_kib"]) * 1024 / n
        rows.append({"records": n, "log MB": size / 1e6, "build s": build, "load s": m["seconds"],
                     "rss MiB": m["rss_kib"] / 1024, "bytes/offset": per})
        print(f"  {n:,} offsets ({size / 1e6:.0f} MB log, built in {build:.1f} s): start to loaded "
              f"{m['seconds']:.2f} s, RSS {m['rss_kib'] / 1024:.0f} MiB, {per:.0f} bytes/offset; {m['line']}",
              flush=True)
    return rows


# -- 3. compaction ----------------------------------------------------------------------------------

COMPACT_CHILD = r"""
import json, re, sys, time
sys.path.insert(0, sys.argv[1])
from groupd.storage.compaction import compact


def peak_kib():
    # VmHWM is this process's own peak; ru_maxrss would carry the parent's across exec.
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))


t0 = time.perf_counter()
r = compact(sys.argv[2], now_ms=int(time.time() * 1000), delete_retention_ms=0)
print(json.dumps({"seconds": time.perf_counter() - t0, "maxrss_kib": peak_kib(),
                  "segments": r.segments_cleaned, "records_before": r.records_before, "records_after": r.records_after,
                  "bytes_before": r.bytes_before, "bytes_after": r.bytes_after}))
"""


def compact_bench(tmp: str, megabytes: int, keys: int = 50_000, segment_mib: int = 16) -> dict:
    data_dir = tempfile.mkdtemp(prefix="compact-", dir=tmp)
    try:
        t0 = time.monotonic()
        plog = PartitionLog(data_dir, 0, segment_mib << 20)
        plog.load(lambda record: None)
        now = int(time.time() * 1000)
        written, i = 0, 0
        target = megabytes * 1_000_000
        while written < target:
            batch = []
            for _ in range(2000):
                k = i % keys
                batch.append(Record(OffsetCommitKey(f"compact-group-{k // 100}", "topic", k % 100),
                                    OffsetCommitValue(i, -1, "", now)))
                i += 1
            written += plog.append(batch, fsync=False)
        plog.sync()
        plog.close()
        build = time.monotonic() - t0
        segments = len(plog.segments)
        print(f"  built {written / 1e6:.0f} MB, {i:,} records over {keys:,} keys in {segments} segments "
              f"({build:.0f} s)", flush=True)
        out = subprocess.run([sys.executable, "-c", COMPACT_CHILD, ROOT, plog.directory], capture_output=True,
                             text=True, timeout=3600)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        result = json.loads(out.stdout)
        result.update(records=i, keys=keys, segments_total=segments, build_seconds=build, mb=written / 1e6)
        print(f"  compaction: {result['seconds']:.1f} s, {result['records_before']:,} -> {result['records_after']:,} "
              f"records, {result['bytes_before'] / 1e6:.0f} -> {result['bytes_after'] / 1e6:.1f} MB, peak RSS "
              f"{result['maxrss_kib'] / 1024:.0f} MiB", flush=True)
        return result
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


# -- report -------------------------------------------------------------------------------------------

def table(headers: list[str], rows: list[list]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).rjust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["commit", "load", "compact"], action="append")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured window per commit point")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--connections", default="1,10,100")
    ap.add_argument("--flush", default="0,1000", help="commit: log.flush.interval.ms values")
    ap.add_argument("--partitions", default="1,5", help="commit: partitions per commit")
    ap.add_argument("--echo", action="store_true", help="commit: also measure the echo server, for the ratio")
    ap.add_argument("--kafka", action="store_true",
                    help="commit: also measure Apache Kafka (`make kafka`; JVM defaults, 50 offsets partitions)")
    ap.add_argument("--driver", choices=("python", "go"), default="python",
                    help="commit: the committers in this process, or the compiled driver (bench/loadgen-go)")
    ap.add_argument("--records", default="100000,1000000")
    ap.add_argument("--compact-mb", type=int, default=300)
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    pinning.add_argument(ap)
    args = ap.parse_args()
    pinning.use(args.pin)  # the committers run in this process
    parts = args.only or ["commit", "load", "compact"]
    print(f"storage bench: python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}, "
          f"data under {args.tmp}; {pinning.describe()}", flush=True)
    report = []
    if "commit" in parts:
        print("commit throughput:", flush=True)
        conns = [int(x) for x in args.connections.split(",")]
        echo = echo_throughput(conns, args.seconds, args.warmup, args.driver) if args.echo else {}
        flushes, counts = [int(x) for x in args.flush.split(",")], [int(x) for x in args.partitions.split(",")]
        rows = commit_throughput(args.tmp, conns, args.seconds, args.warmup, flushes, counts, args.driver)
        if args.kafka:
            from bench.kafka_reference import bench_broker, create_topic

            data = tempfile.mkdtemp(prefix="commit-kafka-", dir=args.tmp)
            broker, _ = bench_broker(data)
            try:
                pinning.pin_server(broker.proc.pid)
                create_topic(broker.bootstrap, "t", 8)  # Kafka refuses commits to a topic it does not have
                rows += kafka_commit_throughput(broker, conns, args.seconds, args.warmup, flushes, counts, args.driver)
            finally:
                broker.stop()
                shutil.rmtree(data, ignore_errors=True)
        report.append("Durable OffsetCommit throughput (partitions acknowledged per second; raw connections, depth 1, "
                      f"each its own group; {args.seconds:g} s window after {args.warmup:g} s warm-up; load from "
                      f"{'the compiled driver' if args.driver == 'go' else 'this process'}; kafka: flush 0 = "
                      "flush.messages=1 on __consumer_offsets, else its default, no fsync)\n\n" + table(
                          ["target", "log.flush.interval.ms", "connections", "partitions/commit", "partitions/s",
                           "commits/s", "server CPU", "CPU µs/commit", "partitions/s ÷ echo replies/s"],
                          [[r["target"], r["flush.interval.ms"], r["connections"], r["partitions/commit"],
                            f"{r['partitions/s']:,.0f}",
                            f"{r['commits/s']:,.0f}", f"{r['server cpu']:.0%}", f"{r['cpu us/commit']:.0f}",
                            f"{r['partitions/s'] / echo[r['connections']]:.2f}" if r["connections"] in echo else "-"]
                           for r in rows]))
        assert all(r["bad replies"] == 0 for r in rows), rows
    if "load" in parts:
        print("load time and memory:", flush=True)
        rows = load_bench(args.tmp, [int(x) for x in args.records.split(",")])
        report.append("Offsets log load (distinct committed offsets; spawn of `groupd serve` to \"offsets log loaded\"; "
                      "RSS after load)\n\n" + table(
                          ["offsets", "log MB", "start to loaded s", "RSS MiB", "bytes/offset in memory"],
                          [[f"{r['records']:,}", f"{r['log MB']:.0f}", f"{r['load s']:.2f}", f"{r['rss MiB']:.0f}",
                            "-" if r["bytes/offset"] is None else f"{r['bytes/offset']:.0f}"] for r in rows]))
    if "compact" in parts:
        print("compaction:", flush=True)
        r = compact_bench(args.tmp, args.compact_mb)
        report.append("Compaction of one partition (`storage.compaction.compact` in a child process; 16 MiB segments, "
                      "the active one is not compacted)\n\n" + table(
            ["log MB", "segments", "keys", "closed MB", "closed records", "seconds", "closed MB/s", "records after",
             "MB after", "peak RSS MiB"],
            [[f"{r['mb']:.0f}", r["segments_total"], f"{r['keys']:,}", f"{r['bytes_before'] / 1e6:.0f}",
              f"{r['records_before']:,}", f"{r['seconds']:.1f}", f"{r['bytes_before'] / 1e6 / r['seconds']:.1f}",
              f"{r['records_after']:,}", f"{r['bytes_after'] / 1e6:.1f}", f"{r['maxrss_kib'] / 1024:.0f}"]]))
    print()
    print("\n\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
