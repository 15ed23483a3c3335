"""The share-state log (storage/share_state.py): Kafka's ShareSnapshot key and value bytes (share-groups
spec §3.11), replay keeping the last snapshot per key, a torn tail cut, compaction to the live keys,
and the hand-over between a data partition's leaders (stamped segments)."""

from __future__ import annotations

import os
import struct
import uuid

import pytest

from groupd.storage.share_state import (
    Deposed,
    ShareStateLog,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    take_over,
)

TOPIC = uuid.UUID("5b2f0c1e-8d4a-4b7e-9f10-2a3b4c5d6e7f")
KEY = ("g", TOPIC, 3)


def test_key_and_value_bytes_are_kafkas_share_snapshot():
    assert encode_key(KEY) == struct.pack(">hh", 0, 1) + b"g" + TOPIC.bytes + struct.pack(">i", 3)
    value = encode_value((2, 1, 10, [(10, 12, 2, 1), (13, 13, 0, 3)]), 1234)
    expected = (struct.pack(">hiiiqqq", 0, 2, 1, 0, 10, 1234, 1234) + b"\x03"
                + struct.pack(">qqbh", 10, 12, 2, 1) + b"\x00" + struct.pack(">qqbh", 13, 13, 0, 3) + b"\x00" + b"\x00")
    assert value == expected
    assert decode_key(encode_key(KEY)) == KEY
    assert decode_value(value) == (2, 1, 10, [(10, 12, 2, 1), (13, 13, 0, 3)])


def test_replay_keeps_the_last_snapshot_and_cuts_a_torn_tail(tmp_path):
    log = ShareStateLog(str(tmp_path))
    assert log.load() == {}
    other = ("g", TOPIC, 4)
    log.write([(KEY, (0, 0, 5, [(5, 5, 2, 1)]))], 1)
    log.write([(KEY, (1, 0, 7, [])), (other, (0, 0, 0, [(0, 0, 4, 1)]))], 2)
    with open(log.path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00")  # a batch cut short by a crash
    again = ShareStateLog(str(tmp_path))
    assert again.load() == {KEY: (1, 0, 7, []), other: (0, 0, 0, [(0, 0, 4, 1)])}
    again.write([(KEY, (2, 0, 8, []))], 3)
    assert ShareStateLog(str(tmp_path)).load()[KEY] == (2, 0, 8, [])


def test_compaction_keeps_only_the_live_snapshots(tmp_path):
    log = ShareStateLog(str(tmp_path))
    for i in range(1100):
        log.write([(KEY, (i, 0, i, []))], i)
    assert log.records < 1100 and os.path.getsize(log.path) < 1100 * 40
    assert ShareStateLog(str(tmp_path)).load() == {KEY: (1099, 0, 1099, [])}


def test_a_tombstone_deletes_the_state(tmp_path):
    log = ShareStateLog(str(tmp_path))
    log.write([(KEY, (0, 0, 5, []))], 1)
    log.write([(KEY, None)], 2)
    assert log.live == {} and ShareStateLog(str(tmp_path)).load() == {}


def test_a_new_leader_takes_over_the_newest_earlier_state_and_fences_the_older(tmp_path):
    """Each leader writes a segment of its own stamp, started from the newest earlier one's live
    snapshots; what a deposed leader writes late is in its own file, which no later leader reads, and
    a leader that finds a later stamp than its own is deposed."""
    d = str(tmp_path / "p")
    first = take_over(d, 5, 1)
    first.write([(KEY, (0, 0, 3, []))], 1)
    second = take_over(d, 7, 2)
    assert second.live == {KEY: (0, 0, 3, [])} and os.listdir(d) == ["00000000000000000007.log"]
    first.write([(KEY, (1, 0, 9, []))], 3)  # the deposed leader, late: its own file again
    assert take_over(d, 8, 4).live == {KEY: (0, 0, 3, [])}
    with pytest.raises(Deposed):
        take_over(d, 7, 5)
    assert take_over(d, 8, 6).live == {KEY: (0, 0, 3, [])}  # its own segment, loaded as it is
