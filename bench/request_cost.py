"""CPU per request of groupd's hot paths, in process and without sockets: a real `Connection`, `Node`
and runtime on a loop, fed pre-encoded frames through `data_received` with a transport that only
counts what is written. What the load benches cannot show on a shared machine: the figure barely
moves with the load of other processes (the syscalls and the client are not in it).

    python bench/request_cost.py                       # heartbeats (classic, consumer), commits (interval, fsync)
    python bench/request_cost.py --only heartbeat -n 200000
    python bench/request_cost.py --only join --only sync -n 1000   # a 1,000-member group formed, each run
    python bench/request_cost.py --only heartbeat --set native.heartbeat.enable=false   # the Python path
    valgrind --tool=callgrind python bench/request_cost.py --only heartbeat -n 20000   # instruction counts
    valgrind --tool=callgrind --toggle-collect=functools_reduce python bench/request_cost.py --only heartbeat \
        -n 8000 --repeat 1 --callgrind          # instructions of the heartbeats alone (÷ n)

heartbeat: 100 members of one group (joined and synced through the same connection path), each
sending Heartbeat v3 in turn; a reply is checked for error 0. consumer-heartbeat: 100 members of one
consumer group (joined, their assignments acknowledged until nothing changes), each sending its
steady ConsumerGroupHeartbeat v1 (epoch, every other field null) in turn. commit: OffsetCommit v8 of one
partition by 100 groups in turn (generation -1), `log.flush.interval.ms` 1000 (written, no fsync)
or 0 (each loop turn's batch fsynced): the loop turns until every reply is out, as a server does.
join, sync: one classic group of `-n` members formed from scratch (initial rebalance delay 0), each
member on a `Connection` of its own as in `members.py form`: every member's JoinGroup v5 with no id
(MEMBER_ID_REQUIRED), then every re-join with its id in one loop turn (parked; the join timer
completes the generation on a later turn and the leader's reply lists every member), then every
SyncGroup v3 (the leader's assigns each member a partition; the GroupMetadata write is fsynced, the
default flush policy) until each reply is out. join prints the first and the second JoinGroup's CPU
per request, sync the SyncGroup's, each with the formation's CPU in total (ms).
produce: Produce v9 acks=all of one batch of 16 KB of 100-byte values (as bench/records_bench.py
sends, no producer id) to the disk records plane, 100 requests a loop turn over 4 partitions (as
from 100 producers), `log.flush.interval.ms` 1000 or 0 (produce-fsync: acks=all waits for the fsync).
Printed: µs of process CPU (user + system, every thread) per request, median of `--repeat` runs
(produce: also CPU ms per MB of values).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.modules.setdefault("hypothesis", None)  # as coordinator/__main__.py: kio's strategies are not needed

from groupd.coordinator.security.listeners import endpoints  # noqa: E402
from groupd.coordinator.server.connection import Connection, RequestMemory  # noqa: E402
from groupd.coordinator.server.node import Node  # noqa: E402
from groupd.coordinator.settings import Settings  # noqa: E402
from groupd.protocol.apis import ApiKey  # noqa: E402
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request  # noqa: E402
from groupd.protocol.consumer import encode_assignment, encode_subscription  # noqa: E402

_SIZE = struct.Struct(">i")
IN_REDUCE = False  # --callgrind


class CountingTransport(asyncio.Transport):
    """Counts reply frames and keeps the last write (all of them while `kept` is a list); never pauses."""

    def __init__(self, on_replies=None) -> None:
        super().__init__()
        self.replies = 0
        self.last = b""
        self.kept: list[bytes] | None = None
        self.on_replies = on_replies  # called with the number of reply frames of each write
        self.waiter: tuple[int, asyncio.Future] | None = None  # (replies, set when that many are out)

    def write(self, data) -> None:
        self.last = data = bytes(data)
        at = count = 0
        while at < len(data):  # a write holds every reply ready at the head of the queue
            count += 1
            at += 4 + _SIZE.unpack_from(data, at)[0]
        self.replies += count
        if self.kept is not None:
            self.kept.append(self.last)
        if self.on_replies is not None:
            self.on_replies(count)
        if self.waiter is not None and self.replies >= self.waiter[0] and not self.waiter[1].done():
            self.waiter[1].set_result(None)

    async def replied(self, count: int, timeout: float = 30.0) -> None:
        """Until `count` replies are out, without spinning the loop (its CPU would count as the server's)."""
        if self.replies < count:
            self.waiter = (count, asyncio.get_running_loop().create_future())
            await asyncio.wait_for(self.waiter[1], timeout)

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def frame(api_key: int, version: int, correlation_id: int, values: dict) -> bytes:
    return encode_request(RequestHeader(api_key, version, correlation_id, "cost"), build_request(api_key, version, values))


async def until(predicate, timeout: float = 300.0) -> None:  # generous: valgrind, a loaded machine
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("no reply")
        await asyncio.sleep(0)


class Harness:
    def __init__(self, data_dir: str, flush_ms: int, extra: list[str]) -> None:
        self.settings = Settings.load(env={}, overrides=[
            "listeners=PLAINTEXT://127.0.0.1:9", f"data.dir={data_dir}", "metrics.listener=",
            "group.initial.rebalance.delay.ms=0", "topics=t:8", f"log.flush.interval.ms={flush_ms}", "log.level=warning",
            *extra])
        self.node = Node(self.settings)
        self.transport = CountingTransport()
        self.memory = RequestMemory(self.settings.queued_max_request_bytes)
        self.conn = Connection(self.node, set(), self.memory, endpoints(self.settings)[0])
        self.conn.connection_made(self.transport)

    async def start(self) -> None:
        self.node.coordinator.start()
        await until(lambda: all(s.value == "active" for s in self.node.coordinator.states))

    async def close(self) -> None:
        self.conn.connection_lost(None)
        await self.node.coordinator.close()
        self.node.close()


def cpu() -> float:
    return time.process_time()  # every thread's user + system time, at clock resolution


def join_values(member_id: str) -> dict:
    return {"group_id": "cost-hb", "member_id": member_id, "protocol_type": "consumer",
            "session_timeout": datetime.timedelta(seconds=30), "rebalance_timeout": datetime.timedelta(seconds=60),
            "group_instance_id": None, "protocols": [{"name": "range", "metadata": encode_subscription(["t"])}]}


def split_frames(data: bytes) -> list[bytes]:
    out = []
    while len(data) >= 4:
        (size,) = _SIZE.unpack_from(data)
        out.append(data[4:4 + size])
        data = data[4 + size:]
    return out


async def round_trip(h: Harness, api_key: int, version: int, requests: list[dict]) -> list:
    """Send `requests` in one read; their replies, decoded, in order."""
    h.transport.kept = kept = []
    h.conn.data_received(b"".join(frame(api_key, version, i, v) for i, v in enumerate(requests)))
    await until(lambda: len(split_frames(b"".join(kept))) >= len(requests))
    h.transport.kept = None
    return [decode_response(api_key, version, f)[1] for f in split_frames(b"".join(kept))]


async def heartbeat_cost(h: Harness, n: int, members: int = 100) -> float:
    # MEMBER_ID_REQUIRED hands out the ids; the joins with them arrive in one read, before the
    # (zero) initial delay ends, so one generation holds every member
    ids = [r.member_id for r in await round_trip(h, ApiKey.JOIN_GROUP, 5, [join_values("")] * members)]
    joined = await round_trip(h, ApiKey.JOIN_GROUP, 5, [join_values(m) for m in ids])
    generation, leader = joined[0].generation_id, joined[0].leader
    assert all(r.error_code == 0 and r.generation_id == generation for r in joined), joined[:3]
    (r,) = await round_trip(h, ApiKey.SYNC_GROUP, 3, [{"group_id": "cost-hb", "generation_id": generation,
                                                      "member_id": leader, "group_instance_id": None,
                                                      "assignments": [{"member_id": m, "assignment": b""}
                                                                      for m in ids]}])
    assert r.error_code == 0, r
    frames = [frame(ApiKey.HEARTBEAT, 3, i, {"group_id": "cost-hb", "generation_id": generation, "member_id": m,
                                             "group_instance_id": None}) for i, m in enumerate(ids)]
    conn, transport = h.conn, h.transport
    before = transport.replies
    t0 = cpu()
    if IN_REDUCE:  # the loop inside one C call: callgrind --toggle-collect=functools_reduce counts only it
        functools.reduce(lambda _, f: conn.data_received(f), (frames[i % members] for i in range(n)), None)
    else:
        for i in range(n):
            conn.data_received(frames[i % members])
    used = cpu() - t0
    assert transport.replies == before + n
    assert decode_response(ApiKey.HEARTBEAT, 3, split_frames(transport.last)[-1])[1].error_code == 0
    return used / n * 1e6


def consumer_values(member_id: str, epoch: int, **changed) -> dict:
    """ConsumerGroupHeartbeat v1 that changes nothing (as a Java client's steady heartbeat), plus `changed`."""
    return {"group_id": "cost-cg", "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=-1),
            "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": None, **changed}


async def consumer_heartbeat_cost(h: Harness, n: int, members: int = 100) -> float:
    # every member joins in one read, then acknowledges what it was given until nothing changes
    ids = [str(uuid.UUID(int=i + 1)) for i in range(members)]
    replies = await round_trip(h, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, [consumer_values(
        m, 0, subscribed_topic_names=["t"], rebalance_timeout=datetime.timedelta(seconds=60), topic_partitions=[])
        for m in ids])
    for _ in range(50):
        assert all(r.error_code == 0 for r in replies), replies[:3]
        owned = [None if r.assignment is None else
                 [{"topic_id": tp.topic_id, "partitions": tp.partitions} for tp in r.assignment.topic_partitions]
                 for r in replies]
        if all(o is None for o in owned) and len({r.member_epoch for r in replies}) == 1:
            break
        replies = await round_trip(h, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, [consumer_values(
            m, r.member_epoch, topic_partitions=o) for m, r, o in zip(ids, replies, owned)])
    else:
        raise RuntimeError("the consumer group did not settle")
    epoch = replies[0].member_epoch
    frames = [frame(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, i, consumer_values(m, epoch)) for i, m in enumerate(ids)]
    conn, transport = h.conn, h.transport
    before = transport.replies
    t0 = cpu()
    if IN_REDUCE:  # as heartbeat_cost: callgrind --toggle-collect=functools_reduce counts only this loop
        functools.reduce(lambda _, f: conn.data_received(f), (frames[i % members] for i in range(n)), None)
    else:
        for i in range(n):
            conn.data_received(frames[i % members])
    used = cpu() - t0
    assert transport.replies == before + n
    r = decode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, split_frames(transport.last)[-1])[1]
    assert r.error_code == 0 and r.member_epoch == epoch and r.assignment is None, r
    return used / n * 1e6


