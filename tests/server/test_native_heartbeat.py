"""The steady classic Heartbeat's native path (coordinator/server/_native.c) against the Python path,
its reference: the same reply bytes, the same closes, the same state change (session deadlines,
client id, request metrics) for the golden corpus's heartbeats and for fuzzed frames and group
states. Both paths run through a real `Connection` (a recording transport), each on its own copy
of the same coordinator state: one with `native.heartbeat.enable=true`, one with it false. Then a
real server under each setting, over TCP, with its metrics. (The other wire tests of heartbeats run
on the native path, the default; `GROUPD_NATIVE_HEARTBEAT_ENABLE=false` in pytest's environment runs
them on the Python path: GroupdProcess servers inherit it.)"""

from __future__ import annotations

import asyncio
import json
import struct
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from groupd.coordinator.core.classic.group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    Member,
)
from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.observability import metrics
from groupd.coordinator.runtime.coordinator import GroupCoordinator
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.coordinator.server import _native, fast_heartbeat
from groupd.coordinator.server.connection import Connection, RequestMemory
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request, encode_request
from groupd.protocol.framing import FrameReader
from tests.support.process import GroupdProcess, WireClient, free_port, join_and_sync

GOLDEN = Path(__file__).parents[1] / "golden" / "requests.json"
PARTITIONS = 3
SESSION_MS = 10_000
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE)
GROUP_IDS = ("golden-group", "golden-kcat-group", "g-0", "g-1", "gruppe-ü", "组-𝄞")
MEMBER_IDS = ("m-0", "m-1", "golden-subscriber-55f59dd5-384d-45b7-8ecb-226d43cfe9f1", "m-é")


class Transport:
    """What a Connection writes and whether it closed."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 50000) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Endpoint:
    sasl = False
    protocol = "PLAINTEXT"
    advertised = None


class Node:
    """What Connection and the heartbeat handler read of a node."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.coordinator = GroupCoordinator(settings)
        self.access = None
        self.intercept = None
        self.api_versions = ()
        self.fast_heartbeat = fast_heartbeat.build(self)


def make_settings(tmp: Path, native: bool) -> Settings:
    return Settings.load(None, env={}, overrides=[f"data.dir={tmp}", f"offsets.topic.num.partitions={PARTITIONS}",
                                                  f"native.heartbeat.enable={str(native).lower()}"])


def populate(coordinator: GroupCoordinator, layout: dict) -> None:
    """layout: partition states, and per group id (state, generation, {member id: instance id})."""
    for p, state in enumerate(layout["partitions"]):
        coordinator.states[p] = state
    for group_id, (state, generation, members) in layout["groups"].items():
        group = ClassicGroup(group_id, state, 0, generation=generation, protocol_type="consumer")
        for member_id, instance_id in members.items():
            group.members[member_id] = Member(member_id, instance_id, "c", "/127.0.0.1", 30_000, SESSION_MS,
                                              "consumer", (("range", b""),))
            if instance_id is not None:
                group.static_members[instance_id] = member_id
        coordinator.shard(group_id).groups[group_id] = group


def deadlines(coordinator: GroupCoordinator) -> dict:
    return {(g.group_id, m.member_id): m.deadline
            for shard in coordinator.shards for g in shard.groups.values() for m in g.members.values()}


def snapshot() -> tuple[dict, list, float]:
    stats = metrics.REQUESTS
    return dict(stats.answered), list(stats.buckets[ApiKey.HEARTBEAT]), stats.seconds[ApiKey.HEARTBEAT]


def run(node: Node, chunks: list[bytes]) -> dict:
    """Feed `chunks` to a fresh connection of `node` (each one read); what came out of it."""
    transport = Transport()
    conn = Connection(node, set(), RequestMemory(1 << 30), Endpoint())
    conn.connection_made(transport)
    answered, buckets, _ = snapshot()
    before_ms = time.monotonic_ns() // 1_000_000
    for chunk in chunks:
        if transport.closed:
            break
        conn.data_received(chunk)
    after_ms = time.monotonic_ns() // 1_000_000
    conn.connection_lost(None)
    now_answered, now_buckets, _ = snapshot()
    moved = {}
    for key, deadline in deadlines(node.coordinator).items():
        if deadline:
            assert before_ms + SESSION_MS <= deadline <= after_ms + SESSION_MS, (key, deadline)
            moved[key] = True
    for key in moved:  # reset for the next example
        group_id, member_id = key
        node.coordinator.shard(group_id).groups[group_id].members[member_id].deadline = 0
    return {"out": bytes(transport.out), "closed": transport.closed, "client_id": conn.client_id, "moved": moved,
            "answered": {k: now_answered.get(k, 0) - answered.get(k, 0) for k in now_answered
                         if now_answered.get(k, 0) != answered.get(k, 0)},
            "requests": sum(now_buckets) - sum(buckets)}


