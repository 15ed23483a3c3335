"""Crash loop: commit offsets continuously, SIGKILL groupd at random moments, restart it, and check
that every acknowledged commit survived.

    python bench/crash_loop.py --cycles 300            # or: --minutes 10 (whichever ends first)
    python bench/crash_loop.py --cycles 20 --seed 7 --data-dir /tmp/crash --keep

Each cycle: start the server on the same data dir (alternating fsync-per-batch and interval mode,
small segments and an eager log cleaner so that kills also land in segment rolls and compactions),
let `--committers` connections commit (OffsetCommit v8, generation -1, pipelined depth 1) to their
own groups, spread over the offsets partitions, kill -9 the server after a random time (sometimes
right after start, while partitions load), restart it and OffsetFetch every group:

* the fetched offset of every (group, topic, partition) is >= its last acknowledged (error 0) one;
* it is an offset that was sent for that key (a later, unacknowledged commit may have landed), and
  its metadata is the one sent with that offset;
* no partition failed to load.

Each key is committed by one connection only, one request at a time, so commit order per key is
the order the client saw. The first violation stops the run with an AssertionError (exit 1).
`run()` is what tests/storage/test_storage_crash.py calls for the CI version.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from groupd.coordinator.core.partitioning import partition_for  # noqa: E402
from groupd.protocol import ErrorCode  # noqa: E402
from groupd.protocol.apis import ApiKey  # noqa: E402
from tests.support.process import GroupdProcess, WireClient, free_port  # noqa: E402

TOPIC = "t"
TOPIC_PARTITIONS = 4
SERVER_SETTINGS = (f"topics={TOPIC}:{TOPIC_PARTITIONS}", "offsets.topic.segment.bytes=16384",
                   "log.cleaner.backoff.ms=100", "min.cleanable.dirty.ratio=0.05",
                   "log.cleaner.delete.retention.ms=0")
FLUSH_MODES = ("log.flush.interval.ms=0", "log.flush.interval.ms=1000")


def spread_groups(n: int, partitions: int = 50) -> list[str]:
    """`n` group ids that land on `n` different offsets partitions (when n <= partitions)."""
    groups, used, i = [], set(), 0
    while len(groups) < n:
        g = f"crash-{i}"
        p = partition_for(g, partitions)
        if p not in used or len(used) >= partitions:
            used.add(p)
            groups.append(g)
        i += 1
    return groups


@dataclasses.dataclass
class KeyState:
    sent: dict[int, str] = dataclasses.field(default_factory=dict)  # offset → metadata
    acked: int = -1
    next_offset: int = 0


@dataclasses.dataclass
class Stats:
    cycles: int = 0
    commits_sent: int = 0
    commits_acked: int = 0  # partitions acknowledged with error 0
    unacked_landed: int = 0  # keys whose fetched offset was a later, unacknowledged commit
    errors: dict = dataclasses.field(default_factory=dict)  # error code name → partitions
    torn_tails: int = 0
    compactions: int = 0
    killed_while_loading: int = 0
    seconds: float = 0.0


class Committer(threading.Thread):
    """One connection committing to its own groups until `stop` is set; reconnects after a kill."""

    def __init__(self, bootstrap: str, groups: list[str], keys: dict, stats: Stats, lock: threading.Lock,
                 stop: threading.Event, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.groups, self.keys, self.stats = bootstrap, groups, keys, stats
        self.lock, self.stop, self.rng = lock, stop, rng

    def run(self) -> None:
        client = None
        while not self.stop.is_set():
            if client is None:
                try:
                    client = WireClient(self.bootstrap, client_id="crash-loop", timeout=5)
                except OSError:
                    time.sleep(0.02)
                    continue
            group = self.rng.choice(self.groups)
            parts = self.rng.sample(range(TOPIC_PARTITIONS), self.rng.randint(1, 3))
            offsets = {}
            for p in parts:
                ks = self.keys[(group, TOPIC, p)]
                ks.next_offset += self.rng.randint(1, 5)
                offsets[p] = ks.next_offset
                ks.sent[ks.next_offset] = f"m{ks.next_offset}"
            with self.lock:
                self.stats.commits_sent += len(parts)
            try:
                reply = client.request(ApiKey.OFFSET_COMMIT, 8, {
                    "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None,
                    "topics": [{"name": TOPIC, "partitions": [
                        {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                         "committed_metadata": f"m{o}"} for p, o in offsets.items()]}]})
            except (OSError, ConnectionError, AssertionError):
                client.close()
                client = None
                continue
            for t in reply.topics:
                for part in t.partitions:
                    with self.lock:
                        if part.error_code is ErrorCode.none:
                            ks = self.keys[(group, t.name, part.partition_index)]
                            ks.acked = max(ks.acked, offsets[part.partition_index])
                            self.stats.commits_acked += 1
                        else:
                            name = part.error_code.name
                            self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
        if client is not None:
            client.close()


def wait_loaded(server: GroupdProcess, since: int, timeout: float = 60.0) -> str:
    """The log from `since` on, once it says every partition was loaded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = server.log()[since:]
        if "offsets log loaded" in text:
            return text
        if not server.alive():
            raise RuntimeError(f"groupd died while loading:\n{text[-3000:]}")
        time.sleep(0.02)
    raise TimeoutError(f"offsets log not loaded within {timeout}s:\n{server.log()[since:][-3000:]}")


