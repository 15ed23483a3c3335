"""CPU per request of groupd's hot paths, in process and without sockets: a real `Connection`, `Node`
and runtime on a loop, fed pre-encoded frames through `data_received` with a transport that only
counts what is written. What the load benches cannot show on a shared machine: the figure barely
moves with the load of other processes (the syscalls and the client are not in it).

    python bench/request_cost.py                       # heartbeats (classic, consumer), commits (interval, fsync)
    python bench/request_cost.py --only heartbeat -n 200000
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
Printed: µs of process CPU (user + system, every thread) per request, median of `--repeat` runs.
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
from groupd.protocol.consumer import encode_subscription  # noqa: E402

_SIZE = struct.Struct(">i")
IN_REDUCE = False  # --callgrind


class CountingTransport(asyncio.Transport):
    """Counts reply frames and keeps the last write (all of them while `kept` is a list); never pauses."""

    def __init__(self) -> None:
        super().__init__()
        self.replies = 0
        self.last = b""
        self.kept: list[bytes] | None = None

    def write(self, data) -> None:
        self.last = data = bytes(data)
        at = 0
        while at < len(data):  # a write holds every reply ready at the head of the queue
            self.replies += 1
            at += 4 + _SIZE.unpack_from(data, at)[0]
        if self.kept is not None:
            self.kept.append(self.last)

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
        self.conn = Connection(self.node, set(), RequestMemory(self.settings.queued_max_request_bytes),
                               endpoints(self.settings)[0])
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


async def one(kind: str, n: int, extra: list[str]) -> float:
    data_dir = tempfile.mkdtemp(prefix="request-cost-")
    try:
        h = Harness(data_dir, 0 if kind == "commit-fsync" else 1000, extra)
        await h.start()
        try:
            cost = {"heartbeat": heartbeat_cost, "consumer-heartbeat": consumer_heartbeat_cost}.get(kind, commit_cost)
            return await cost(h, n)
        finally:
            await h.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


KINDS = ["heartbeat", "consumer-heartbeat", "commit", "commit-fsync"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=KINDS, action="append")
    ap.add_argument("-n", type=int, default=50_000, help="requests per run (commit-fsync: a tenth)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of the server under test, e.g. native.heartbeat.enable=false (the Python path)")
    ap.add_argument("--callgrind", action="store_true",
                    help="heartbeat: run the measured loop inside functools.reduce (one C function), so that "
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
        n = args.n // 10 if kind == "commit-fsync" else args.n
        runs = sorted(run(one(kind, n, args.set)) for _ in range(args.repeat))
        print(f"{kind:13} {statistics.median(runs):6.1f} CPU µs/request (runs: {', '.join(f'{r:.1f}' for r in runs)}; "
              f"{n:,} requests each)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
