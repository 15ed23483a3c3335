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

With `--records` (`run(records=True)`), `--producers` more connections produce to the data topic
`r` during the storm (Produce v8, acks=-1, one batch of 1-20 records per request, depth 1, every
value unique), and after every restart each partition of `r` is fetched from offset 0 to its high
watermark:

* the offsets are 0, 1, 2, ... with no gap (nothing is deleted or compacted in `r`);
* every acknowledged record is at the offset its reply gave (base offset + index) with its value;
* every record found was sent, to that partition, and no value is at two offsets;
* everything read after an earlier restart is still there, unchanged (an unacknowledged batch that
  landed counts as written from then on).

Each key is committed by one connection only, one request at a time, so commit order per key is
the order the client saw. The first violation stops the run with an AssertionError (exit 1).
`run()` is what tests/storage/test_storage_crash.py calls for the CI version.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
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

from aiokafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from groupd.coordinator.core.partitioning import partition_for  # noqa: E402
from groupd.protocol import ErrorCode  # noqa: E402
from groupd.protocol.apis import ApiKey  # noqa: E402
from groupd.storage.records_plane.batches import iter_batches  # noqa: E402
from tests.support.process import GroupdProcess, WireClient, free_port  # noqa: E402

TOPIC = "t"
TOPIC_PARTITIONS = 4
SERVER_SETTINGS = (f"topics={TOPIC}:{TOPIC_PARTITIONS}", "offsets.topic.segment.bytes=16384",
                   "log.cleaner.backoff.ms=100", "min.cleanable.dirty.ratio=0.05",
                   "log.cleaner.delete.retention.ms=0")
DATA_TOPIC, DATA_PARTITIONS = "r", 3
# both topics in one `topics` setting; 1 MiB segments (the smallest log.segment.bytes) so that kills
# land around data segment rolls too
RECORDS_SETTINGS = (f"topics={TOPIC}:{TOPIC_PARTITIONS},{DATA_TOPIC}:{DATA_PARTITIONS}", *SERVER_SETTINGS[1:],
                    "log.segment.bytes=1048576")
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
    records_sent: int = 0
    records_acked: int = 0
    records_unacked_landed: int = 0  # records found after a restart whose produce was not acknowledged
    records_checked: int = 0  # records read back, summed over the restarts
    produce_errors: dict = dataclasses.field(default_factory=dict)  # error code name → batches
    data_truncations: int = 0  # data partitions whose load cut an incomplete tail


@dataclasses.dataclass
class RecordsState:
    """What the producers sent and were told, and what the last check read back."""
    sent: dict[bytes, int] = dataclasses.field(default_factory=dict)  # value → partition it was sent to
    acked: dict[tuple[int, int], bytes] = dataclasses.field(default_factory=dict)  # (partition, offset) → value
    stored: dict[int, list[bytes]] = dataclasses.field(default_factory=dict)  # partition → values by offset


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


def record_batch(values: list[bytes]) -> bytes:
    """A v2 batch (no producer id, base offset 0) of `values`, stamped now as a producer would."""
    now = int(time.time() * 1000)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=now, key=None, value=v, headers=[])
    return bytes(b.build())


class RecordProducer(threading.Thread):
    """One connection producing batches with acks=-1 to the data topic until `stop`; reconnects after
    a kill. A batch whose reply did not arrive is never resent, so every value is sent once."""

    def __init__(self, name: str, bootstrap: str, state: RecordsState, stats: Stats, lock: threading.Lock,
                 stop: threading.Event, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.tag, self.bootstrap, self.state, self.stats = name, bootstrap, state, stats
        self.lock, self.stop, self.rng = lock, stop, rng
        self.seq = 0
        self.failure: BaseException | None = None  # a bug in the loop itself, raised by `run()`

    def run(self) -> None:
        try:
            self._storm()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            self.failure = e

    def _storm(self) -> None:
        client = None
        while not self.stop.is_set():
            if client is None:
                try:
                    client = WireClient(self.bootstrap, client_id="crash-loop-producer", timeout=5)
                except OSError:
                    time.sleep(0.02)
                    continue
            partition = self.rng.randrange(DATA_PARTITIONS)
            values = []
            for _ in range(self.rng.randint(1, 20)):
                self.seq += 1
                values.append(f"{self.tag}-{self.seq}-".encode() + b"x" * self.rng.randint(0, 300))
            with self.lock:
                for v in values:
                    self.state.sent[v] = partition
                self.stats.records_sent += len(values)
            try:
                reply = client.request(ApiKey.PRODUCE, 8, {
                    "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=10), "topic_data": [
                        {"name": DATA_TOPIC, "partition_data": [{"index": partition,
                                                                 "records": record_batch(values)}]}]})
            except (OSError, ConnectionError, AssertionError):
                client.close()
                client = None
                continue
            part = reply.responses[0].partition_responses[0]
            with self.lock:
                if part.error_code is ErrorCode.none:
                    for i, v in enumerate(values):
                        self.state.acked[(partition, part.base_offset + i)] = v
                    self.stats.records_acked += len(values)
                else:  # e.g. while the partition loads; the batch was not written
                    name = part.error_code.name
                    self.stats.produce_errors[name] = self.stats.produce_errors.get(name, 0) + 1
            if part.error_code is not ErrorCode.none:
                time.sleep(0.01)
        if client is not None:
            client.close()