async def commit_cost(h: Harness, n: int, groups: int = 100) -> float:
    frames = [frame(ApiKey.OFFSET_COMMIT, 8, i, {
        "group_id": f"cost-commit-{i}", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                                                  "committed_metadata": ""}]}]}) for i in range(groups)]
    conn, transport = h.conn, h.transport
    for f in frames:  # warm: each group's first commit
        conn.data_received(f)
    await until(lambda: transport.replies >= groups)
    before = transport.replies
    t0 = cpu()
    sent = 0
    while sent < n:  # a round of `groups` commits per loop turn, as from `groups` connections
        for f in frames:
            conn.data_received(f)
        sent += groups
        await until(lambda: transport.replies >= before + sent)
    used = cpu() - t0
    r = decode_response(ApiKey.OFFSET_COMMIT, 8, split_frames(transport.last)[-1])[1]
    assert all(p.error_code == 0 for t in r.topics for p in t.partitions), r
    return used / sent * 1e6


async def formation_cost(h: Harness, n: int) -> dict[str, float]:
    """CPU of one group of `n` members formed from scratch, a connection per member: per request of
    each phase (µs) and in total (ms). The waits for parked replies (the join timer, the fsync) are
    on a future, not a polling loop, so the CPU is the server's alone."""
    loop = asyncio.get_running_loop()
    wanted = {"left": 0, "done": loop.create_future()}

    def on_replies(count: int) -> None:
        wanted["left"] -= count
        if wanted["left"] <= 0 and not wanted["done"].done():
            wanted["done"].set_result(None)

    conns = []
    for i in range(n):
        transport = CountingTransport(on_replies)
        conn = Connection(h.node, set(), h.memory, endpoints(h.settings)[0])
        conn.connection_made(transport)
        conns.append((conn, transport))

    def join_frame(i: int, member_id: str) -> bytes:
        values = {**join_values(member_id), "group_id": "cost-form"}
        return encode_request(RequestHeader(ApiKey.JOIN_GROUP, 5, i, "consumer-cost-form-1"),
                              build_request(ApiKey.JOIN_GROUP, 5, values))

    def replies(api_key: int, version: int) -> list:
        return [decode_response(api_key, version, split_frames(t.last)[-1])[1] for _, t in conns]

    async def send_all(frames: list[bytes], answered: int) -> float:
        wanted["left"], wanted["done"] = len(frames), loop.create_future()
        t0 = cpu()
        for (conn, _), f in zip(conns, frames):
            conn.data_received(f)
        await asyncio.wait_for(wanted["done"], 60)
        used = cpu() - t0
        assert all(t.replies == answered for _, t in conns)
        return used

    first = await send_all([join_frame(i, "") for i in range(n)], 1)
    ids = [r.member_id for r in replies(ApiKey.JOIN_GROUP, 5)]
    assert all(r.error_code == 79 for r in replies(ApiKey.JOIN_GROUP, 5))  # MEMBER_ID_REQUIRED
    second = await send_all([join_frame(i, m) for i, m in enumerate(ids)], 2)
    joined = replies(ApiKey.JOIN_GROUP, 5)
    generation, leader = joined[0].generation_id, joined[0].leader
    assert all(r.error_code == 0 and r.generation_id == generation for r in joined), joined[:3]
    assert len(next(r for r in joined if r.member_id == leader).members) == n
    assignments = [{"member_id": m, "assignment": encode_assignment({"t": [i]})} for i, m in enumerate(ids)]
    syncs = [frame(ApiKey.SYNC_GROUP, 3, i, {
        "group_id": "cost-form", "generation_id": generation, "member_id": m, "group_instance_id": None,
        "assignments": assignments if m == leader else []}) for i, m in enumerate(ids)]
    third = await send_all(syncs, 3)
    assert all(r.error_code == 0 and r.assignment for r in replies(ApiKey.SYNC_GROUP, 3))
    for conn, _ in conns:
        conn.connection_lost(None)
    return {"join-new": first / n * 1e6, "join": second / n * 1e6, "sync": third / n * 1e6,
            "formation": (first + second + third) * 1e3}


