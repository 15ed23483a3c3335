"""Loading a damaged offsets log (design "Storage layout", spec §12.6), against the real server:

* a torn or corrupt tail of the last segment is truncated with a log line, and everything before
  it loads;
* corrupt bytes anywhere else (the active segment's middle, a closed segment) are stepped over: every
  valid batch after them loads, an ERROR line names file, byte and size, the partition serves, and
  `groupd log verify` exits 1 naming the problem; `groupd log repair` rewrites the partition without
  them, keeping the originals;
* `groupd log verify` also finds offsets that do not grow and a missing segment;
* a compaction that crashed before its rename leaves a `.cleaned` file that the load removes, and
  every latest offset is intact;
* compaction keeps the latest value per key at its original offset and drops tombstones past the
  delete horizon.

The data directory is written once by the real server (small segments, so a partition has several),
and each test damages its own copy.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from groupd.coordinator.core.partition import GroupSettings, GroupShard
from groupd.coordinator.core.partitioning import partition_for
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage.compaction import compact
from groupd.storage.log import CLEANED_SUFFIX, PartitionLog, list_segments, partition_dir
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record
from groupd.storage.scanner import scan
from tests.support.process import ROOT, GroupdProcess, WireClient, join_and_sync

E = ErrorCode
SEGMENT_BYTES = 2048
SETTINGS = ("topics=t:4", f"offsets.topic.segment.bytes={SEGMENT_BYTES}", "group.initial.rebalance.delay.ms=0",
            "log.cleaner.backoff.ms=3600000")  # no automatic compaction: the tests compact by hand
TORN, MANY, OTHER = "torn-tail", "many-segments", "other-partition"
TORN_OFFSETS = list(range(100, 110))  # one commit each to (t, 0): ten batches in one segment
SESSION = datetime.timedelta(seconds=30)
MANY_COMMITS = 80  # to (t, i % 4): several segments, most records superseded
OTHER_OFFSETS = {0: 7, 1: 8, 2: 9, 3: 10}


# -- wire helpers --------------------------------------------------------------------------------------

def commit(c: WireClient, group: str, offsets: dict[int, int], *, generation: int = -1, member_id: str = "",
           metadata: str = "") -> dict[int, ErrorCode]:
    reply = c.request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": metadata}
            for p, o in offsets.items()]}]})
    return {p.partition_index: p.error_code for t in reply.topics for p in t.partitions}


def fetch(c: WireClient, group: str) -> tuple[ErrorCode, dict[int, int]]:
    """The group-level error and {partition: offset} of topic t."""
    reply = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                               "require_stable": False})
    g = reply.groups[0]
    return g.error_code, {p.partition_index: p.committed_offset for t in g.topics if t.name == "t" for p in t.partitions}


def heartbeat(c: WireClient, group: str, member_id: str, generation: int) -> ErrorCode:
    return c.request(ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                           "group_instance_id": None}).error_code


def groupd_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupd.coordinator", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def dump(data_dir: str, partition: int) -> list[dict]:
    out = groupd_cli("log", "dump", "--data-dir", data_dir, "--partition", str(partition))
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def wait_loaded(server: GroupdProcess, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = server.log()
        if "offsets log loaded" in text:
            return text
        time.sleep(0.02)
    raise AssertionError(f"not loaded:\n{server.log()}")


# -- the data directory, written by the real server ----------------------------------------------------

@pytest.fixture(scope="module")
def original(tmp_path_factory) -> dict:
    partitions = {g: partition_for(g, 50) for g in (TORN, MANY, OTHER)}
    assert len(set(partitions.values())) == 3, partitions
    data_dir = str(tmp_path_factory.mktemp("recovery-original"))
    server = GroupdProcess(data_dir, *SETTINGS).start()
    latest_many = {}
    try:
        with WireClient(server.bootstrap) as c:
            wait_loaded(server)
            for offset in TORN_OFFSETS:
                assert commit(c, TORN, {0: offset}) == {0: E.none}
            member_id, generation = join_and_sync(c, MANY, session=SESSION)
            for i in range(MANY_COMMITS):
                assert commit(c, MANY, {i % 4: 1000 + i}, generation=generation, member_id=member_id,
                              metadata="x" * 40) == {i % 4: E.none}
                latest_many[i % 4] = 1000 + i
            assert commit(c, OTHER, OTHER_OFFSETS) == {p: E.none for p in OTHER_OFFSETS}
    finally:
        assert server.stop() == 0, server.log()
    many_segments = list_segments(partition_dir(data_dir, partitions[MANY]))
    torn_segments = list_segments(partition_dir(data_dir, partitions[TORN]))
    assert len(many_segments) >= 4, "the partition of MANY spans several segments"
    assert len(torn_segments) == 1
    return {"dir": data_dir, "partitions": partitions, "latest_many": latest_many, "member_id": member_id,
            "generation": generation}


@pytest.fixture
def data(original, tmp_path) -> dict:
    """A private copy of the original data directory."""
    copy = str(tmp_path / "data")
    shutil.copytree(original["dir"], copy, ignore=shutil.ignore_patterns("groupd-*.log"))
    return {**original, "dir": copy}


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(data_dir: str) -> GroupdProcess:
        server = GroupdProcess(data_dir, *SETTINGS).start()
        servers.append(server)
        wait_loaded(server)
        return server

    yield start
    for s in servers:
        s.stop()


def segment_batches(path: str):
    with open(path, "rb") as f:
        found = scan(f.read())
    assert found.tail is None and not found.damage
    return found.batches


def flip_byte(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x10]))


# -- torn and corrupt tails ------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", ["after-base-offset", "mid-length", "mid-header", "end-of-header",
                                 "mid-record", "one-byte-short"])
def test_torn_tail_of_the_last_segment_is_truncated_and_the_rest_loads(data, serve, cut):
    p = data["partitions"][TORN]
    (_, path), = list_segments(partition_dir(data["dir"], p))
    last = segment_batches(path)[-1]
    cut_at = last.position + {"after-base-offset": 8, "mid-length": 10, "mid-header": 30, "end-of-header": 61,
                              "mid-record": last.size // 2 + 20, "one-byte-short": last.size - 1}[cut]
    with open(path, "r+b") as f:
        f.truncate(cut_at)

    server = serve(data["dir"])
    log = server.log()
    assert re.search(rf"partition {p}: torn tail truncated: {re.escape(path)}: truncated {cut_at - last.position} "
                     rf"bytes at byte {last.position} ", log), log
    assert f"partition loaded partition={p} records={len(TORN_OFFSETS) - 1} " in log
    assert "active=50 failed=0" in log
    assert os.path.getsize(path) == last.position
    with WireClient(server.bootstrap) as c:
        assert fetch(c, TORN) == (E.none, {0: TORN_OFFSETS[-2]})  # everything before the torn batch
        assert fetch(c, OTHER) == (E.none, OTHER_OFFSETS)
        # appends carry on after the cut, and survive a restart
        assert commit(c, TORN, {0: 500}) == {0: E.none}
    server.stop()
    server = serve(data["dir"])
    assert "torn tail" not in server.log().split("groupd ready")[-1]
    with WireClient(server.bootstrap) as c:
        assert fetch(c, TORN) == (E.none, {0: 500})


@pytest.mark.parametrize("where", ["records", "crc-field", "attributes"])
def test_bit_flip_in_the_last_batch_of_the_last_segment_is_truncated(data, serve, where):
    p = data["partitions"][TORN]
    (_, path), = list_segments(partition_dir(data["dir"], p))
    last = segment_batches(path)[-1]
    flip_byte(path, last.position + {"records": last.size - 10, "crc-field": 18, "attributes": 22}[where])

    server = serve(data["dir"])
    log = server.log()
    assert re.search(rf"partition {p}: torn tail truncated: {re.escape(path)}: truncated {last.size} bytes at byte "
                     rf"{last.position} \(CRC mismatch\)", log), log
    assert os.path.getsize(path) == last.position
    with WireClient(server.bootstrap) as c:
        assert fetch(c, TORN) == (E.none, {0: TORN_OFFSETS[-2]})


# -- corrupt bytes in the middle: every valid batch after them loads ---------------------------------------

def test_bit_flip_in_the_middle_of_the_active_segment_keeps_every_later_batch(data, serve):
    p = data["partitions"][TORN]
    (_, path), = list_segments(partition_dir(data["dir"], p))
    batches = segment_batches(path)
    bad = batches[3]
    flip_byte(path, bad.position + bad.size - 5)
    size = os.path.getsize(path)

    server = serve(data["dir"])
    log = server.log()
    assert re.search(rf"ERROR groupd.storage partition {p}: corrupt log bytes skipped, the valid batches around them "
                     rf"are loaded: {re.escape(path)}: {bad.size} bytes at byte {bad.position} skipped \(1 batches; "
                     r"CRC mismatch\); `groupd log repair`", log), log
    assert f"partition loaded partition={p} records={len(TORN_OFFSETS) - 1} " in log  # only the damaged batch is lost
    assert "torn tail" not in log
    assert os.path.getsize(path) == size, "bytes before valid batches are never truncated"
    with WireClient(server.bootstrap) as c:
        assert fetch(c, TORN) == (E.none, {0: TORN_OFFSETS[-1]})  # the six batches after it were loaded
        assert commit(c, TORN, {0: 600}) == {0: E.none}
    server.stop()
    server = serve(data["dir"])
    with WireClient(server.bootstrap) as c:
        assert fetch(c, TORN) == (E.none, {0: 600})
    offsets = [line["log_offset"] for line in dump(data["dir"], p) if "log_offset" in line]
    assert offsets == sorted(set(offsets)) and len(offsets) == len(TORN_OFFSETS), offsets  # still monotonic

    verify = groupd_cli("log", "verify", "--data-dir", data["dir"])
    assert verify.returncode == 1, verify.stdout
    assert re.search(rf"{os.path.basename(path)} byte {bad.position}: CRC mismatch \[CORRUPT active segment: "
                     rf"{bad.size} bytes, 1 batches skipped\]", verify.stdout), verify.stdout


def test_load_reports_what_it_skipped(tmp_path):
    _log_with(tmp_path, [[Record(key(n), value(n))] for n in range(5)], segment_bytes=1 << 20)
    (_, path), = list_segments(partition_dir(str(tmp_path), 0))
    second = segment_batches(path)[1]
    flip_byte(path, second.position + 30)
    applied = []
    result = PartitionLog(str(tmp_path), 0, 1 << 20).load(applied.append)
    assert [r.key.partition for r in applied] == [0, 2, 3, 4]
    (damage,) = result.damage
    assert (damage.path, damage.position, damage.size, damage.batches) == (path, second.position, second.size, 1)
    assert (result.corrupt_bytes, result.corrupt_batches, result.next_offset) == (second.size, 1, 5)
    assert result.truncated is None


def test_bit_flip_in_a_closed_segment_serves_the_partition_with_its_valid_batches(data, serve):
    p = data["partitions"][MANY]
    segments = list_segments(partition_dir(data["dir"], p))
    _, closed = segments[1]  # a closed segment (not the last)
    bad = segment_batches(closed)[2]
    flip_byte(closed, bad.position + bad.size - 5)
    with open(closed, "rb") as f:
        damaged = f.read()

    server = serve(data["dir"])
    log = server.log()
    assert re.search(rf"partition {p}: corrupt log bytes skipped, .*: {re.escape(closed)}: {bad.size} bytes at byte "
                     rf"{bad.position} skipped", log), log
    assert "offsets log loaded partitions=50 active=50 failed=0" in log
    assert re.search(rf"partition loaded partition={p} .* corrupt_bytes={bad.size} corrupt_batches=1", log), log
    with open(closed, "rb") as f:
        assert f.read() == damaged, "a closed segment is never truncated"
    assert [path for _, path in list_segments(partition_dir(data["dir"], p))] == [s for _, s in segments]

    with WireClient(server.bootstrap) as c:
        assert fetch(c, MANY) == (E.none, data["latest_many"])  # every later commit was loaded
        assert heartbeat(c, MANY, data["member_id"], data["generation"]) is E.none
        assert commit(c, MANY, {0: 2000}, generation=data["generation"], member_id=data["member_id"]) == {0: E.none}
        assert fetch(c, MANY) == (E.none, {**data["latest_many"], 0: 2000})
        assert fetch(c, OTHER) == (E.none, OTHER_OFFSETS)

    verify = groupd_cli("log", "verify", "--data-dir", data["dir"])
    assert verify.returncode == 1, verify.stdout
    assert re.search(rf"partition +{p}: ERROR .*\n +{os.path.basename(closed)} byte {bad.position}: CRC mismatch "
                     r"\[CORRUPT closed segment: \d+ bytes, 1 batches skipped\]", verify.stdout), verify.stdout
    assert re.search(rf"partition +{data['partitions'][OTHER]}: OK", verify.stdout)


# -- groupd log repair ---------------------------------------------------------------------------------

def test_log_repair_rewrites_a_partition_without_its_corrupt_bytes_and_keeps_the_originals(data, serve):
    p = data["partitions"][MANY]
    directory = partition_dir(data["dir"], p)
    _, closed = list_segments(directory)[1]
    bad = segment_batches(closed)[2]
    flip_byte(closed, bad.position + 20)
    originals = {}
    for _, path in list_segments(directory):
        with open(path, "rb") as f:
            originals[os.path.basename(path)] = f.read()
    before = [line for line in dump(data["dir"], p) if "error" not in line]

    repaired = groupd_cli("log", "repair", "--data-dir", data["dir"])
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    m = re.search(rf"partition +{p}: repaired, {bad.size} bad bytes dropped, 0 batches renumbered; originals in (\S+)",
                  repaired.stdout)
    assert m, repaired.stdout
    backup = m.group(1)
    assert backup.startswith(os.path.join(data["dir"], "repair-"))
    kept = {}
    for name in os.listdir(backup):
        with open(os.path.join(backup, name), "rb") as f:
            kept[name] = f.read()
    assert kept == originals, "the original segments, bad bytes included, are kept"

    verify = groupd_cli("log", "verify", "--data-dir", data["dir"])
    assert verify.returncode == 0, verify.stdout
    assert [line for line in dump(data["dir"], p)] == before  # the same records at the same offsets
    server = serve(data["dir"])
    assert "corrupt" not in server.log()
    with WireClient(server.bootstrap) as c:
        assert fetch(c, MANY) == (E.none, data["latest_many"])
    assert groupd_cli("log", "repair", "--data-dir", data["dir"]).returncode != 0, "a running server holds the lock"


def test_log_repair_of_a_healthy_directory_changes_nothing(data):
    repaired = groupd_cli("log", "repair", "--data-dir", data["dir"])
    assert (repaired.returncode, repaired.stdout) == (0, "nothing to repair\n")
    assert not [n for n in os.listdir(data["dir"]) if n.startswith("repair-")]


def test_log_verify_and_repair_of_offsets_written_by_two_logs_at_once(tmp_path):
    """Two servers on one data directory (what the lock now refuses) append the same offsets:
    verify names them, repair renumbers the later batches so offsets only grow, keeping every record
    in its replay order."""
    _log_with(tmp_path, [[Record(key(1), value(10))]], segment_bytes=1 << 20)
    first, second = (PartitionLog(str(tmp_path), 0, 1 << 20) for _ in range(2))
    first.load(lambda r: None)
    second.load(lambda r: None)
    first.append([Record(key(2), value(20))], fsync=False)
    second.append([Record(key(3), value(30)), Record(key(4), value(40))], fsync=False)  # offsets 1-2 again
    first.close()
    second.close()
    verify = groupd_cli("log", "verify", "--data-dir", str(tmp_path))
    assert verify.returncode == 1
    assert re.search(r"byte \d+: batch base offset 1 is not above offset 1 before it \[NON-INCREASING offsets\]",
                     verify.stdout), verify.stdout

    repaired = groupd_cli("log", "repair", "--data-dir", str(tmp_path), "--partition", "0")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "1 batches renumbered" in repaired.stdout
    assert groupd_cli("log", "verify", "--data-dir", str(tmp_path)).returncode == 0
    assert [(line["log_offset"], line["partition"]) for line in dump(str(tmp_path), 0)] == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_log_verify_finds_a_missing_segment(tmp_path):
    _log_with(tmp_path, [[Record(key(n), value(n))] for n in range(4)])  # one batch per segment
    segments = list_segments(partition_dir(str(tmp_path), 0))
    os.remove(segments[1][1])
    verify = groupd_cli("log", "verify", "--data-dir", str(tmp_path))
    assert verify.returncode == 1
    assert (f"{os.path.basename(segments[0][1])} -> {os.path.basename(segments[2][1])}: offsets 1..1 are in neither "
            "[MISSING segment]") in verify.stdout, verify.stdout


def test_log_verify_of_a_healthy_directory_exits_0(data):
    verify = groupd_cli("log", "verify", "--data-dir", data["dir"])
    assert verify.returncode == 0, verify.stdout
    assert "ERROR" not in verify.stdout
    assert re.search(rf"partition +{data['partitions'][TORN]}: OK segments=1 batches=10 records=10 ", verify.stdout)


def test_log_verify_reports_a_torn_tail(data):
    p = data["partitions"][TORN]
    (_, path), = list_segments(partition_dir(data["dir"], p))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    verify = groupd_cli("log", "verify", "--data-dir", data["dir"])
    assert verify.returncode == 1
    assert "torn tail" in verify.stdout and os.path.basename(path) in verify.stdout


# -- compaction --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_crash_in_the_middle_of_compaction_leaves_a_loadable_log(data, serve, crash_after):
    p = data["partitions"][MANY]
    directory = partition_dir(data["dir"], p)
    segments_before = list_segments(directory)
    with pytest.raises(RuntimeError, match="injected crash"):
        compact(directory, now_ms=int(time.time() * 1000), delete_retention_ms=0, crash_after=crash_after)
    leftovers = [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)]
    assert len(leftovers) == 1
    assert len(list_segments(directory)) <= len(segments_before)

    server = serve(data["dir"])
    assert "active=50 failed=0" in server.log()
    assert not [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)], "the leftover is removed at load"
    with WireClient(server.bootstrap) as c:
        assert fetch(c, MANY) == (E.none, data["latest_many"])
        assert heartbeat(c, MANY, data["member_id"], data["generation"]) is E.none  # the member was loaded too
        assert fetch(c, TORN) == (E.none, {0: TORN_OFFSETS[-1]})


def test_compaction_of_a_real_log_keeps_the_latest_offsets_at_their_original_positions(data, serve):
    p = data["partitions"][MANY]
    before = dump(data["dir"], p)
    latest = {}
    for line in before:
        latest[(line["type"], line.get("topic"), line.get("partition"))] = line
    result = compact(partition_dir(data["dir"], p), now_ms=int(time.time() * 1000), delete_retention_ms=0)
    assert result.segments_cleaned >= 1 and result.records_after < result.records_before
    after = dump(data["dir"], p)
    active_base = list_segments(partition_dir(data["dir"], p))[-1][0]
    closed_after = [line for line in after if line["log_offset"] < active_base]
    # every surviving closed record is the latest of its key, at its original offset, unchanged
    by_offset = {line["log_offset"]: line for line in before}
    for line in closed_after:
        assert line == by_offset[line["log_offset"]]
    kept = {(line["type"], line.get("topic"), line.get("partition")): line["log_offset"] for line in after}
    assert kept == {key: line["log_offset"] for key, line in latest.items()}
    assert len(after) < len(before)

    server = serve(data["dir"])
    with WireClient(server.bootstrap) as c:
        assert fetch(c, MANY) == (E.none, data["latest_many"])


def _log_with(tmp_path, batches: list[list[Record]], segment_bytes: int = 14) -> PartitionLog:
    """A partition of these batches; with the default tiny segment size every append rolls, so each
    segment holds one batch."""
    plog = PartitionLog(str(tmp_path), 0, segment_bytes=segment_bytes)
    plog.load(lambda record: None)
    for records in batches:
        plog.append(records, fsync=False)
    plog.close()
    return plog


def key(n: int) -> OffsetCommitKey:
    return OffsetCommitKey("g", "t", n)


def value(offset: int) -> OffsetCommitValue:
    return OffsetCommitValue(offset, -1, "", 1)


def test_compaction_keeps_latest_per_key_and_drops_tombstones_past_the_horizon(tmp_path):
    _log_with(tmp_path, [
        [Record(key(1), value(10))],                             # offset 0: superseded by offset 2
        [Record(key(2), value(20))],                             # offset 1: deleted by offset 3
        [Record(key(1), value(11)), Record(key(3), value(30))],  # offsets 2, 3
        [Record(key(2), None)],                                  # offset 4: tombstone
        [Record(key(3), value(31))],                             # offset 5
        [Record(key(4), value(40))],                             # offset 6: the active segment
    ])
    directory = partition_dir(str(tmp_path), 0)
    now = int(time.time() * 1000)

    # tombstones younger than the horizon stay
    result = compact(directory, now_ms=now, delete_retention_ms=3_600_000)
    offsets = [line["log_offset"] for line in dump(str(tmp_path), 0)]
    assert offsets == [2, 4, 5, 6]
    assert (result.records_before, result.records_after) == (6, 3)

    # past the horizon the tombstone goes too, and offsets are still the original ones
    compact(directory, now_ms=now + 7_200_000, delete_retention_ms=3_600_000)
    lines = dump(str(tmp_path), 0)
    assert [(line["log_offset"], line["partition"], line.get("offset")) for line in lines] == [
        (2, 1, 11), (5, 3, 31), (6, 4, 40)]
    # emptied segments keep their last offset (an empty batch header): the chain has no gap
    verify = groupd_cli("log", "verify", "--data-dir", str(tmp_path))
    assert verify.returncode == 0, verify.stdout

    # the compacted log loads to the same state, and appends continue after the last offset
    shard = GroupShard(0, GroupSettings(), lambda prefix: prefix)
    plog = PartitionLog(str(tmp_path), 0, segment_bytes=14)
    plog.load(shard.apply)
    assert {tp: v.offset for tp, v in shard.offsets["g"].items()} == {("t", 1): 11, ("t", 3): 31, ("t", 4): 40}
    assert plog.next_offset == 7
    plog.append([Record(key(5), value(50))], fsync=True)
    plog.close()
    assert dump(str(tmp_path), 0)[-1]["log_offset"] == 7


def test_compaction_leaves_a_corrupt_segment_as_it_is_and_compacts_around_it(tmp_path):
    _log_with(tmp_path, [
        [Record(key(1), value(10))],  # offset 0: superseded by offset 2
        [Record(key(2), value(20))],  # offset 1: corrupt, left for `groupd log repair`
        [Record(key(1), value(11))],  # offset 2
        [Record(key(2), None)],       # offset 3: a tombstone past the horizon, kept: it covers offset 1
        [Record(key(3), value(30))],  # offset 4: the active segment
    ])
    segments = list_segments(partition_dir(str(tmp_path), 0))
    flip_byte(segments[1][1], 40)
    with open(segments[1][1], "rb") as f:
        corrupt = f.read()
    result = compact(partition_dir(str(tmp_path), 0), now_ms=int(time.time() * 1000) + 7_200_000,
                     delete_retention_ms=3_600_000)
    assert (result.segments_corrupt, result.segments_cleaned) == (1, 1)
    with open(segments[1][1], "rb") as f:
        assert f.read() == corrupt
    assert [(line.get("log_offset"), line.get("error")) for line in dump(str(tmp_path), 0)] == [
        (None, "CRC mismatch"), (2, None), (3, None), (4, None)]


def test_compaction_keeps_a_closed_value_whose_newer_value_is_only_in_the_active_segment(tmp_path):
    """The active segment is not compacted and, with `log.flush.interval.ms` > 0 (or an append whose
    fsync is still running), its tail may not be durable: dropping an older, durable value of a key
    because of a newer one there would lose the key entirely on a power failure. Kafka's cleaner
    never looks past the active segment's base offset either."""
    _log_with(tmp_path, [
        [Record(key(1), value(10))],  # offset 0, closed
        [Record(key(2), value(20))],  # offset 1, closed
        [Record(key(1), value(11))],  # offset 2, the active segment
    ])
    compact(partition_dir(str(tmp_path), 0), now_ms=int(time.time() * 1000), delete_retention_ms=0)
    assert [line["log_offset"] for line in dump(str(tmp_path), 0)] == [0, 1, 2]


def test_log_verify_counts_the_records_of_a_compacted_log(tmp_path):
    """Compacted batches have gaps in their offsets: the record count comes from the batch header,
    not from the offset span."""
    _log_with(tmp_path, [
        [Record(key(1), value(10)), Record(key(2), value(20)), Record(key(1), value(11))],  # offsets 0-2
        [Record(key(3), value(30))],                                                        # the active segment
    ])
    compact(partition_dir(str(tmp_path), 0), now_ms=int(time.time() * 1000), delete_retention_ms=0)
    assert [line["log_offset"] for line in dump(str(tmp_path), 0)] == [1, 2, 3]
    verify = groupd_cli("log", "verify", "--data-dir", str(tmp_path))
    assert verify.returncode == 0, verify.stdout
    assert re.search(r"partition +0: OK segments=2 batches=2 records=3 ", verify.stdout), verify.stdout