def fetch_all(bootstrap: str, groups: list[str]) -> dict[tuple[str, str, int], tuple[int, str]]:
    """(group, topic, partition) → (offset, metadata), retrying while partitions load."""
    with WireClient(bootstrap, client_id="crash-check") as c:
        for _ in range(500):
            reply = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": g, "topics": None} for g in groups],
                                                       "require_stable": True})
            errors = [g.error_code for g in reply.groups if g.error_code is not ErrorCode.none]
            if not errors:
                return {(g.group_id, t.name, p.partition_index): (p.committed_offset, p.metadata)
                        for g in reply.groups for t in g.topics for p in t.partitions}
            if any(e is not ErrorCode.coordinator_load_in_progress for e in errors):
                raise AssertionError(f"OffsetFetch failed after restart: {errors}")
            time.sleep(0.02)
    raise AssertionError("partitions still loading after 10 s")


def verify(keys: dict, fetched: dict, stats: Stats, cycle: int) -> None:
    for key, ks in keys.items():
        got = fetched.get(key)
        if ks.acked == -1 and got is None:
            continue
        if got is None:
            raise AssertionError(f"cycle {cycle}: {key} acknowledged at {ks.acked} but nothing is committed")
        offset, metadata = got
        if offset < ks.acked:
            raise AssertionError(f"cycle {cycle}: {key} acknowledged at {ks.acked} but fetched {offset} (lost)")
        if offset not in ks.sent:
            raise AssertionError(f"cycle {cycle}: {key} fetched {offset}, which was never sent")
        if metadata != ks.sent[offset]:
            raise AssertionError(f"cycle {cycle}: {key} offset {offset} has metadata {metadata!r}, "
                                 f"sent {ks.sent[offset]!r}")
        if offset > ks.acked:
            stats.unacked_landed += 1
        ks.acked = offset  # what is durable now; later commits must not go below it
    extra = set(fetched) - set(keys)
    if extra:
        raise AssertionError(f"cycle {cycle}: offsets nobody committed: {sorted(extra)[:5]}")


