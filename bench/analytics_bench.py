"""The analytics pipeline's throughput: records per second through the `groupd_offsets` data
source on local[2], the whole pipeline's time, and (with --standalone) one pipeline run against a
Spark standalone master and worker started from the installed pyspark on 127.0.0.1.

    .venv/bin/python bench/analytics_bench.py [--records 1000000] [--partitions 10]
        [--segment-bytes 4194304] [--standalone] [--data-dir DIR] [--keep] [--json]

The log is written with the server's own `storage.log.PartitionLog` (fsync off, big batches):
offset commits of `--groups` consumer groups over 20 partitions each, plus a GroupMetadata record
with 4 consumer members every 50 batches. Everything is bounded and local: the standalone master
and worker bind 127.0.0.1, on free ports, and are stopped (by their pids) before the script exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from groupd.protocol.consumer import encode_assignment, encode_subscription  # noqa: E402
from groupd.storage.log import PartitionLog  # noqa: E402
from groupd.storage.records import (  # noqa: E402
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_log(data_dir: str, records: int, partitions: int, groups: int, segment_bytes: int,
              batch: int = 2000) -> tuple[int, float]:
    """Write at least `records` records; returns (records written, seconds)."""
    start = time.monotonic()
    logs = [PartitionLog(data_dir, p, segment_bytes) for p in range(partitions)]
    for log in logs:
        log.load(lambda r: None)
    members = tuple(MemberMetadata(f"consumer-{i}", None, "bench", "/127.0.0.1", 300000, 45000,
                                   encode_subscription(["orders"]), encode_assignment({"orders": [i * 5 + j for j in range(5)]}))
                    for i in range(4))
    written = n = 0
    while written < records:
        log = logs[n % partitions]
        group = f"group-{(n * 7) % groups}"
        out = [Record(OffsetCommitKey(group, "orders", (n + i) % 20),
                      OffsetCommitValue(n * batch + i, 3, "", 1_700_000_000_000 + n)) for i in range(batch)]
        if n % 50 == 0:
            out.append(Record(GroupMetadataKey(group), GroupMetadataValue(
                "consumer", n, "range", "consumer-0", 1_700_000_000_000 + n, members)))
        log.append(out, fsync=False)
        written += len(out)
        n += 1
    for log in logs:
        log.close()
    return written, time.monotonic() - start


def python_decode_rate(data_dir: str) -> tuple[int, float]:
    """The same decode as the data source, in this one process, without Spark (one core)."""
    from groupd.analytics.segments import list_data_dir, read_segment
    from groupd.analytics.source import arrow_batches

    start = time.monotonic()
    n = sum(b.num_rows for s in list_data_dir(data_dir) for b in arrow_batches(read_segment(s)))
    return n, time.monotonic() - start


def source_rate(spark, data_dir: str) -> tuple[int, float]:
    """Every column of every record materialised by Spark (the noop sink), timed."""
    start = time.monotonic()
    spark.read.format("groupd_offsets").load(data_dir).write.format("noop").mode("overwrite").save()
    seconds = time.monotonic() - start
    return spark.read.format("groupd_offsets").load(data_dir).count(), seconds


class Standalone:
    """A Spark standalone master and one worker (2 cores) from pyspark's own bin/spark-class."""

    def __init__(self, work: str, memory: str = "6g") -> None:
        import pyspark

        self.spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
        self.work = work
        self.memory = memory
        self.port = free_port()
        self.procs: list[subprocess.Popen] = []
        self.url = f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str], ready: str, timeout: float = 120.0) -> None:
        log_path = os.path.join(self.work, f"{name}.log")
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([self.spark_class] + args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.work)
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(log_path, errors="replace") as f:
                if ready in f.read():
                    return
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        with open(log_path, errors="replace") as f:
            raise RuntimeError(f"{name} did not start:\n{f.read()[-3000:]}")

    def start(self) -> Standalone:
        os.makedirs(self.work, exist_ok=True)
        self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(free_port())],
                    "I have been elected leader")
        self._start("worker", ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                               "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "2",
                               "--memory", self.memory, "--work-dir", os.path.join(self.work, "work")],
                    "Successfully registered with master")
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def run_cli(data_dir: str, out: str, master: str, conf: list[str]) -> tuple[float, str]:
    groupd = os.path.join(os.path.dirname(sys.executable), "groupd")
    args = [groupd, "analytics", "run", "--data-dir", data_dir, "--out", out, "--master", master]
    for c in conf:
        args += ["--conf", c]
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800, cwd=REPO)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}")
    return seconds, done.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=10, help="offsets partitions written")
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--segment-bytes", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--data-dir", help="write the log here (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--standalone", action="store_true", help="also run the pipeline on a standalone master+worker")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="groupd-analytics-bench-")
    data_dir = args.data_dir or os.path.join(tmp, "data")
    result: dict = {"records_asked": args.records, "partitions": args.partitions, "cpus": os.cpu_count()}
    try:
        written, seconds = build_log(data_dir, args.records, args.partitions, args.groups, args.segment_bytes)
        size = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(data_dir) for f in files)
        from groupd.analytics.segments import list_data_dir

        result.update(records=written, log_bytes=size, segments=len(list_data_dir(data_dir)),
                      write_seconds=round(seconds, 2))
        print(f"log: {written} records, {size / 1e6:.1f} MB, {result['segments']} segments in "
              f"{args.partitions} partitions, written in {seconds:.1f}s", flush=True)

        n, seconds = python_decode_rate(data_dir)
        result.update(python_decode_seconds=round(seconds, 2), python_decode_rps=round(n / seconds))
        print(f"decode without Spark (1 process): {n / seconds:,.0f} records/s ({seconds:.1f}s)", flush=True)

        from groupd.analytics import pipeline, session

        start = time.monotonic()
        spark = session.build("local[2]", app_name="groupd-analytics-bench")
        result["spark_start_seconds"] = round(time.monotonic() - start, 2)
        try:
            for attempt in ("cold", "warm"):
                n, seconds = source_rate(spark, data_dir)
                assert n == written, (n, written)
                result[f"source_{attempt}_seconds"] = round(seconds, 2)
                result[f"source_{attempt}_rps"] = round(n / seconds)
                print(f"data source on local[2], {attempt}: {n / seconds:,.0f} records/s ({seconds:.1f}s)", flush=True)
            summary = pipeline.run(spark, data_dir, os.path.join(tmp, "tables-local"),
                                   progress=lambda line: print("  " + line, flush=True))
            result["pipeline_local_seconds"] = round(summary.seconds, 2)
            print(f"pipeline on local[2]: {summary.seconds:.1f}s", flush=True)
        finally:
            spark.stop()

        if args.standalone:
            cluster = Standalone(os.path.join(tmp, "standalone"))
            try:
                start = time.monotonic()
                cluster.start()
                result["standalone_start_seconds"] = round(time.monotonic() - start, 2)
                seconds, out = run_cli(data_dir, os.path.join(tmp, "tables-standalone"), cluster.url,
                                       ["spark.executor.memory=4g", "spark.sql.shuffle.partitions=8"])
            finally:
                cluster.stop()
            print("  " + out.strip().replace("\n", "\n  "), flush=True)
            result["standalone_cli_seconds"] = round(seconds, 2)
            print(f"pipeline CLI on {cluster.url} (1 worker, 2 cores): {seconds:.1f}s including Spark start-up",
                  flush=True)
    finally:
        if args.keep or args.data_dir:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
