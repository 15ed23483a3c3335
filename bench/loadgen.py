"""Raw Kafka-protocol load generator: N connections, D requests in flight on each.

    python bench/loadgen.py --port 9092 --connections 100 --depth 1 --seconds 10 --warmup 2

Each connection keeps exactly D requests outstanding (D=1 is a closed loop), so the offered load
follows the server. Latency is perf_counter_ns at write -> at the read that completes the response.
Only responses received inside the measured window count. Host is always 127.0.0.1.
"""

import argparse
import asyncio
import collections
import json
import multiprocessing
import os
import resource
import struct
import sys
import time
from array import array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import go_loadgen  # noqa: E402
import pinning  # noqa: E402
from echo_server import install_loop_policy  # noqa: E402  (one place picks the loop)
from kafka_requests import CHECK_OFFSETS, REQUESTS  # noqa: E402

_i32 = struct.Struct(">i")


class Stats:
    recording = False
    done = 0  # responses received inside the window
    errors = 0  # wrong correlation id, error_code != 0, failed or lost connections

    def __init__(self):
        self.lat = []  # ns, responses inside the window


class Conn(asyncio.Protocol):
    def __init__(self, encode, check, depth, stats):
        self.encode, self.check, self.depth, self.stats = encode, check, depth, stats
        self.pending = collections.deque()  # (corr_id, t_send_ns) in send order
        self.buf, self.next_corr, self.running, self.transport = bytearray(), 0, False, None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        if self.running:
            self.stats.errors += 1
        if not self.closed.done():
            self.closed.set_result(None)

    def start(self):
        self.running = True
        self._send(self.depth)

    def _send(self, k):
        frames, corrs, corr = [], [], self.next_corr
        for _ in range(k):
            frames.append(self.encode(corr))
            corrs.append(corr)
            corr = (corr + 1) & 0x7FFFFFFF
        self.next_corr = corr
        data = b"".join(frames)  # one write for the whole batch
        t = time.perf_counter_ns()  # taken after encoding, right before the write
        self.pending.extend([(c, t) for c in corrs])
        self.transport.write(data)

    def data_received(self, data):
        now = time.perf_counter_ns()
        buf = self.buf
        buf += data
        pos, end, got = 0, len(buf), 0
        st, pend = self.stats, self.pending
        while end - pos >= 4:  # bounded: pos grows by >= 8 per frame
            (n,) = _i32.unpack_from(buf, pos)
            if n < 4:  # cannot hold a correlation id: protocol error, drop the link
                st.errors += 1
                self.transport.close()
                return
            if end - pos - 4 < n:
                break
            (corr,) = _i32.unpack_from(buf, pos + 4)
            sent_corr, t0 = pend.popleft() if pend else (-1, now)
            if corr != sent_corr or not self.check(buf, pos + 8, pos + 4 + n):
                st.errors += 1
            if st.recording:
                st.done += 1
                st.lat.append(now - t0)
            pos += 4 + n
            got += 1
        if pos:
            del buf[:pos]
        if got and self.running:
            self._send(got)  # keep exactly `depth` requests in flight


