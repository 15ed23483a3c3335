"""The steady ConsumerGroupHeartbeat's native path (coordinator/server/_native.c) against the Python
path, its reference: two real in-process nodes, one with `native.heartbeat.enable=true`, one with it
false, each with the same consumer group formed through the Python path; then the same frames --
steady ones, ones a field away from steady, bytes flipped or cut -- fed to both, which must answer
the same bytes, close alike, and leave the same state (session deadlines moved, member epochs,
client id, request counters). The fuzzing is seeded (one formed group serves every frame), so a
failure replays. Then a real server under each setting, over TCP, with its metrics. The wire
tests of the consumer protocol run on either path with `GROUPD_NATIVE_HEARTBEAT_ENABLE`, as the
classic ones do (tests/server/test_native_heartbeat.py)."""

from __future__ import annotations

import asyncio
import datetime
import random
import struct
import time
import urllib.request
import uuid

import pytest

from groupd.coordinator.core.group_config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS
from groupd.coordinator.observability import metrics
from groupd.coordinator.security.listeners import endpoints
from groupd.coordinator.server.connection import Connection, RequestMemory
from groupd.coordinator.server.node import Node
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request
from groupd.protocol.framing import FrameReader
from tests.server.test_native_heartbeat import Transport
from tests.support.process import GroupdProcess, WireClient, free_port

GROUP = "native-cg"
MEMBERS = [str(uuid.UUID(int=i + 1)) for i in range(4)]
KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT


def values(member_id: str, epoch: int, **changed) -> dict:
    return {"group_id": GROUP, "member_id": member_id, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=-1), "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None, **changed}


def frame(version: int, body: dict, correlation_id: int = 1, client_id: str | None = "cost") -> bytes:
    if version == 0:
        body = {k: v for k, v in body.items() if k != "subscribed_topic_regex"}
    return encode_request(RequestHeader(KEY, version, correlation_id, client_id), build_request(KEY, version, body))


async def until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "no reply"
        await asyncio.sleep(0.001)


class Side:
    """One node, started, with a connection over a recording transport."""

    def __init__(self, tmp, native: bool) -> None:
        self.settings = Settings.load(env={}, overrides=[
            "listeners=PLAINTEXT://127.0.0.1:9", f"data.dir={tmp}", "metrics.listener=", "log.level=warning",
            "group.initial.rebalance.delay.ms=0", "topics=t:8", f"native.heartbeat.enable={str(native).lower()}"])
        self.node = Node(self.settings)
        self.topic_id = b""  # topic t's id, this node's own (the other node's differs)
        assert (self.node.fast_heartbeat is not None) == native

    def connect(self) -> tuple[Connection, Transport]:
        transport = Transport()
        conn = Connection(self.node, set(), RequestMemory(1 << 30), endpoints(self.settings)[0])
        conn.connection_made(transport)
        return conn, transport

    async def form(self) -> int:
        """The group's members joined and reconciled through the Python path: their epoch."""
        conn, transport = self.connect()
        replies = await self.send(conn, transport, [frame(1, values(
            m, 0, subscribed_topic_names=["t"], rebalance_timeout=datetime.timedelta(seconds=60), topic_partitions=[]),
            i) for i, m in enumerate(MEMBERS)])
        self.topic_id = next(tp.topic_id for r in replies for tp in r.assignment.topic_partitions).bytes
        for _ in range(50):
            owned = [None if r.assignment is None else
                     [{"topic_id": tp.topic_id, "partitions": tp.partitions} for tp in r.assignment.topic_partitions]
                     for r in replies]
            if all(o is None for o in owned) and len({r.member_epoch for r in replies}) == 1:
                conn.connection_lost(None)
                return replies[0].member_epoch
            replies = await self.send(conn, transport, [frame(1, values(m, r.member_epoch, topic_partitions=o), i)
                                                        for i, (m, r, o) in enumerate(zip(MEMBERS, replies, owned))])
        raise AssertionError("the group did not settle")

    @staticmethod
    async def send(conn, transport, frames: list[bytes]) -> list:
        start = len(transport.out)
        conn.data_received(b"".join(frames))
        await until(lambda: len(FrameReader(1 << 20).feed(bytes(transport.out[start:]))) >= len(frames))
        return [decode_response(KEY, 1, f)[1] for f in FrameReader(1 << 20).feed(bytes(transport.out[start:]))]

    def machine(self):
        return self.node.coordinator.shard(GROUP).consumer

    def state(self) -> dict:
        group = self.machine().groups[GROUP]
        return {"epochs": {m: member.assignment.member_epoch for m, member in group.members.items()},
                "group_epoch": group.group_epoch, "session": dict(self.machine().session)}


