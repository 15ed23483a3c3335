"""A data partition's segments (storage/records_plane/segments.py), blocking and without a server:
batches written as producers sent them, read back by offset through the sparse index (one segment
per read, the first batch whole), rolled, recovered with the torn tail truncated and a corrupt batch
stepped over, and the directory of a deleted topic of the same name replaced."""

from __future__ import annotations

import os
import struct
import uuid

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from groupd.storage.log import segment_name
from groupd.storage.records_plane import segments
from groupd.storage.records_plane.batches import iter_batches
from groupd.storage.records_plane.segments import DataLog, read_from

TOPIC_ID = uuid.uuid4()


def batch(base: int, n: int, value: bytes = b"v", ts: int = 1_700_000_000_000) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=None, value=value, headers=[])
    data = b.build()
    struct.pack_into(">q", data, 0, base)
    return bytes(data)


def opened(tmp_path, segment_bytes: int = 1 << 20, topic_id=TOPIC_ID) -> DataLog:
    dlog = DataLog(str(tmp_path), "t", 0, topic_id, segment_bytes)
    dlog.load_batches()
    return dlog


def write(dlog: DataLog, n_batches: int, per_batch: int = 2, value: bytes = b"v") -> None:
    for _ in range(n_batches):
        data = batch(dlog.next_offset, per_batch, value)
        if not dlog.fits(len(data)):
            dlog.roll(dlog.next_offset)
        dlog.write_batches(data, per_batch, [(dlog.next_offset, len(data), 0)])


def read(dlog: DataLog, offset: int, max_bytes: int = 1 << 20, first_whole: bool = True) -> list[int]:
    path, position, cap, inode = dlog.plan_read(offset)
    data = read_from(path, position, offset, dlog.next_offset, max_bytes, first_whole, dlog.following(path), cap,
                     inode)
    return [b.base_offset for b in iter_batches(data)]


def test_reads_by_offset_across_index_intervals_and_segments(tmp_path):
    dlog = opened(tmp_path, segment_bytes=64 << 10)
    write(dlog, 400, value=b"x" * 300)  # ~370 bytes a batch: several index entries per segment, several segments
    assert len(dlog.segments) > 2 and dlog.next_offset == 800
    for offset in (0, 1, 2, 301, 555, 799):
        got = read(dlog, offset)
        assert got and got[0] == offset - offset % 2, offset
        assert all(b < dlog.next_offset for b in got)
    assert read(dlog, 800) == []
    one = len(batch(0, 2, b"x" * 300))
    assert len(read(dlog, 0, max_bytes=3 * one)) == 3
    assert len(read(dlog, 0, max_bytes=10)) == 1  # the first batch whole (KIP-74)
    assert read(dlog, 0, max_bytes=10, first_whole=False) == []


def test_a_read_stops_at_the_end_it_was_given(tmp_path):
    dlog = opened(tmp_path)
    write(dlog, 5)
    path, position, _, _ = dlog.plan_read(0)
    data = read_from(path, position, 0, 6, 1 << 20, True)
    assert [b.base_offset for b in iter_batches(data)] == [0, 2, 4]


def test_recovery_truncates_a_torn_tail_and_keeps_the_index(tmp_path):
    dlog = opened(tmp_path)
    write(dlog, 10)
    dlog.close()
    path = dlog.segments[-1][1]
    with open(path, "ab") as f:
        f.write(batch(20, 2)[:30])  # a write cut short by a crash
    again = opened(tmp_path)
    assert again.next_offset == 20 and read(again, 18) == [18]
    assert os.path.getsize(path) == again.size


def test_recovery_steps_over_a_corrupt_batch(tmp_path):
    dlog = opened(tmp_path)
    write(dlog, 3)
    dlog.close()
    path = dlog.segments[-1][1]
    with open(path, "r+b") as f:
        size = len(batch(0, 2))
        f.seek(size + 40)  # inside the second batch's CRC-covered bytes
        f.write(b"\xff\xff")
    seen = []
    again = DataLog(str(tmp_path), "t", 0, TOPIC_ID, 1 << 20)
    result = again.load_batches(seen.append)
    assert [b.base_offset for b in seen] == [0, 4] and result.damage
    assert again.next_offset == 6


def test_a_deleted_topics_directory_is_replaced(tmp_path):
    dlog = opened(tmp_path)
    write(dlog, 3)
    dlog.close()
    again = opened(tmp_path, topic_id=uuid.uuid4())
    assert again.next_offset == 0 and again.log_start == 0


def test_retention_deletes_whole_closed_segments(tmp_path):
    dlog = opened(tmp_path, segment_bytes=4096)
    write(dlog, 60, value=b"x" * 200)
    n = len(dlog.segments)
    expired = dlog.expired_segments(retention_bytes=8192, retention_ms=-1, now_ms=0)
    assert 0 < len(expired) < n
    dlog.drop_segments(len(expired))
    assert dlog.log_start == dlog.segments[0][0] > 0
    assert segments.INDEX_INTERVAL == 4096


