"""Raw-protocol consumer-group member simulator (not a client library): one TCP connection per member.

    python bench/members.py heartbeat --port 9092 --members 1000 --groups 100 --seconds 5
    python bench/members.py heartbeat --port 9092 --raw            # no join: echo server
    python bench/members.py rebalance --port 9092 --members 100

Setup path (codec-built requests, one in flight per member): JoinGroup v5 (protocol type
"consumer", protocol "range", session 30 s, rebalance 60 s; MEMBER_ID_REQUIRED -> re-join with the
returned id), SyncGroup v3 (the leader assigns every member), then a heartbeat every 0.5 s until
every member of every group got error 0 at one generation (members told to rebalance re-join).

heartbeat: then every member's connection switches to loadgen.Conn with its own pre-encoded
Heartbeat v3 frame (correlation id spliced in), `--depth` in flight, measured like loadgen.

rebalance: one group; once Stable, the leader re-joins (the trigger), a follower heartbeats until
it sees REBALANCE_IN_PROGRESS, then every follower re-joins at once and every member syncs as soon
as its join reply arrives. Reported: last JoinGroup sent -> last SyncGroup reply received.

form: one group from scratch (server with group.initial.rebalance.delay.ms=0): every member joins
at once; reported: first JoinGroup sent -> last SyncGroup reply of the generation all settled in, the
server's and this process's CPU over that window (sampled every 5 ms) and the JoinGroups it took (2 per member when
every member made the first generation; members that joined after its join phase ended make a
second generation, which the first one's members learn of by heartbeat).
"""

import argparse
import asyncio
import collections
import datetime
import json
import os
import resource
import ssl
import struct
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.dirname(BENCH))  # the repo root: protocol.codec, protocol.consumer
import go_loadgen  # noqa: E402
import pinning  # noqa: E402
from echo_server import install_loop_policy  # noqa: E402
from kafka_requests import request_type  # noqa: E402
from loadgen import Conn, Stats, _proc_cpu_s  # noqa: E402

from groupd.coordinator.core.partitioning import partition_for  # noqa: E402
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request  # noqa: E402
from groupd.protocol.consumer import encode_assignment, encode_subscription  # noqa: E402

JOIN, SYNC, HEARTBEAT = 11, 14, 12  # api keys; versions 5, 3, 3 (none flexible)
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 79, 27, 22, 25
RETRIABLE = {14, 15, 16}  # coordinator loading / not available / not coordinator
SUBSCRIPTION = encode_subscription(["t"])
_i32 = struct.Struct(">i")
TALLY = collections.Counter()  # setup-path replies by (api, error code): reported on failure


class Link(asyncio.Protocol):
    """Setup-path connection: requests built with the codec, replies decoded and matched by id."""

    def __init__(self):
        self.buf, self.waiters, self.corr, self.transport = bytearray(), {}, 0, None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        for _, _, fut in self.waiters.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection lost"))
        self.waiters.clear()

    def data_received(self, data):
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:  # bounded: pos grows by >= 4 per frame
            (n,) = _i32.unpack_from(buf, pos)
            if len(buf) - pos - 4 < n:
                break
            frame = bytes(buf[pos + 4:pos + 4 + n])
            pos += 4 + n
            (corr,) = _i32.unpack_from(frame, 0)
            api_key, version, fut = self.waiters.pop(corr, (None, None, None))
            if fut is not None and not fut.done():
                try:
                    fut.set_result(decode_response(api_key, version, frame)[1])
                except Exception as e:  # noqa: BLE001  (an undecodable reply is a result too)
                    fut.set_exception(e)
        del buf[:pos]

    async def call(self, api_key, version, values, timeout):
        """Send one request; returns (decoded reply, perf_counter at write)."""
        self.corr += 1
        fut = asyncio.get_running_loop().create_future()
        self.waiters[self.corr] = (api_key, version, fut)
        frame = encode_request(RequestHeader(api_key, version, self.corr, "members"),
                               build_request(api_key, version, values))
        sent = time.perf_counter()
        self.transport.write(frame)
        return await asyncio.wait_for(fut, timeout), sent