def fetch_records(bootstrap: str, timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """partition → [(offset, value)] of every record of the data topic, read with Fetch v12 from offset 0
    up to the high watermark, retrying while the partitions load. Each batch's CRC is checked."""
    from tests.storage.test_records_plane import fetch_request

    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(DATA_PARTITIONS)}
    position = dict.fromkeys(range(DATA_PARTITIONS), 0)
    high: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    with WireClient(bootstrap, client_id="crash-check", timeout=30) as c:
        while len(high) < DATA_PARTITIONS or any(position[p] < high[p] for p in position):
            if time.monotonic() > deadline:
                raise AssertionError(f"data partitions not read to their end within {timeout}s: "
                                     f"at {position}, high watermarks {high}")
            wanted = [(DATA_TOPIC, p, o) for p, o in position.items() if p not in high or o < high[p]]
            reply = c.request(ApiKey.FETCH, 12, fetch_request(wanted, max_bytes=16 << 20, partition_max=4 << 20))
            retry = False
            for part in reply.responses[0].partitions:
                p = part.partition_index
                if part.error_code is not ErrorCode.none:
                    retry = True  # still loading (or a leader being set up): ask again
                    continue
                high[p] = part.high_watermark
                for batch in iter_batches(part.records or b""):
                    if not batch.validate_crc():
                        raise AssertionError(f"{DATA_TOPIC}-{p}: a batch at {batch.base_offset} fails its CRC")
                    for record in batch:
                        out[p].append((record.offset, record.value))
                    position[p] = batch.next_offset
            if retry:
                time.sleep(0.02)
    return out