def test_a_saved_log_start_is_loaded_and_closed_segments_below_it_go(tmp_path):
    dlog = opened(tmp_path, segment_bytes=4096)
    write(dlog, 60, value=b"x" * 200)
    bases = [base for base, _ in dlog.segments]
    target = bases[2] + 1  # inside the third segment
    dlog.save_log_start(target)
    dropped = dlog.advance_log_start(target)
    assert [os.path.basename(p) for p in dropped] == [segment_name(b) for b in bases[:2]]
    assert dlog.log_start == target and dlog.segments[0][0] == bases[2]
    assert read(dlog, target)[0] == target - target % 2  # the batch holding it, whole
    dlog.close()
    for path in dropped:
        os.remove(path)
    again = opened(tmp_path, segment_bytes=4096)
    assert (again.log_start, again.next_offset) == (target, 120)


def test_retention_also_removes_segments_wholly_below_the_log_start(tmp_path):
    dlog = opened(tmp_path, segment_bytes=4096)
    write(dlog, 60, value=b"x" * 200)
    dlog.start_checkpoint = dlog.segments[3][0]  # saved, the segments not dropped yet (a roll was running)
    assert dlog.expired_segments(-1, -1, 0) == dlog.segments[:3]


def test_a_log_that_ends_below_its_saved_start_starts_empty_there(tmp_path):
    """Kafka's loader: segments lost their tail (a power cut under log.flush.interval.ms)."""
    dlog = opened(tmp_path)
    write(dlog, 5)
    dlog.save_log_start(50)
    dlog.close()
    again = opened(tmp_path)
    assert (again.log_start, again.next_offset, [b for b, _ in again.segments]) == (50, 50, [50])
    assert sorted(n for n in os.listdir(again.directory) if n.endswith(".log")) == [segment_name(50)]


def test_a_damaged_log_start_file_stops_the_load(tmp_path):
    dlog = opened(tmp_path)
    dlog.close()
    with open(os.path.join(dlog.directory, segments.LOG_START_FILE), "w") as f:
        f.write("0\n1\nt 0 many\n")
    try:
        opened(tmp_path)
    except OSError as e:
        assert segments.LOG_START_FILE in str(e) and "damaged" in str(e)
    else:
        raise AssertionError("a damaged log start file was ignored")


def groupd_log(*args: str):
    import subprocess
    import sys

    from tests.support.process import ROOT

    return subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_log_dump_verify_and_repair_read_data_partitions(tmp_path):
    import base64
    import json

    dlog = opened(tmp_path)
    write(dlog, 3, value=b"hello")
    dlog.close()
    data_dir = str(tmp_path)
    out = groupd_log("dump", "--data-dir", data_dir, "--topic", "t")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["offset"], base64.b64decode(r["value"])) for r in lines] == [(i, b"hello") for i in range(6)]
    verified = groupd_log("verify", "--data-dir", data_dir)
    assert verified.returncode == 0 and "partition t-0: OK segments=1 batches=3 records=6" in verified.stdout, \
        verified.stdout
    path = dlog.segments[-1][1]
    with open(path, "r+b") as f:  # corrupt the middle batch
        f.seek(len(batch(0, 2, b"hello")) + 40)
        f.write(b"\xff\xff")
    verified = groupd_log("verify", "--data-dir", data_dir)
    assert verified.returncode == 1 and "partition t-0: ERROR" in verified.stdout, verified.stdout
    repaired = groupd_log("repair", "--data-dir", data_dir, "--topic", "t")
    assert repaired.returncode == 0 and "partition t-0: repaired" in repaired.stdout, repaired.stdout + repaired.stderr
    assert groupd_log("verify", "--data-dir", data_dir).returncode == 0
    again = opened(tmp_path)
    assert again.next_offset == 6 and read(again, 0) == [0, 4]


def test_cluster_stamps_fence_a_deposed_leaders_late_writes(tmp_path):
    """Cluster mode: each leader writes segments of its claim's stamp from the offset it found on; a
    deposed leader's writes after that (its own file, offsets the next leader took) are never read."""
    old = DataLog(str(tmp_path), "t", 0, TOPIC_ID, 1 << 20, stamp=5)
    old.load_batches()
    write(old, 5, value=b"old")  # offsets 0..9
    new = DataLog(str(tmp_path), "t", 0, TOPIC_ID, 1 << 20, stamp=7)
    new.load_batches()
    assert new.next_offset == 10 and new.segments[-1][1].endswith("-7.log")
    write(old, 2, value=b"late")  # the deposed leader, still writing: 10..13 in its own file
    write(new, 1, value=b"new")  # 10..11
    old.close()
    new.close()
    again = DataLog(str(tmp_path), "t", 0, TOPIC_ID, 1 << 20, stamp=9)
    seen = []
    again.load_batches(seen.append)
    assert again.next_offset == 12 and [b.base_offset for b in seen] == [0, 2, 4, 6, 8, 10]
    path, position, cap, _ = again.plan_read(10)
    data = read_from(path, position, 10, again.next_offset, 1 << 20, True, again.following(path), cap)
    assert [(b.base_offset, bytes(next(iter(b)).value)) for b in iter_batches(data)] == [(10, b"new")]
    path, position, cap, _ = again.plan_read(8)  # the old stamp's last counted batch, then on to the next stamp
    data = read_from(path, position, 8, again.next_offset, 1 << 20, True, again.following(path), cap)
    assert [b.base_offset for b in iter_batches(data)] == [8]
    data = read_from(path, position, 9, again.next_offset, 1 << 20, True, again.following(path), cap)
    assert [b.base_offset for b in iter_batches(data)] == [8]