class Member:
    def __init__(self, group_id, link):
        self.group_id, self.link = group_id, link
        self.member_id, self.generation, self.leader, self.peers = "", -1, False, ()
        self.ok_gen = None  # generation of the last heartbeat (or sync) that returned 0
        self.join_sent = self.sync_done = None  # perf_counter times of the last join/sync

    async def join(self, timeout=90.0):
        """JoinGroup v5; re-joins once with the id a MEMBER_ID_REQUIRED reply hands out."""
        for _ in range(3):
            r, self.join_sent = await self.link.call(JOIN, 5, {
                "group_id": self.group_id, "member_id": self.member_id, "protocol_type": "consumer",
                "session_timeout": datetime.timedelta(seconds=30),
                "rebalance_timeout": datetime.timedelta(seconds=60),
                "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]}, timeout)
            err = int(r.error_code)
            TALLY["join", err] += 1
            if err in (0, MEMBER_ID_REQUIRED):
                self.member_id = r.member_id
            if err != MEMBER_ID_REQUIRED:
                break
        if err == 0:
            self.generation, self.leader = int(r.generation_id), r.leader == r.member_id
            self.peers = tuple(m.member_id for m in r.members)
        elif err == UNKNOWN_MEMBER_ID:
            self.member_id = ""
        return err

    async def sync(self, timeout=90.0):
        assignments = [{"member_id": m, "assignment": encode_assignment({"t": [i]})}
                       for i, m in enumerate(self.peers)] if self.leader else []
        r, _ = await self.link.call(SYNC, 3, {"group_id": self.group_id, "generation_id": self.generation,
                                              "member_id": self.member_id, "assignments": assignments}, timeout)
        self.sync_done = time.perf_counter()
        TALLY["sync", int(r.error_code)] += 1
        return int(r.error_code)

    async def heartbeat(self, timeout=30.0):
        r, _ = await self.link.call(HEARTBEAT, 3, {"group_id": self.group_id, "generation_id": self.generation,
                                                   "member_id": self.member_id}, timeout)
        TALLY["heartbeat", int(r.error_code)] += 1
        return int(r.error_code)

    async def settle(self, deadline):
        """Join and sync until a sync succeeds; bounded by deadline (and 50 attempts)."""
        for _ in range(50):
            if time.monotonic() > deadline:
                break
            err = await self.join()
            if err == 0:
                err = await self.sync()
                if err == 0:
                    self.ok_gen = self.generation
                    return 0
            if err in RETRIABLE:
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.group_id}/{self.member_id}: no stable membership (last error {err})")


async def connect(n, port, gate=100, cafile=None):
    """`cafile`: connect with TLS, trusting that CA (the server's certificate names localhost).
    `port`: one port for every connection, or a list with each connection's."""
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(gate)  # a bounded number of concurrent connects, as loadgen
    tls = {"ssl": ssl.create_default_context(cafile=cafile), "server_hostname": "localhost"} if cafile else {}

    async def one(at):
        async with sem:
            return (await asyncio.wait_for(loop.create_connection(Link, "127.0.0.1", at, **tls), 10))[1]

    return await asyncio.gather(*(one(at) for at in (port if isinstance(port, list) else [port] * n)))


async def stabilize(members, timeout, heartbeat_s=0.5):
    """Settle every member, heartbeat every `heartbeat_s`, re-settle on a rebalance; returns when every
    group's members all had a clean heartbeat at one generation. Bounded by timeout."""
    deadline, stop = time.monotonic() + timeout, asyncio.Event()

    async def run(m):
        await m.settle(deadline)
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                await asyncio.wait_for(stop.wait(), heartbeat_s)
            except asyncio.TimeoutError:
                pass
            if stop.is_set():
                break
            err = await m.heartbeat()
            if err == 0:
                m.ok_gen = m.generation
            else:
                m.ok_gen = None
                if err in (UNKNOWN_MEMBER_ID,):
                    m.member_id = ""
                await m.settle(deadline)

    tasks = [asyncio.create_task(run(m)) for m in members]
    groups = {}
    for m in members:
        groups.setdefault(m.group_id, []).append(m)
    try:
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            for t in tasks:
                if t.done() and t.exception():
                    raise t.exception()
            if all(len({m.ok_gen for m in g}) == 1 and g[0].ok_gen is not None for g in groups.values()):
                return
        stable = sum(len({m.ok_gen for m in g}) == 1 and g[0].ok_gen is not None for g in groups.values())
        raise RuntimeError(f"{len(groups) - stable} of {len(groups)} groups not stable after {timeout:.0f} s;"
                           f" replies so far {tally()}")
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=35)  # in-flight heartbeats finish; nothing is parked
        for t in tasks:
            t.cancel()