def verify_records(state: RecordsState, fetched: dict[int, list[tuple[int, bytes]]], stats: Stats,
                   cycle: int) -> None:
    seen: dict[bytes, tuple[int, int]] = {}
    for p, records in fetched.items():
        offsets = [o for o, _ in records]
        if offsets != list(range(len(offsets))):
            gap = next(i for i, o in enumerate(offsets) if o != i)
            raise AssertionError(f"cycle {cycle}: {DATA_TOPIC}-{p} offsets are not 0..{len(offsets) - 1}: "
                                 f"found {offsets[gap]} where {gap} belongs")
        values = [v for _, v in records]
        for o, v in records:
            if state.sent.get(v) != p:
                raise AssertionError(f"cycle {cycle}: {DATA_TOPIC}-{p}@{o} holds {v[:40]!r}, which was "
                                     f"never sent to that partition")
            if v in seen:
                raise AssertionError(f"cycle {cycle}: {v[:40]!r} is at {DATA_TOPIC}-{seen[v][0]}@{seen[v][1]} "
                                     f"and at {DATA_TOPIC}-{p}@{o}")
            seen[v] = (p, o)
        before = state.stored.get(p, [])
        if values[:len(before)] != before:
            changed = next((i for i, v in enumerate(before) if i >= len(values) or values[i] != v), len(before))
            raise AssertionError(f"cycle {cycle}: {DATA_TOPIC}-{p}@{changed} was read after an earlier restart "
                                 f"but is now {'gone' if changed >= len(values) else 'different'}")
        state.stored[p] = values
        stats.records_checked += len(values)
    for (p, o), v in state.acked.items():
        values = state.stored[p]
        if o >= len(values):
            raise AssertionError(f"cycle {cycle}: {DATA_TOPIC}-{p}@{o} acknowledged but the partition ends at "
                                 f"{len(values)} (lost)")
        if values[o] != v:
            raise AssertionError(f"cycle {cycle}: {DATA_TOPIC}-{p}@{o} acknowledged with {v[:40]!r} but holds "
                                 f"{values[o][:40]!r}")
    acked_values = set(state.acked.values())
    stats.records_unacked_landed = sum(len(vs) for vs in state.stored.values()) - len(acked_values)


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
        groups_per_committer: int = 3, seed: int | None = None, progress=None, records: bool = False,
        producers: int = 2) -> Stats:
    """Run the crash loop; raises AssertionError on the first lost or invented commit (or, with
    `records`, the first lost, moved, duplicated or invented record)."""
    rng = random.Random(seed)
    stats = Stats()
    settings = RECORDS_SETTINGS if records else SERVER_SETTINGS
    data = RecordsState()
    groups = spread_groups(committers * groups_per_committer)
    keys = {(g, TOPIC, p): KeyState() for g in groups for p in range(TOPIC_PARTITIONS)}
    lock = threading.Lock()
    port = free_port()
    started = time.monotonic()
    for cycle in range(1, cycles + 1):
        if seconds is not None and time.monotonic() - started > seconds:
            break
        server = GroupdProcess(data_dir, *settings, FLUSH_MODES[cycle % 2], port=port)
        since = len(server.log()) if os.path.exists(server.log_path) else 0
        server.start()
        if rng.random() < 0.15:  # now and then, kill it while it is still loading
            time.sleep(rng.uniform(0, 0.02))
            loaded = "offsets log loaded" in server.log()[since:]
            server.kill()
            stats.killed_while_loading += not loaded
            since = len(server.log())
            server = GroupdProcess(data_dir, *settings, FLUSH_MODES[cycle % 2], port=port)
            server.start()
        text = wait_loaded(server, since)
        if "partition load failed" in text:
            raise AssertionError(f"cycle {cycle}: a partition failed to load:\n{text[-3000:]}")
        # every commit acknowledged before the previous kill is there
        verify(keys, fetch_all(server.bootstrap, groups), stats, cycle)
        if records:  # and every acknowledged record
            verify_records(data, fetch_records(server.bootstrap), stats, cycle)

        stop = threading.Event()
        threads = [Committer(server.bootstrap, groups[i::committers], keys, stats, lock, stop,
                             random.Random(rng.random())) for i in range(committers)]
        if records:
            threads += [RecordProducer(f"c{cycle}p{i}", server.bootstrap, data, stats, lock, stop,
                                       random.Random(rng.random())) for i in range(producers)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.05, 2.0))
        server.kill()
        stop.set()
        for t in threads:
            t.join(10)
            if getattr(t, "failure", None) is not None:
                raise t.failure
        text = server.log()[since:]
        stats.torn_tails += text.count("torn tail truncated")
        stats.compactions += len(re.findall(r"compacted partition=", text))
        stats.data_truncations += len(re.findall(r"data partition loaded .* truncated=", text))
        stats.cycles = cycle
        if progress:
            progress(cycle, stats)
    # the last kill, checked by one more start
    server = GroupdProcess(data_dir, *settings, port=port)
    since = len(server.log()) if os.path.exists(server.log_path) else 0
    server.start()
    try:
        text = wait_loaded(server, since)
        if "partition load failed" in text:
            raise AssertionError(f"final start: a partition failed to load:\n{text[-3000:]}")
        verify(keys, fetch_all(server.bootstrap, groups), stats, stats.cycles + 1)
        if records:
            verify_records(data, fetch_records(server.bootstrap), stats, stats.cycles + 1)
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
    ap.add_argument("--records", action="store_true",
                    help="also produce records with acks=-1 during the storm and read them all back after each restart")
    ap.add_argument("--producers", type=int, default=2, help="with --records: producing connections")
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
                  f"compactions={s.compactions} unacked_landed={s.unacked_landed}"
                  + (f" records_acked={s.records_acked} records_sent={s.records_sent} "
                     f"records_unacked_landed={s.records_unacked_landed}" if args.records else ""), flush=True)

    try:
        stats = run(data_dir, args.cycles, seconds=None if args.minutes is None else args.minutes * 60,
                    committers=args.committers, seed=seed, progress=progress, records=args.records,
                    producers=args.producers)
    except AssertionError as e:
        print(f"FAILED (seed={seed}, data dir kept at {data_dir}): {e}", flush=True)
        return 1
    print(f"OK: {stats.cycles} kill -9 cycles in {stats.seconds:.0f} s, {stats.commits_acked} partition commits "
          f"acknowledged ({stats.commits_sent} sent), all acknowledged offsets found after every restart; "
          f"torn tails truncated={stats.torn_tails}, compactions={stats.compactions}, kills while loading="
          f"{stats.killed_while_loading}, unacknowledged commits that landed={stats.unacked_landed}, "
          f"error replies={stats.errors or 'none'}")
    if args.records:
        print(f"    records: {stats.records_acked} acknowledged with acks=-1 ({stats.records_sent} sent), every one at "
              f"its acknowledged offset after every restart, offsets without gaps, no duplicates; "
              f"{stats.records_checked} read back in all, unacknowledged records that landed="
              f"{stats.records_unacked_landed}, data partitions truncated at load={stats.data_truncations}, "
              f"produce error replies={stats.produce_errors or 'none'}")
    if not args.keep and args.data_dir is None:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