PRODUCE_PARTITIONS, PRODUCE_VALUES = 4, 16 * 1024 // 100  # 163 values of 100 bytes a request


def produce_frames(acks: int = -1, version: int = 9) -> list[bytes]:
    """One Produce frame per partition of topic t, each one batch of PRODUCE_VALUES 100-byte values."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    value, now = os.urandom(100), int(time.time() * 1000)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(PRODUCE_VALUES):
        b.append(i, timestamp=now, key=None, value=value, headers=[])
    records = bytes(b.build())
    return [frame(ApiKey.PRODUCE, version, p, {
        "transactional_id": None, "acks": acks, "timeout": datetime.timedelta(seconds=30), "topic_data": [
            {"name": "t", "partition_data": [{"index": p, "records": records}]}]}) for p in range(PRODUCE_PARTITIONS)]


async def produce_cost(h: Harness, n: int, producers: int = 100) -> float:
    frames = produce_frames()
    conn, transport = h.conn, h.transport
    for f in frames:  # warm: each partition opened
        conn.data_received(f)
    await until(lambda: transport.replies >= len(frames))
    before = transport.replies
    t0 = cpu()
    sent = 0
    while sent < n:  # `producers` requests a loop turn, one in flight each, until every reply is out
        for i in range(producers):
            conn.data_received(frames[i % len(frames)])
        sent += producers
        await transport.replied(before + sent)
    used = cpu() - t0
    r = decode_response(ApiKey.PRODUCE, 9, split_frames(transport.last)[-1])[1]
    assert all(p.error_code == 0 for t in r.responses for p in t.partition_responses), r
    return used / sent * 1e6


async def one(kind: str, n: int, extra: list[str]):
    data_dir = tempfile.mkdtemp(prefix="request-cost-")
    try:
        h = Harness(data_dir, 0 if kind in ("commit-fsync", "produce-fsync", "join", "sync") else 1000, extra)
        await h.start()
        try:
            cost = {"heartbeat": heartbeat_cost, "consumer-heartbeat": consumer_heartbeat_cost,
                    "produce": produce_cost, "produce-fsync": produce_cost,
                    "join": formation_cost, "sync": formation_cost}.get(kind, commit_cost)
            return await cost(h, n)
        finally:
            await h.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


KINDS = ["heartbeat", "consumer-heartbeat", "commit", "commit-fsync", "produce", "produce-fsync", "join", "sync"]
SHORT = ("commit-fsync", "produce", "produce-fsync")  # -n / 10: a tenth of the requests
PHASES = {"join": ("join-new", "join"), "sync": ("sync",)}  # what each formation kind prints


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=KINDS, action="append")
    ap.add_argument("-n", type=int, help="requests per run, 50,000 unless given (commit-fsync, produce: a "
                    "tenth); join, sync: the group's members, 1,000 unless given")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of the server under test, e.g. native.heartbeat.enable=false (the Python path)")
    ap.add_argument("--callgrind", action="store_true",
                    help="heartbeat, consumer-heartbeat: run the measured loop inside functools.reduce (one C function), so that "
                         "valgrind --tool=callgrind --toggle-collect=functools_reduce counts the heartbeats only")
    args = ap.parse_args()
    global IN_REDUCE
    IN_REDUCE = args.callgrind
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    for kind in args.only or KINDS:
        n = args.n or (1000 if kind in PHASES else 50_000)
        n = n // 10 if kind in SHORT else n
        if kind in PHASES:
            forms = [run(one(kind, n, args.set)) for _ in range(args.repeat)]
            for phase in (*PHASES[kind], "formation"):
                runs = sorted(f[phase] for f in forms)
                unit = "CPU ms in all" if phase == "formation" else "CPU µs/request"
                print(f"{phase:13} {statistics.median(runs):6.1f} {unit} (runs: {', '.join(f'{r:.1f}' for r in runs)}; "
                      f"{n:,} members)", flush=True)
            continue
        runs = sorted(run(one(kind, n, args.set)) for _ in range(args.repeat))
        per_mb = f", {statistics.median(runs) * 1e-3 / (PRODUCE_VALUES * 100 / 1e6):.2f} CPU ms/MB of values" \
            if kind.startswith("produce") else ""
        print(f"{kind:13} {statistics.median(runs):6.1f} CPU µs/request{per_mb} (runs: "
              f"{', '.join(f'{r:.1f}' for r in runs)}; {n:,} requests each)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
