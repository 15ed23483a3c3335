"""The leader-epoch history of a data partition (storage/records_plane/leader_epochs.py), against the
answers of Kafka's `LeaderEpochFileCache` (its `endOffsetFor`, `assign`, `truncateFromEnd`,
`epochForOffset`) and its checkpoint file's text; and a disk log's history across reloads and leaders."""

from __future__ import annotations

import os

import pytest

from groupd.storage.records_plane.leader_epochs import CHECKPOINT_FILE, LeaderEpochs, parse, read_epochs
from groupd.storage.records_plane.segments import DataLog
from tests.storage.test_records_plane import batch


def history() -> LeaderEpochs:
    return LeaderEpochs([(0, 0), (2, 10), (5, 25)])


@pytest.mark.parametrize("asked, answer", [
    (5, (5, 40)),      # the latest epoch ends at the log end
    (2, (2, 25)),      # an older one where the next larger epoch begins
    (0, (0, 10)),
    (3, (2, 25)),      # an epoch never led: the largest one below it, ending where the next begins
    (4, (2, 25)),
    (1, (0, 10)),
    (6, (-1, -1)),     # larger than any known: undefined
    (-1, (-1, -1)),    # undefined asked: undefined
])
def test_end_offset_for_an_epoch(asked, answer):
    assert history().end_offset_for(asked, 40) == answer


def test_an_epoch_below_the_first_known_ends_where_the_first_begins():
    assert LeaderEpochs([(3, 100), (4, 150)]).end_offset_for(1, 200) == (1, 100)


def test_an_empty_history_knows_no_epoch():
    assert LeaderEpochs().end_offset_for(0, 7) == (-1, -1)
    assert LeaderEpochs().latest == -1


def test_assign_keeps_epochs_and_offsets_increasing():
    epochs = history()
    assert not epochs.assign(5, 30)  # the latest epoch again, from later: nothing to keep
    assert epochs.assign(7, 40)
    assert epochs.entries == [(0, 0), (2, 10), (5, 25), (7, 40)]
    assert epochs.assign(8, 20)  # a start below later entries replaces them (Kafka's non-monotonic truncation)
    assert epochs.entries == [(0, 0), (2, 10), (8, 20)]


def test_truncate_from_end_forgets_the_epochs_that_began_past_the_log_end():
    epochs = history()
    assert epochs.truncate_from_end(25)
    assert epochs.entries == [(0, 0), (2, 10)]
    assert not epochs.truncate_from_end(25)


def test_a_moved_log_start_trims_the_history_as_kafkas_truncate_from_start():
    assert history().from_start(0).entries == [(0, 0), (2, 10), (5, 25)]
    assert history().from_start(12).entries == [(2, 12), (5, 25)]
    assert history().from_start(25).entries == [(5, 25)]
    assert history().from_start(30).entries == [(5, 30)]
    assert history().from_start(12).end_offset_for(0, 40) == (0, 12)  # older than all known: the first start
    assert LeaderEpochs([(3, 100)]).from_start(50).entries == [(3, 100)]


def test_epoch_for_an_offset():
    assert [history().epoch_for(o) for o in (0, 9, 10, 24, 25, 99)] == [0, 0, 2, 2, 5, 5]
    assert LeaderEpochs([(3, 100)]).epoch_for(50) == -1


def test_the_checkpoint_text_is_kafkas():
    assert history().text() == "0\n3\n0 0\n2 10\n5 25\n"
    assert parse(history().text()).entries == history().entries


@pytest.mark.parametrize("text", ["1\n1\n0 0\n", "0\n2\n0 0\n", "0\n1\nzero 0\n", "0\n2\n3 0\n2 5\n", ""])
def test_a_damaged_checkpoint_stops_the_load_naming_the_file(text):
    with pytest.raises(OSError, match=CHECKPOINT_FILE):
        parse(text, CHECKPOINT_FILE)


def _write(dlog: DataLog, count: int) -> None:
    data = bytearray(batch(count))
    data[0:8] = dlog.next_offset.to_bytes(8, "big")
    dlog.write_batches(bytes(data), count, [(dlog.next_offset, len(data), 0)])
    dlog.next_offset += count


def test_a_fresh_partition_begins_epoch_0_at_offset_0_and_keeps_it_across_reloads(tmp_path):
    dlog = DataLog(str(tmp_path), "t", 0, "id", 1 << 20)
    dlog.load_batches()
    assert dlog.epochs.entries == [(0, 0)]
    with open(os.path.join(dlog.directory, CHECKPOINT_FILE)) as f:
        assert f.read() == "0\n1\n0 0\n"
    _write(dlog, 3)
    dlog.close()
    again = DataLog(str(tmp_path), "t", 0, "id", 1 << 20)
    again.load_batches()
    assert again.next_offset == 3
    assert again.epochs.entries == [(0, 0)]
    assert again.epochs.end_offset_for(0, again.next_offset) == (0, 3)
    again.close()


def test_a_new_leaders_stamp_begins_a_new_epoch_at_the_log_end(tmp_path):
    first = DataLog(str(tmp_path), "t", 0, "id", 1 << 20, stamp=7)
    first.load_batches()
    _write(first, 4)
    first.close()
    second = DataLog(str(tmp_path), "t", 0, "id", 1 << 20, stamp=12)
    second.load_batches()
    assert second.leader_epoch == 12
    assert second.epochs.entries == [(7, 0), (12, 4)]
    assert read_epochs(second.directory).entries == [(7, 0), (12, 4)]
    assert second.epochs.end_offset_for(7, 4) == (7, 4)
    assert second.epochs.end_offset_for(9, 4) == (7, 4)
    second.close()


def test_a_reload_that_changes_nothing_leaves_the_file_alone(tmp_path):
    dlog = DataLog(str(tmp_path), "t", 0, "id", 1 << 20)
    dlog.load_batches()
    dlog.close()
    path = os.path.join(dlog.directory, CHECKPOINT_FILE)
    before = os.stat(path).st_ino
    again = DataLog(str(tmp_path), "t", 0, "id", 1 << 20)
    again.load_batches()  # its epoch 0 began at the log end, 0: cut and assigned again, the same
    assert again.epochs.entries == [(0, 0)]
    assert os.stat(path).st_ino == before  # not rewritten (a rewrite is a new file renamed over it)
    again.close()


def test_a_lost_tail_forgets_the_epochs_begun_past_the_log_end(tmp_path):
    dlog = DataLog(str(tmp_path), "t", 0, "id", 1 << 20, stamp=3)
    dlog.load_batches()
    _write(dlog, 2)
    dlog.close()
    with open(os.path.join(dlog.directory, CHECKPOINT_FILE), "w") as f:
        f.write("0\n2\n3 0\n5 9\n")  # epoch 5 began at 9, past the log end (2) the load finds
    again = DataLog(str(tmp_path), "t", 0, "id", 1 << 20, stamp=3)
    again.load_batches()
    assert again.epochs.entries == [(3, 0)]
    assert read_epochs(again.directory).entries == [(3, 0)]
    again.close()
