"""Compaction of a data partition's closed segments (storage/records_plane/cleaner.py), blocking and
without a server: the latest record per key survives at its offset, the active segment is never
touched, a record without a key goes, a tombstone stays until its delete horizon, what a producer's
state is rebuilt from survives, and a crash mid-clean leaves a log that loads with every record."""

from __future__ import annotations

import os
import struct
import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from groupd.storage.log import CLEANED_SUFFIX
from groupd.storage.records_plane.batches import iter_batches
from groupd.storage.records_plane.cleaner import DELETE_HORIZON_FLAG, compact_segments
from groupd.storage.records_plane.segments import DataLog, read_from

TOPIC_ID = uuid.uuid4()
NOW = 1_700_000_000_000
DAY = 86_400_000


def keyed(base: int, records: list[tuple[bytes | None, bytes | None]], pid: int = -1, seq: int = -1,
          headers=()) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=pid,
                                  producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, batch_size=1 << 24)
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=NOW + base + i, key=k, value=v, headers=list(headers))
    data = b.build()
    struct.pack_into(">q", data, 0, base)
    return bytes(data)


def log_of(tmp_path) -> DataLog:
    dlog = DataLog(str(tmp_path), "t", 0, TOPIC_ID, 1 << 20)
    dlog.load_batches()
    return dlog


def append(dlog: DataLog, records, roll: bool = False, **kw) -> None:
    if roll:
        dlog.roll(dlog.next_offset)
    data = keyed(dlog.next_offset, records, **kw)
    dlog.write_batches(data, len(records), [(dlog.next_offset, len(data), NOW)])


def compact(dlog: DataLog, now: int = NOW, retention: int = DAY, **kw):
    return compact_segments(dlog.directory, [p for _, p in dlog.segments[:-1]], now, retention, **kw)