def tally():
    return " ".join(f"{api}:{err}={n}" for (api, err), n in sorted(TALLY.items()))


def machine_busy_s():
    """Busy CPU seconds of the whole machine (all cores, all processes, softirq included)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait


def _server_cpu_s(pids):
    """CPU seconds of the server's processes (`--server-pid`: one pid, or a worker's each, comma-separated)."""
    if pids is None:
        return None
    seconds = [_proc_cpu_s(int(pid)) for pid in str(pids).split(",")]
    return None if None in seconds else sum(seconds)


def heartbeat_frame(m):
    """Heartbeat v3 body: group_id, generation_id, member_id, group_instance_id = null."""
    gid, mid = m.group_id.encode(), m.member_id.encode()
    body = struct.pack(">h", len(gid)) + gid + struct.pack(">ih", m.generation, len(mid)) + mid + b"\xff\xff"
    return request_type(HEARTBEAT, 3, body, flexible=False)


def hb_ok(buf, start, end):  # Heartbeat v3 reply: throttle_time_ms int32, error_code int16
    return end - start >= 6 and buf[start + 4] == 0 and buf[start + 5] == 0


async def closed_loop(links, frames, check, args):
    """Hand each link's socket to loadgen.Conn with its own pre-encoded frame (`args.depth` in flight),
    warm up, measure a window of `args.seconds` like loadgen; then let the in-flight replies arrive and
    give each socket back to its link. Returns the window's figures."""
    stats, conns = Stats(), []
    for link, frame in zip(links, frames):  # same socket, now driven by loadgen's closed-loop protocol
        c = Conn(frame, check, args.depth, stats)
        c.connection_made(link.transport)
        link.transport.set_protocol(c)
        conns.append(c)
    for c in conns:
        c.start()
    await asyncio.sleep(args.warmup)
    srv0, cpu0, t1 = _server_cpu_s(args.server_pid), time.process_time(), time.perf_counter()
    all0 = machine_busy_s()
    stats.recording = True
    await asyncio.sleep(args.seconds)
    stats.recording = False
    elapsed, cpu = time.perf_counter() - t1, time.process_time() - cpu0
    srv1, all1 = _server_cpu_s(args.server_pid), machine_busy_s()
    for c in conns:
        c.running = False
    deadline = time.monotonic() + 10
    while any(c.pending and not c.closed.done() for c in conns) and time.monotonic() < deadline:  # bounded
        await asyncio.sleep(0.01)
    for link in links:
        link.transport.set_protocol(link)
    lat = sorted(stats.lat)

    def pct(q):
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] / 1000, 1) if lat else None

    return {"depth": args.depth, "seconds": round(elapsed, 2), "hb_per_s": round(stats.done / elapsed),
            "p50_us": pct(0.5), "p99_us": pct(0.99), "errors": stats.errors,
            "client_cpu_pct": round(100 * cpu / elapsed),
            "machine_cpu_pct": round(100 * (all1 - all0) / elapsed),  # up to 100 x cores
            "server_cpu_pct": round(100 * (srv1 - srv0) / elapsed) if srv0 is not None and srv1 is not None else None}