def _proc_cpu_s(pid):
    """CPU seconds (user+sys) of another process from /proc; None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


async def run_worker(args, conns, barrier=None):
    encode, check = REQUESTS[args.request]
    loop = asyncio.get_running_loop()
    stats = Stats()
    gate = asyncio.Semaphore(100)  # limit concurrent connects so the listen backlog keeps up

    async def connect():
        async with gate:
            try:
                _, proto = await asyncio.wait_for(loop.create_connection(
                    lambda: Conn(encode, check, args.depth, stats), "127.0.0.1", args.port), 10)
                return proto
            except (OSError, asyncio.TimeoutError):
                stats.errors += 1
                return None

    protos = [p for p in await asyncio.gather(*(connect() for _ in range(conns))) if p]
    if barrier is not None:
        barrier.wait(60)  # all processes connected; start traffic together (loop idle here)
    for p in protos:
        p.start()
    await asyncio.sleep(args.warmup)
    srv0, cpu0, t0 = _proc_cpu_s(args.server_pid), time.process_time(), time.perf_counter()
    stats.recording = True
    await asyncio.sleep(args.seconds)
    stats.recording = False
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    srv1 = _proc_cpu_s(args.server_pid)
    for p in protos:
        p.running = False
        p.transport.close()
    if protos:
        await asyncio.wait([p.closed for p in protos], timeout=5)
    return {"done": stats.done, "errors": stats.errors, "elapsed": elapsed, "cpu": cpu,
            "srv_cpu": srv1 - srv0 if srv0 is not None and srv1 is not None else None,
            "lat": array("q", stats.lat).tobytes()}


def _child(q, barrier, args, conns):
    install_loop_policy()
    q.put(asyncio.run(run_worker(args, conns, barrier)))


def run(args) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 1000 conns need > 1024 fds
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.driver == "go":
        encode = REQUESTS[args.request][0]
        r = go_loadgen.run([(args.port, encode(0))] * args.connections, args.depth, args.warmup, args.seconds,
                           CHECK_OFFSETS[args.request], [args.server_pid] if args.server_pid else ())
        return {"request": args.request, "connections": args.connections, "depth": args.depth, "procs": 1,
                "loop": "go", "seconds": r["seconds"], "rps": r["req_per_s"], "p50_us": r["p50_us"],
                "p99_us": r["p99_us"], "p999_us": r["p999_us"], "errors": r["errors"],
                "client_cpu_pct": r["client_cpu_pct"], "server_cpu_pct": r["server_cpu_pct"]}
    procs = max(1, min(args.procs, args.connections))
    loop_name = install_loop_policy()
    if procs == 1:
        results = [asyncio.run(run_worker(args, args.connections))]
    else:  # fork before any loop exists; each child runs its own share of the connections
        ctx = multiprocessing.get_context("fork")
        q, barrier = ctx.Queue(), ctx.Barrier(procs)
        split = [args.connections // procs + (i < args.connections % procs) for i in range(procs)]
        children = [ctx.Process(target=_child, args=(q, barrier, args, n)) for n in split]
        for c in children:
            c.start()
        limit = 60 + args.warmup + args.seconds + 30
        results = [q.get(timeout=limit) for _ in children]  # read before join: big payloads
        for c in children:
            c.join(10)
    lat = array("q")
    for r in results:
        lat.frombytes(r["lat"])
    lat = sorted(lat)
    elapsed = max(r["elapsed"] for r in results)

    def pct(q):
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] / 1000, 1) if lat else None

    srv = results[0]["srv_cpu"]
    return {"request": args.request, "connections": args.connections, "depth": args.depth,
            "procs": procs, "loop": loop_name, "seconds": round(elapsed, 2),
            "rps": round(sum(r["done"] for r in results) / elapsed), "p50_us": pct(0.50),
            "p99_us": pct(0.99), "p999_us": pct(0.999), "errors": sum(r["errors"] for r in results),
            # CPU use in the window as % of one core: shows which side is the bottleneck.
            "client_cpu_pct": round(100 * sum(r["cpu"] for r in results) / elapsed),
            "server_cpu_pct": round(100 * srv / elapsed) if srv is not None else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--connections", "-c", type=int, default=1)
    ap.add_argument("--depth", "-d", type=int, default=1, help="requests in flight per connection")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured window")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--procs", type=int, default=1, help="client processes (2 cores in total!)")
    ap.add_argument("--request", choices=sorted(REQUESTS), default="apiversions")
    ap.add_argument("--driver", choices=("python", "go"), default="python",
                    help="the client side: this process's asyncio loop, or the compiled one (bench/loadgen-go)")
    ap.add_argument("--server-pid", type=int, help="also report this process's CPU use (Linux)")
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    args = ap.parse_args()
    pinning.pin_client()  # run_apiversions.py / run_groups.py --pin
    r = run(args)
    if args.json:
        return print(json.dumps(r), flush=True)
    print(f"{r['request']} c={r['connections']} d={r['depth']} procs={r['procs']} loop={r['loop']}"
          f" window={r['seconds']}s: {r['rps']} req/s  p50={r['p50_us']}us  p99={r['p99_us']}us"
          f"  p99.9={r['p999_us']}us  errors={r['errors']}  cpu: client={r['client_cpu_pct']}%"
          f" server={r['server_cpu_pct']}%")


if __name__ == "__main__":
    main()