def counters() -> dict:
    return dict(metrics.REQUESTS.answered)


async def feed(side: Side, chunks: list[bytes]) -> dict:
    """`chunks` as reads of a fresh connection: the bytes out, once no reply is pending."""
    conn, transport = side.connect()
    session = side.machine().session
    for k in session:  # a second back, so that a heartbeat in the same ms as the last one still shows
        session[k] -= 1000  # (the timers, 45 s away, fire long after the test)
    before, answered = side.state(), counters()
    started = time.monotonic_ns() // 1_000_000
    for chunk in chunks:
        if transport.closed:
            break
        conn.data_received(chunk)
    await until(lambda: transport.closed or not conn._replies)
    await asyncio.sleep(0)
    after = side.state()
    timeout = side.machine().session_timeout_ms(GROUP, None)  # the group's override, else the broker's
    moved = {k for k, v in after["session"].items() if before["session"].get(k) != v}
    for k in moved:  # a moved deadline is now + the session timeout (on either path)
        assert started + timeout <= after["session"][k] <= time.monotonic_ns() // 1_000_000 + timeout
    conn.connection_lost(None)
    now_answered = counters()
    return {"out": bytes(transport.out).replace(side.topic_id, b"<topic t's id>"), "closed": transport.closed,
            "client_id": conn.client_id, "moved": moved,
            "epochs": after["epochs"], "group_epoch": after["group_epoch"],
            "answered": {k: now_answered[k] - answered.get(k, 0) for k in now_answered
                         if now_answered[k] != answered.get(k, 0)}}


def candidates(rng: random.Random, epoch: int) -> bytes:
    """A steady frame, or one a field away from it, or either with bytes flipped, cut or added."""
    member = rng.choice(MEMBERS + ["unknown-member", ""])
    changed = rng.choice([{}, {}, {}, {"member_epoch": epoch + 1}, {"member_epoch": 0}, {"member_epoch": -1},
                          {"rack_id": "r"}, {"rebalance_timeout": datetime.timedelta(seconds=60)},
                          {"instance_id": "i-0"}, {"server_assignor": "uniform"}, {"subscribed_topic_names": ["t"]},
                          {"group_id": "other-group"}, {"group_id": "ü-group"}, {"topic_partitions": []}])
    body = values(member, changed.pop("member_epoch", epoch), **changed)
    data = bytearray(frame(rng.choice([0, 1, 1]), body, rng.randrange(-2**31, 2**31),
                           rng.choice([None, "cost", "cost", "other", "ü"])))
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        kind = rng.choice(["flip", "cut", "add"])
        if kind == "flip":
            data[rng.randrange(4, len(data))] = rng.randrange(256)
        elif kind == "cut":
            del data[rng.randrange(5, len(data)):]
        else:
            data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
        struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