async def run_heartbeat(args):
    groups = [f"{args.group_prefix}-{i % args.groups}" for i in range(args.members)]
    # `groupd serve --workers N`: each member at the worker that coordinates its group (port + index)
    ports = [args.port + partition_for(g, 50) % args.workers for g in groups]
    links = await connect(args.members, ports, cafile=args.tls)
    members = [Member(g, link) for g, link in zip(groups, links)]
    t0 = time.perf_counter()
    if args.raw:  # echo server: no membership; the reply is not checked, only counted
        for i, m in enumerate(members):
            m.member_id, m.generation = f"raw-{i}", 1
    else:
        await stabilize(members, args.setup_timeout)
    setup_s = time.perf_counter() - t0
    if args.driver == "go":  # the compiled driver, on connections of its own (a heartbeat names its member)
        r = await asyncio.to_thread(_go_heartbeats, members, ports, args)
    else:
        r = await closed_loop(links, [heartbeat_frame(m) for m in members], (lambda *a: True) if args.raw else hb_ok,
                              args)
    for link in links:
        link.transport.close()
    return {"members": args.members, "groups": args.groups, "raw": args.raw, "setup_s": round(setup_s, 2), **r}


def _go_heartbeats(members, ports, args) -> dict:
    r = go_loadgen.run([(port, heartbeat_frame(m)(0)) for m, port in zip(members, ports)], args.depth, args.warmup,
                       args.seconds, -1 if args.raw else 4,  # Heartbeat v3: throttle_time_ms, then error_code
                       str(args.server_pid).split(",") if args.server_pid else ())
    return {"depth": args.depth, "seconds": r["seconds"], "hb_per_s": r["req_per_s"], "p50_us": r["p50_us"],
            "p99_us": r["p99_us"], "errors": r["errors"], "client_cpu_pct": r["client_cpu_pct"],
            "machine_cpu_pct": None, "server_cpu_pct": r["server_cpu_pct"]}


async def run_rebalance(args):
    links = await connect(args.members, args.port, cafile=args.tls)
    group = f"bench-rb-{args.members}-{os.getpid()}"
    members = [Member(group, link) for link in links]
    t0 = time.perf_counter()
    await stabilize(members, args.setup_timeout)
    setup_s, first_gen = time.perf_counter() - t0, members[0].generation
    leader = next(m for m in members if m.leader)
    followers = [m for m in members if m is not leader]

    async def rejoin(m):
        err = await m.join()
        if err == 0:
            err = await m.sync()
        return err

    setup_replies = tally()
    TALLY.clear()  # from here: the measured rebalance's replies only
    leader_task = asyncio.create_task(rejoin(leader))  # the trigger
    probes, seen = 0, None
    if followers:  # wait until the server is rebalancing, else a follower's join is a no-op
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and seen != REBALANCE_IN_PROGRESS:  # bounded: 5 s
            seen = await followers[0].heartbeat()
            probes += 1
            if seen != REBALANCE_IN_PROGRESS:
                await asyncio.sleep(0.005)
    errors = await asyncio.gather(leader_task, *(rejoin(m) for m in followers), return_exceptions=True)
    last_join = max(m.join_sent for m in members)
    last_sync = max(m.sync_done or 0 for m in members)
    bad = [e for e in errors if e != 0]
    return {"members": args.members, "group": group, "setup_s": round(setup_s, 2),
            "setup_generation": first_gen, "generation": leader.generation, "probe_heartbeats": probes,
            "probe_error": seen, "errors": len(bad), "error_sample": repr(bad[:3]) if bad else None,
            "sim_ms": round(1000 * (last_sync - last_join), 1),
            "sim_from_trigger_ms": round(1000 * (last_sync - leader.join_sent), 1),
            "setup_replies": setup_replies, "replies": tally()}