@pytest.fixture
def nodes(tmp_path):
    made = {native: Node(make_settings(tmp_path / str(native), native)) for native in (True, False)}
    assert made[True].fast_heartbeat is not None and made[False].fast_heartbeat is None
    yield made
    for node in made.values():
        node.coordinator._executor.shutdown()


def both(nodes: dict, layout: dict, chunks: list[bytes]) -> dict:
    results = []
    for native in (True, False):
        node = nodes[native]
        for shard in node.coordinator.shards:
            shard.groups.clear()
        populate(node.coordinator, layout)
        results.append(run(node, chunks))
    assert results[0] == results[1]
    return results[0]


def frame(version: int, group_id: str, generation: int, member_id: str, instance_id: str | None = None,
          client_id: str | None = "c", correlation_id: int = 7) -> bytes:
    body = {"group_id": group_id, "generation_id": generation, "member_id": member_id}
    if version >= 3:
        body["group_instance_id"] = instance_id
    return encode_request(RequestHeader(ApiKey.HEARTBEAT, version, correlation_id, client_id),
                          build_request(ApiKey.HEARTBEAT, version, body))


def steady_layout() -> dict:
    return {"partitions": [PartitionState.ACTIVE] * PARTITIONS,
            "groups": {g: (STABLE, 1, {m: None for m in MEMBER_IDS}) for g in GROUP_IDS}}


async def test_golden_heartbeats_same_bytes_and_state(nodes):
    golden = json.loads(GOLDEN.read_text())
    heartbeats = [g for g in golden if g["api_key"] == ApiKey.HEARTBEAT]
    assert {g["version"] for g in heartbeats} == {0, 1, 2, 3, 4}
    for g in heartbeats:
        raw = bytes.fromhex(g["frame"])
        group_id, generation, member_id = g["expect"]["group"]
        for state in STATES:
            layout = {"partitions": [PartitionState.ACTIVE] * PARTITIONS,
                      "groups": {group_id: (state, generation, {member_id: None})}}
            result = both(nodes, layout, [struct.pack(">i", len(raw)) + raw])
            assert result["out"] and not result["closed"] and result["client_id"] == g["client_id"]
            assert bool(result["moved"]) == (state is not EMPTY)
            assert result["requests"] == 1


async def test_fast_path_answers_steady_heartbeats_and_counts_them(nodes):
    """The native path really answers (not only falls back): its node's heartbeat counters move
    without the Python handler running."""
    layout = steady_layout()
    populate(nodes[True].coordinator, layout)
    calls = []
    handler = nodes[True].coordinator.heartbeat
    nodes[True].coordinator.heartbeat = lambda req: calls.append(req) or handler(req)
    result = run(nodes[True], [frame(v, "g-0", 1, "m-1") for v in range(5)])
    assert calls == [] and result["requests"] == 5 and result["moved"] == {("g-0", "m-1"): True}
    assert len(FrameReader(1 << 20).feed(result["out"])) == 5


async def test_pipelined_and_split_reads(nodes):
    frames = b"".join(frame(v % 5, GROUP_IDS[v % len(GROUP_IDS)], 1, MEMBER_IDS[v % 4], correlation_id=v)
                      for v in range(20))
    result = both(nodes, steady_layout(), [frames[:37], frames[37:300], frames[300:]])
    assert len(FrameReader(1 << 20).feed(result["out"])) == 20


def test_partition_matches_kafkas():
    for group_id in (*GROUP_IDS, "", "x" * 1000, "\U0010ffff", "polyglot-ÿ-\u0100-\uffff-\U00010000"):
        for n in (1, 3, 50, 1000):
            assert _native.java_partition(group_id, n) == partition_for(group_id, n)


@given(st.text(max_size=40), st.integers(1, 10_000))
def test_partition_matches_kafkas_fuzzed(group_id, n):
    assert _native.java_partition(group_id, n) == partition_for(group_id, n)