def records(dlog: DataLog, offset: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from `offset` on, read as a Fetch reads."""
    out = []
    while offset < dlog.next_offset:
        path, position, cap, inode = dlog.plan_read(offset)
        data = read_from(path, position, offset, dlog.next_offset, 1 << 20, True, dlog.following(path), cap, inode)
        if not data:
            break
        for b in iter_batches(data):
            for r in b:
                if r.offset >= offset:
                    out.append((r.offset, r.key, r.value))
            offset = b.base_offset + b.last_offset_delta + 1
    return out


def reloaded(tmp_path, dlog: DataLog) -> DataLog:
    dlog.close()
    return log_of(tmp_path)


def test_the_latest_record_per_key_survives_at_its_offset(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(b"a", b"1"), (b"b", b"1")])
    append(dlog, [(b"a", b"2"), (b"c", b"1")], roll=True)
    append(dlog, [(b"b", b"2")], roll=True)
    append(dlog, [(b"a", b"3")], roll=True)  # the active segment: not read, not touched
    result = compact(dlog)
    assert result.records_before == 5 and result.records_after == 3
    again = reloaded(tmp_path, dlog)
    assert records(again) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", b"2"), (5, b"a", b"3")]
    assert (again.log_start, again.next_offset) == (0, 6)
    # a fetch from an offset whose record is gone gets the next batch holding a later one
    assert records(again, 1) == records(again)


def test_a_segment_keeps_its_last_offset_when_its_records_all_go(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(b"a", b"1")])
    append(dlog, [(b"a", b"2")], roll=True)
    append(dlog, [(b"x", b"1")], roll=True)
    compact(dlog)
    first = dlog.segments[0][1]
    with open(first, "rb") as f:
        (b,) = iter_batches(f.read())
    assert (b.base_offset, b.last_offset_delta, len(list(b))) == (0, 0, 0)  # an empty batch header
    again = reloaded(tmp_path, dlog)
    assert records(again) == [(1, b"a", b"2"), (2, b"x", b"1")]


def test_records_without_a_key_are_removed(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(None, b"old"), (b"k", b"1")])  # written before the topic was compacted
    append(dlog, [(b"z", b"1")], roll=True)
    compact(dlog)
    assert records(reloaded(tmp_path, dlog)) == [(1, b"k", b"1"), (2, b"z", b"1")]


def test_a_rebuilt_batch_keeps_its_producer_last_offset_and_headers(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], pid=7, seq=0, headers=[("h", b"x")])
    append(dlog, [(b"z", b"1")], roll=True)
    compact(dlog)
    with open(dlog.segments[0][1], "rb") as f:
        (b,) = iter_batches(f.read())
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.base_offset, b.last_offset_delta) == (7, 0, 0, 0, 2)
    assert [(r.offset, r.key, r.headers) for r in b] == [(1, b"b", [("h", b"x")]), (2, b"a", [("h", b"x")])]
    seen = []
    again = DataLog(str(tmp_path), "t", 0, TOPIC_ID, 1 << 20)
    dlog.close()
    again.load_batches(seen.append)
    assert [(s.producer_id, s.base_sequence, s.count) for s in seen if s.producer_id == 7] == [(7, 0, 3)]


def test_a_producers_last_batch_stays_as_an_empty_batch(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(b"a", b"1")], pid=3, seq=0)
    append(dlog, [(b"b", b"1")])
    append(dlog, [(b"a", b"2"), (b"b", b"2")], roll=True)
    append(dlog, [(b"z", b"1")], roll=True)
    result = compact(dlog)
    assert result.producers_kept == 1
    dlog.close()
    seen = []
    again = DataLog(str(tmp_path), "t", 0, TOPIC_ID, 1 << 20)
    again.load_batches(seen.append)
    assert (seen[0].base_offset, seen[0].producer_id, seen[0].base_sequence, seen[0].count) == (0, 3, 0, 1)
    assert records(again) == [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"z", b"1")]


def test_a_tombstone_stays_for_delete_retention_after_its_first_clean(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(b"a", b"1"), (b"b", b"1")])
    append(dlog, [(b"a", None)], roll=True)  # the tombstone, its record stamped long ago
    append(dlog, [(b"z", b"1")], roll=True)
    append(dlog, [(b"y", b"1")], roll=True)
    first = compact(dlog, now=NOW + 10 * DAY)  # its time starts at the first clean, not at its timestamp
    assert first.horizon == NOW + 11 * DAY
    assert records(dlog) == [(1, b"b", b"1"), (2, b"a", None), (3, b"z", b"1"), (4, b"y", b"1")]
    with open(dlog.segments[1][1], "rb") as f:
        (b,) = iter_batches(f.read())
    assert b.attributes & DELETE_HORIZON_FLAG and b.first_timestamp == NOW + 11 * DAY
    assert [r.timestamp for r in b] == [NOW + 2]  # the record keeps its own timestamp
    compact(dlog, now=NOW + 11 * DAY - 1)
    assert (2, b"a", None) in records(dlog)
    compact(dlog, now=NOW + 11 * DAY)
    assert records(reloaded(tmp_path, dlog)) == [(1, b"b", b"1"), (3, b"z", b"1"), (4, b"y", b"1")]


@pytest.mark.parametrize("crash_after", [0, 1])
def test_a_crash_mid_clean_leaves_a_log_that_loads_with_every_latest_record(tmp_path, crash_after):
    dlog = log_of(tmp_path)
    for i in range(4):
        append(dlog, [(b"a", b"%d" % i), (b"k%d" % i, b"v")], roll=i > 0)
    append(dlog, [(b"z", b"1")], roll=True)
    before = {k: (o, v) for o, k, v in records(dlog)}
    with pytest.raises(RuntimeError):
        compact(dlog, crash_after=crash_after)
    assert any(n.endswith(CLEANED_SUFFIX) for n in os.listdir(dlog.directory))
    again = reloaded(tmp_path, dlog)
    assert not any(n.endswith(CLEANED_SUFFIX) for n in os.listdir(again.directory))
    after = records(again)
    assert {k: (o, v) for o, k, v in after} == before  # every key's latest value, at its offset
    assert (again.log_start, again.next_offset) == (0, 9)
    compact(again)
    assert {k: (o, v) for o, k, v in records(again)} == before


def test_a_read_planned_before_a_clean_reads_the_cleaned_segment_from_its_start(tmp_path):
    dlog = log_of(tmp_path)
    for i in range(200):  # several index entries in the first segment
        append(dlog, [(b"k%d" % (i % 3), b"x" * 100)])
    append(dlog, [(b"z", b"1")], roll=True)
    offset = 150
    path, position, cap, inode = dlog.plan_read(offset)
    assert position > 0
    result = compact(dlog)
    assert path in result.indexes
    data = read_from(path, position, offset, dlog.next_offset, 1 << 20, True, dlog.following(path), cap, inode)
    got = [(r.offset, r.key) for b in iter_batches(data) for r in b]
    assert got == [(197, b"k2"), (198, b"k0"), (199, b"k1")]
    dlog.indexes.update(result.indexes)  # what the loop does once the clean is over
    assert records(dlog, offset) == [(197, b"k2", b"x" * 100), (198, b"k0", b"x" * 100), (199, b"k1", b"x" * 100),
                                     (200, b"z", b"1")]


def test_batches_rebuilt_are_valid_kafka_batches(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(b"a", b"1"), (b"b", None), (b"a", b"2")])
    append(dlog, [(b"z", b"1")], roll=True)
    compact(dlog)
    with open(dlog.segments[0][1], "rb") as f:
        data = f.read()
    b = DefaultRecordBatch(data)
    assert b.validate_crc() and b.next_offset == 3


def test_tombstones_behind_a_corrupt_segment_stay_and_do_not_make_the_log_due_again(tmp_path):
    dlog = log_of(tmp_path)
    append(dlog, [(b"a", b"1"), (b"b", b"1")])
    append(dlog, [(b"a", None)], roll=True)
    append(dlog, [(b"z", b"1")], roll=True)
    assert compact(dlog).horizon == NOW + DAY
    with open(dlog.segments[0][1], "ab") as f:  # bad bytes in a closed segment: left for `groupd log repair`
        f.write(b"\x00" * 70)
    later = compact(dlog, now=NOW + 2 * DAY)
    assert later.segments_corrupt == 1 and later.horizon is None
    with open(dlog.segments[1][1], "rb") as f:  # an older value of `a` may hide in the corrupt bytes
        assert [(r.offset, r.key, r.value) for b in iter_batches(f.read()) for r in b] == [(2, b"a", None)]