async def run_form(args):
    """One group formed from scratch: every member sends JoinGroup at once (re-joining with the id
    MEMBER_ID_REQUIRED hands out), syncs as soon as its join is answered and re-joins when told to
    rebalance; members heartbeat every `--heartbeat-ms` once synced (how a member that synced an
    older generation learns of the next). Run against a server with group.initial.rebalance.delay.ms=0.
    form_ms: first JoinGroup sent -> the last member's SyncGroup reply of the generation all settled in."""
    links = await connect(args.members, args.port, cafile=args.tls)
    group = f"bench-form-{args.members}-{os.getpid()}"
    members = [Member(group, link) for link in links]
    samples = []  # (perf_counter, server CPU s, own CPU s) every 5 ms: CPU up to the last sync reply
    sampler = asyncio.create_task(_sample_server_cpu(args.server_pid, samples)) if args.server_pid else None
    await asyncio.sleep(0.02)  # a first sample before the first join
    t0 = time.perf_counter()
    await stabilize(members, args.setup_timeout, heartbeat_s=args.heartbeat_ms / 1000)
    last_sync = max(m.sync_done for m in members)
    cpu_ms = client_ms = None
    if sampler is not None:
        sampler.cancel()
        before = [s for s in samples if s[0] <= t0]
        after = [s for s in samples if s[0] >= last_sync]
        if before and after:  # sampled within 5 ms of either end
            cpu_ms = round(1000 * (after[0][1] - before[-1][1]), 1)
            client_ms = round(1000 * (after[0][2] - before[-1][2]), 1)
    return {"members": args.members, "group": group, "generation": members[0].generation,
            "form_ms": round(1000 * (last_sync - t0), 1), "server_cpu_ms": cpu_ms, "client_cpu_ms": client_ms,
            "joins": sum(n for (api, err), n in TALLY.items() if api == "join"), "replies": tally()}


async def _sample_server_cpu(pids, samples):
    while True:
        samples.append((time.perf_counter(), _server_cpu_s(pids), time.process_time()))
        await asyncio.sleep(0.005)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("heartbeat", "rebalance", "form"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100, help="heartbeat: members are spread over these")
    ap.add_argument("--depth", type=int, default=1, help="heartbeat: requests in flight per member")
    ap.add_argument("--seconds", type=float, default=5.0, help="heartbeat: measured window")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--raw", action="store_true", help="heartbeat: skip join/sync, do not check replies")
    ap.add_argument("--group-prefix", default="bench-hb",
                    help="heartbeat: group names (a server that outlives the run needs new ones each run)")
    ap.add_argument("--setup-timeout", type=float, default=120.0, help="joining until Stable, s")
    ap.add_argument("--heartbeat-ms", type=float, default=100.0, help="form: heartbeat interval once synced")
    ap.add_argument("--server-pid", help="the server's pid (workers: each worker's, comma-separated), for its CPU use")
    ap.add_argument("--workers", type=int, default=1, help="heartbeat: the server runs this many workers "
                    "(groupd serve --workers N: ports port..port+N-1)")
    ap.add_argument("--tls", metavar="CAFILE", help="connect over TLS, trusting this CA (an SSL listener)")
    ap.add_argument("--driver", choices=("python", "go"), default="python",
                    help="heartbeat: the closed loop in this process, or compiled (bench/loadgen-go; plaintext)")
    args = ap.parse_args()
    run_main({"heartbeat": run_heartbeat, "rebalance": run_rebalance, "form": run_form}[args.mode], args)


def run_main(run, args):
    """Raise the fd limit, pick the loop, run `run(args)` and print its result as one JSON line."""
    pinning.pin_client()  # run_groups.py --pin: this process and the compiled driver it starts
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 1000 connections need > 1024 fds
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop_name = install_loop_policy()
    print(json.dumps(dict(asyncio.run(run(args)), loop=loop_name), default=str), flush=True)


if __name__ == "__main__":
    main()