def run(data_dir: str, cycles: int, *, seconds: float | None = None, committers: int = 4,
        groups_per_committer: int = 3, seed: int | None = None, progress=None) -> Stats:
    """Run the crash loop; raises AssertionError on the first lost or invented commit."""
    rng = random.Random(seed)
    stats = Stats()
    groups = spread_groups(committers * groups_per_committer)
    keys = {(g, TOPIC, p): KeyState() for g in groups for p in range(TOPIC_PARTITIONS)}
    lock = threading.Lock()
    port = free_port()
    started = time.monotonic()
    for cycle in range(1, cycles + 1):
        if seconds is not None and time.monotonic() - started > seconds:
            break
        server = GroupdProcess(data_dir, *SERVER_SETTINGS, FLUSH_MODES[cycle % 2], port=port)
        since = len(server.log()) if os.path.exists(server.log_path) else 0
        server.start()
        if rng.random() < 0.15:  # now and then, kill it while it is still loading
            time.sleep(rng.uniform(0, 0.02))
            loaded = "offsets log loaded" in server.log()[since:]
            server.kill()
            stats.killed_while_loading += not loaded
            since = len(server.log())
            server = GroupdProcess(data_dir, *SERVER_SETTINGS, FLUSH_MODES[cycle % 2], port=port)
            server.start()
        text = wait_loaded(server, since)
        if "partition load failed" in text:
            raise AssertionError(f"cycle {cycle}: a partition failed to load:\n{text[-3000:]}")
        # every commit acknowledged before the previous kill is there
        verify(keys, fetch_all(server.bootstrap, groups), stats, cycle)

        stop = threading.Event()
        threads = [Committer(server.bootstrap, groups[i::committers], keys, stats, lock, stop,
                             random.Random(rng.random())) for i in range(committers)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.05, 2.0))
        server.kill()
        stop.set()
        for t in threads:
            t.join(10)
        text = server.log()[since:]
        stats.torn_tails += text.count("torn tail truncated")
        stats.compactions += len(re.findall(r"compacted partition=", text))
        stats.cycles = cycle
        if progress:
            progress(cycle, stats)
    # the last kill, checked by one more start
    server = GroupdProcess(data_dir, *SERVER_SETTINGS, port=port)
    since = len(server.log()) if os.path.exists(server.log_path) else 0
    server.start()
    try:
        text = wait_loaded(server, since)
        if "partition load failed" in text:
            raise AssertionError(f"final start: a partition failed to load:\n{text[-3000:]}")
        verify(keys, fetch_all(server.bootstrap, groups), stats, stats.cycles + 1)
        stats.torn_tails += text.count("torn tail truncated")
    finally:
        assert server.stop(signal.SIGTERM) == 0, server.log()[-3000:]
    stats.seconds = time.monotonic() - started
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--minutes", type=float, default=None, help="stop starting new cycles after this long")
    ap.add_argument("--committers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data dir")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="groupd-crash-")
    print(f"crash loop: cycles={args.cycles} seed={seed} data_dir={data_dir}", flush=True)

    def progress(cycle: int, s: Stats) -> None:
        if cycle % 10 == 0 or cycle == args.cycles:
            print(f"  cycle {cycle}: acked={s.commits_acked} sent={s.commits_sent} torn_tails={s.torn_tails} "
                  f"compactions={s.compactions} unacked_landed={s.unacked_landed}", flush=True)

    try:
        stats = run(data_dir, args.cycles, seconds=None if args.minutes is None else args.minutes * 60,
                    committers=args.committers, seed=seed, progress=progress)
    except AssertionError as e:
        print(f"FAILED (seed={seed}, data dir kept at {data_dir}): {e}", flush=True)
        return 1
    print(f"OK: {stats.cycles} kill -9 cycles in {stats.seconds:.0f} s, {stats.commits_acked} partition commits "
          f"acknowledged ({stats.commits_sent} sent), all acknowledged offsets found after every restart; "
          f"torn tails truncated={stats.torn_tails}, compactions={stats.compactions}, kills while loading="
          f"{stats.killed_while_loading}, unacknowledged commits that landed={stats.unacked_landed}, "
          f"error replies={stats.errors or 'none'}")
    if not args.keep and args.data_dir is None:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