layouts = st.fixed_dictionaries({
    "partitions": st.lists(st.sampled_from([PartitionState.ACTIVE] * 3 + [PartitionState.LOADING,
                                                                         PartitionState.UNOWNED]),
                           min_size=PARTITIONS, max_size=PARTITIONS),
    "groups": st.dictionaries(st.sampled_from(GROUP_IDS),
                              st.tuples(st.sampled_from(STATES), st.integers(0, 3),
                                        st.dictionaries(st.sampled_from(MEMBER_IDS),
                                                        st.sampled_from([None, None, None, "i-0"]), max_size=4)),
                              max_size=len(GROUP_IDS)),
})
heartbeats = st.builds(frame, st.integers(0, 4), st.sampled_from(GROUP_IDS) | st.text(max_size=5),
                       st.integers(-1, 3), st.sampled_from(MEMBER_IDS) | st.text(max_size=5),
                       st.sampled_from([None, None, "i-0", "i-1"]),
                       st.sampled_from([None, "c", "other", "ü"]), st.integers(-2**31, 2**31 - 1))


@st.composite
def mutated(draw, frames):
    """A frame with bytes flipped, cut or added: mostly malformed, sometimes another valid one."""
    data = bytearray(draw(frames))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "add", "size"]))
        if kind == "flip" and len(data) > 4:
            i = draw(st.integers(4, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        elif kind == "cut" and len(data) > 4:
            del data[draw(st.integers(4, len(data) - 1)):]
        elif kind == "add":
            data += draw(st.binary(min_size=1, max_size=4))
        struct.pack_into(">i", data, 0, len(data) - 4)  # most mutations keep the size right
        if kind == "size":
            struct.pack_into(">i", data, 0, draw(st.integers(-2, len(data))))
    return bytes(data)


def of_layout(layout: dict):
    """Heartbeats aimed mostly at the layout's groups and members, at their generation."""
    known = [(g, gen, m) for g, (_, gen, members) in layout["groups"].items() for m in members]
    if not known:
        return heartbeats
    aimed = st.sampled_from(known).flatmap(lambda k: st.builds(
        frame, st.integers(0, 4), st.just(k[0]), st.sampled_from([k[1], k[1], k[1], k[1] + 1]), st.just(k[2]),
        st.sampled_from([None, None, None, "i-0"]), st.sampled_from([None, "c", "ü"]), st.integers(-2**31, 2**31 - 1)))
    return aimed | heartbeats


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layouts, st.data())
def test_fuzzed_frames_and_states_same_as_python(nodes, layout, data):
    frames = of_layout(layout)
    chunks = data.draw(st.lists(frames | mutated(frames), min_size=1, max_size=4))
    asyncio.run(_both_async(nodes, layout, chunks))


async def _both_async(nodes, layout, chunks):
    result = both(nodes, layout, chunks)
    event("closed" if result["closed"] else "answered, deadline moved" if result["moved"] else "answered")


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_wire_heartbeats_and_their_metrics(tmp_path, native):
    """A real server: a member's heartbeats of every version answered alike by both paths, counted
    in groupd_requests_total and the latency histogram; the wrong generation and an unknown member
    (the general path, behind the native one) as before."""
    metrics_port = free_port()
    server = GroupdProcess(str(tmp_path), "topics=t:1", "group.initial.rebalance.delay.ms=0",
                           f"native.heartbeat.enable={str(native).lower()}",
                           f"metrics.listener=http://127.0.0.1:{metrics_port}/metrics").start()
    try:
        with WireClient(server.bootstrap) as c:
            member, generation = join_and_sync(c, "wired")
            for version in range(5):
                body = {"group_id": "wired", "generation_id": generation, "member_id": member}
                if version >= 3:
                    body["group_instance_id"] = None
                assert c.request(ApiKey.HEARTBEAT, version, body).error_code is ErrorCode.none
            assert c.request(ApiKey.HEARTBEAT, 4, {"group_id": "wired", "generation_id": generation + 1,
                                                   "member_id": member, "group_instance_id": None}
                             ).error_code is ErrorCode.illegal_generation
            assert c.request(ApiKey.HEARTBEAT, 4, {"group_id": "wired", "generation_id": generation,
                                                   "member_id": "nobody", "group_instance_id": None}
                             ).error_code is ErrorCode.unknown_member_id
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
        assert float(samples['groupd_requests_total{api="heartbeat",error="none"}']) == 5
        assert float(samples['groupd_requests_total{api="heartbeat",error="illegal_generation"}']) == 1
        assert float(samples['groupd_request_duration_seconds_count{api="heartbeat"}']) == 7
    finally:
        assert server.stop() == 0, server.log()[-3000:]
