"""A seeded request fuzzer: mutations of the golden frames real clients sent (tests/golden/requests.json)
pipelined to a real groupd process, with checks that it stays alive, answers a fresh client and
keeps its memory. Shared by tests/protocol/test_fuzz.py (a short CI run) and bench/fuzz.py (long runs)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import re
import struct
import time
from collections.abc import Callable, Iterator

from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import is_flexible, parse_header

from .process import WireClient

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden", "requests.json")
_HUGE = [struct.pack(">i", v) for v in (0x7FFFFFF0, -2, 0x00FFFFFF, 0x10000000)] + \
    [bytes.fromhex(h) for h in ("ffffffff0f", "feffffff0f", "80808080", "ff7f", "7fff", "ffff")]
_INTERESTING = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00", b"\xff\xff", b"\x00\x00\x00\x00",
                b"\xff\xff\xff\xff", b"\x01"]


@dataclasses.dataclass(frozen=True, slots=True)
class Seed:
    frame: bytes  # without its size prefix
    body: int  # where the body starts


def corpus() -> list[Seed]:
    with open(GOLDEN) as f:
        cases = json.load(f)
    seeds = []
    for c in cases:
        frame = bytes.fromhex(c["frame"])
        _, body = parse_header(frame, is_flexible(c["api_key"], c["version"]))
        seeds.append(Seed(frame, body))
    return seeds


class Mutator:
    """Bit flips, byte inserts and deletes, length/count fields set to edge and huge values,
    truncation and splicing; usually in the body, sometimes in the header or the size prefix."""

    def __init__(self, seed: int, seeds: list[Seed]) -> None:
        self.rng = random.Random(seed)
        self.seeds = seeds
        self.ops: list[Callable[[bytearray, int], None]] = [
            self._flip, self._flip, self._insert, self._delete, self._interesting, self._huge, self._huge,
            self._truncate, self._splice]

    def frame(self) -> bytes:
        """One size-prefixed request to send (its prefix is usually right, sometimes not)."""
        rng = self.rng
        seed = rng.choice(self.seeds)
        data = bytearray(seed.frame)
        start = seed.body if rng.random() < 0.85 and seed.body < len(data) else 0
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            rng.choice(self.ops)(data, start)
        size = len(data)
        r = rng.random()
        if r < 0.02:
            size = rng.choice((size + rng.randint(1, 64), max(size - rng.randint(1, 8), 0), 0x7FFFFFFF, -1))
        return struct.pack(">i", size) + bytes(data)

    def _at(self, data: bytearray, start: int) -> int:
        return self.rng.randrange(start, len(data)) if len(data) > start else len(data)

    def _flip(self, data: bytearray, start: int) -> None:
        if len(data) > start:
            i = self._at(data, start)
            data[i] ^= 1 << self.rng.randrange(8)

    def _insert(self, data: bytearray, start: int) -> None:
        i = self._at(data, start)
        data[i:i] = bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 8)))

    def _delete(self, data: bytearray, start: int) -> None:
        i = self._at(data, start)
        del data[i:i + self.rng.randint(1, 8)]

    def _overwrite(self, data: bytearray, start: int, value: bytes) -> None:
        i = self._at(data, start)
        data[i:i + len(value)] = value

    def _interesting(self, data: bytearray, start: int) -> None:
        self._overwrite(data, start, self.rng.choice(_INTERESTING))

    def _huge(self, data: bytearray, start: int) -> None:
        self._overwrite(data, start, self.rng.choice(_HUGE))

    def _truncate(self, data: bytearray, start: int) -> None:
        del data[self._at(data, start):]

    def _splice(self, data: bytearray, start: int) -> None:
        other = self.rng.choice(self.seeds).frame
        data[self._at(data, start):] = other[self.rng.randrange(len(other)):]


@dataclasses.dataclass
class Stats:
    frames: int = 0
    connections: int = 0
    connect_errors: int = 0
    answered_bytes: int = 0


async def _worker(port: int, frames: Iterator[list[bytes]], stats: Stats, idle_s: float) -> None:
    for batch in frames:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            stats.connect_errors += 1
            await asyncio.sleep(0.05)
            continue
        stats.connections += 1
        try:
            writer.write(b"".join(batch))
            stats.frames += len(batch)
            while True:
                data = await asyncio.wait_for(reader.read(1 << 16), idle_s)
                if not data:
                    break
                stats.answered_bytes += len(data)
        except (asyncio.TimeoutError, OSError):
            pass  # frames the server still waits on (a lying size, a parked join): move on
        finally:
            writer.close()


def send_burst(port: int, mutator: Mutator, frames: int, *, per_connection: int = 16, workers: int = 24,
               idle_s: float = 0.25) -> Stats:
    """Send `frames` mutated frames, pipelined `per_connection` to a connection over `workers`
    concurrent connections, reading whatever comes back."""
    stats = Stats()

    def batches() -> Iterator[list[bytes]]:
        left = frames
        while left > 0:
            n = min(per_connection, left)
            left -= n
            yield [mutator.frame() for _ in range(n)]

    async def run() -> None:
        shared = batches()
        await asyncio.gather(*(_worker(port, shared, stats, idle_s) for _ in range(workers)))

    asyncio.run(run())
    return stats


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def fresh_client_seconds(bootstrap: str, timeout: float = 30.0) -> float:
    """A new connection's ApiVersions round trip; raises if the server does not answer."""
    started = time.monotonic()
    with WireClient(bootstrap, timeout=timeout) as c:
        c.request(ApiKey.API_VERSIONS, 0, {})
    return time.monotonic() - started