async def test_fuzzed_frames_same_bytes_and_state_as_python(tmp_path):
    sides = {native: Side(tmp_path / str(native), native) for native in (True, False)}
    try:
        for side in sides.values():
            side.node.coordinator.start()
        await until(lambda: all(s.value == "active" for side in sides.values() for s in side.node.coordinator.states))
        epochs = {native: await side.form() for native, side in sides.items()}
        assert epochs[True] == epochs[False] > 0
        rng = random.Random(27)
        answered_natively = 0
        for _ in range(300):
            if len(sides[True].state()["epochs"]) < len(MEMBERS):  # some left or were fenced: back in, alike
                assert len({await side.form() for side in sides.values()}) == 1
            epoch = sides[True].state()["group_epoch"]  # the group's, as it moves on
            if rng.random() < 0.1:  # the group's own timeout and interval (the native path leaves those to Python)
                configs = rng.choice([{}, {GROUP: {CONSUMER_SESSION_TIMEOUT_MS: 30_000}},
                                      {GROUP: {CONSUMER_HEARTBEAT_INTERVAL_MS: 3_000}}, {"another-group": {}}])
                for side in sides.values():
                    side.machine().settings.group_configs = configs
            chunks = [candidates(rng, epoch) for _ in range(rng.choice([1, 1, 2, 3]))]
            if rng.random() < 0.2:  # one read split in two
                whole = b"".join(chunks)
                cut = rng.randrange(1, len(whole))
                chunks = [whole[:cut], whole[cut:]]
            results = {native: await feed(side, chunks) for native, side in sides.items()}
            assert results[True] == results[False], chunks
            answered_natively += bool(results[True]["moved"])
        assert answered_natively > 100  # the steady case really came up
    finally:
        for side in sides.values():
            await side.node.coordinator.close()
            side.node.close()


async def test_native_path_answers_without_the_python_handler(tmp_path):
    side = Side(tmp_path, True)
    try:
        side.node.coordinator.start()
        await until(lambda: all(s.value == "active" for s in side.node.coordinator.states))
        epoch = await side.form()
        calls = []
        handler = side.node.coordinator.consumer_heartbeat
        side.node.coordinator.consumer_heartbeat = lambda *a: calls.append(a) or handler(*a)
        result = await feed(side, [frame(v, values(MEMBERS[0], epoch), v) for v in (0, 1)])
        assert calls == [] and result["moved"] == {(GROUP, MEMBERS[0])}
        assert sum(result["answered"].values()) == 2
        replies = FrameReader(1 << 20).feed(result["out"])
        assert [decode_response(KEY, v, f)[1].member_epoch for v, f in zip((0, 1), replies)] == [epoch, epoch]
    finally:
        await side.node.coordinator.close()
        side.node.close()


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_wire_steady_heartbeats_and_their_metrics(tmp_path, native):
    """A real server over TCP: a member joins and acknowledges its assignment, then its steady
    heartbeats (v0 and v1) are answered alike by both paths and counted in groupd_requests_total;
    a wrong epoch (the general path, behind the native one) is fenced as before."""
    metrics_port = free_port()
    server = GroupdProcess(str(tmp_path), "topics=t:2", f"native.heartbeat.enable={str(native).lower()}",
                           f"metrics.listener=http://127.0.0.1:{metrics_port}/metrics").start()
    try:
        with WireClient(server.bootstrap) as c:
            r = c.request(KEY, 1, values("m-1", 0, subscribed_topic_names=["t"], topic_partitions=[],
                                         rebalance_timeout=datetime.timedelta(seconds=30)))
            owned = [{"topic_id": tp.topic_id, "partitions": tp.partitions} for tp in r.assignment.topic_partitions]
            r = c.request(KEY, 1, values("m-1", r.member_epoch, topic_partitions=owned))
            assert r.error_code == 0 and r.assignment is None
            epoch, sent = r.member_epoch, 2
            for version in (0, 1, 0, 1):
                body = values("m-1", epoch)
                if version == 0:
                    del body["subscribed_topic_regex"]
                r = c.request(KEY, version, body)
                sent += 1
                assert (r.error_code, r.member_id, r.member_epoch, r.assignment) == (0, "m-1", epoch, None)
                assert r.heartbeat_interval == datetime.timedelta(milliseconds=5000)
            assert c.request(KEY, 1, values("m-1", epoch + 1)).error_code is ErrorCode.fenced_member_epoch
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
        assert float(samples['groupd_requests_total{api="consumer_group_heartbeat",error="none"}']) == sent
        assert float(samples['groupd_requests_total{api="consumer_group_heartbeat",error="fenced_member_epoch"}']) == 1
        assert float(samples['groupd_request_duration_seconds_count{api="consumer_group_heartbeat"}']) == sent + 1
    finally:
        assert server.stop() == 0, server.log()[-3000:]
