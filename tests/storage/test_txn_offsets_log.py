"""Transactions in the offsets log on disk: transactional batches (producer id, epoch, the
transactional attribute) and control batches (Kafka's EndTransactionMarker) as groupd writes them,
loaded back into pending and committed offsets; `groupd log verify`/dump, repair and compaction
tolerate them, and compaction keeps what open transactions need."""

from __future__ import annotations

import glob
import json

from aiokafka.record.default_records import DefaultRecordBatch

from groupd.coordinator.core.partition import GroupSettings, GroupShard
from groupd.storage.compaction import compact
from groupd.storage.inspect import dump, verify
from groupd.storage.log import PartitionLog, batch_kind, encode, partition_dir, records_of
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record
from groupd.storage.repair import repair_partition
from groupd.storage.scanner import scan
from groupd.storage.txn_records import TxnMarkerKey, TxnOffsetKey


def offset(n: int) -> OffsetCommitValue:
    return OffsetCommitValue(n, -1, "", 1, -1)


def txn(pid: int, partition: int, n: int, group: str = "g") -> Record:
    return Record(TxnOffsetKey(pid, 0, OffsetCommitKey(group, "t", partition)), offset(n))


def plain(partition: int, n: int | None, group: str = "g") -> Record:
    return Record(OffsetCommitKey(group, "t", partition), None if n is None else offset(n))


def marker(pid: int, commit: bool) -> Record:
    return Record(TxnMarkerKey(pid, 0, commit, 5), None)


def write(data_dir, *requests: list[Record], segment_bytes: int = 1 << 20) -> None:
    plog = PartitionLog(str(data_dir), 0, segment_bytes)
    plog.load(lambda r: None)
    for records in requests:
        plog.append_runs([(batch_kind(records), encode(records))], fsync=False)
    plog.close()


def load(data_dir) -> GroupShard:
    shard = GroupShard(0, GroupSettings(), lambda prefix: prefix)
    plog = PartitionLog(str(data_dir), 0, 1 << 20)
    plog.load(shard.apply)
    plog.close()
    return shard


def committed(shard: GroupShard) -> dict[int, int]:
    return {p: v.offset for (_, p), v in shard.offsets.get("g", {}).items()}


def batches(data_dir) -> list[DefaultRecordBatch]:
    out = []
    for path in sorted(glob.glob(partition_dir(str(data_dir), 0) + "/*.log")):
        out += [b.batch for b in scan(open(path, "rb").read(), path=path).batches]
    return out


def test_batches_carry_kafkas_attributes(tmp_path):
    write(tmp_path, [plain(0, 1)], [txn(7, 0, 5), txn(7, 1, 6)], [marker(7, True)])
    plain_batch, txn_batch, control = batches(tmp_path)
    assert (plain_batch.producer_id, plain_batch.is_transactional, plain_batch.is_control_batch) == (-1, False, False)
    assert (txn_batch.producer_id, txn_batch.producer_epoch, txn_batch.is_transactional) == (7, 0, True)
    assert not txn_batch.is_control_batch
    assert (control.producer_id, control.is_transactional, control.is_control_batch) == (7, True, True)
    [r] = list(control)
    assert bytes(r.key) == b"\x00\x00\x00\x01" and bytes(r.value) == b"\x00\x00\x00\x00\x00\x05"
    # (scan returns only batches whose CRC checks out: the control bit is covered)


def test_load_keeps_open_transactions_pending_and_replays_markers(tmp_path):
    write(tmp_path, [plain(0, 1)], [txn(7, 0, 5), txn(7, 1, 6)], [txn(8, 2, 9)], [plain(0, 3)], [marker(8, False)])
    shard = load(tmp_path)
    assert committed(shard) == {0: 3}
    assert shard.pending.has_pending(OffsetCommitKey("g", "t", 1)) and shard.pending.has_open("g")
    assert not shard.pending.has_pending(OffsetCommitKey("g", "t", 2))  # aborted
    write(tmp_path, [marker(7, True)])
    shard = load(tmp_path)
    assert committed(shard) == {0: 3, 1: 6}  # partition 0's plain commit came after the transaction's
    assert not shard.pending.has_open("g")


def test_verify_dump_and_repair_tolerate_transactions(tmp_path):
    write(tmp_path, [plain(0, 1)], [txn(7, 0, 5)], [marker(7, False)])
    lines, ok = verify(str(tmp_path))
    assert ok, lines
    rows = [json.loads(line) for line in dump(str(tmp_path), 0)]
    assert rows[1]["type"] == "offset_commit" and rows[1]["producer_id"] == 7
    assert rows[2] == {**rows[2], "type": "txn_marker", "producer_id": 7, "result": "abort", "coordinator_epoch": 5}
    assert [json.loads(line)["type"] for line in dump(str(tmp_path), 0, group="g")] == ["offset_commit"] * 2
    repair_partition(str(tmp_path), 0)
    assert committed(load(tmp_path)) == {0: 1}


def test_compaction_keeps_open_transactions_and_markers(tmp_path):
    # several small segments; compaction rewrites all but the last
    write(tmp_path,
          [plain(0, 1)], [txn(7, 0, 5)],       # producer 7's offset of partition 0 over an older plain one
          [txn(8, 1, 6)], [plain(1, 2)],        # producer 8's, then a later plain commit supersedes it
          [txn(9, 2, 7)], [marker(9, False)],   # aborted
          [plain(3, 1)], [plain(3, 2)],         # plain dedup as before
          [plain(4, 4)],                        # the active segment's
          segment_bytes=1)
    before = load(tmp_path)
    result = compact(partition_dir(str(tmp_path), 0), 10**13, 0)
    assert result.segments_cleaned > 0
    after = load(tmp_path)
    assert committed(after) == committed(before) == {0: 1, 1: 2, 3: 2, 4: 4}
    assert after.pending.has_pending(OffsetCommitKey("g", "t", 0))  # producer 7 is still open
    assert not after.pending.has_pending(OffsetCommitKey("g", "t", 1))  # superseded: gone with the plain commit's
    kept = [(b.producer_id, b.is_control_batch) for b in batches(tmp_path) if b.producer_id >= 0 and list(b)]
    assert (9, True) in kept and (7, False) in kept
    write(tmp_path, [marker(7, True)], [marker(8, True)])
    assert committed(load(tmp_path)) == {0: 5, 1: 2, 3: 2, 4: 4}
    assert verify(str(tmp_path))[1]


def test_records_of_names_the_producer_and_the_marker(tmp_path):
    """`records_of` (the cluster-mode loader's and `groupd log dump`'s reader) gives a transaction's
    records as the applier needs them, at their offsets."""
    write(tmp_path, [plain(0, 1)], [txn(7, 0, 5), txn(7, 1, 6)], [marker(7, False)])
    rows = [(offset, record) for b in batches(tmp_path) for offset, record, _ in records_of(b)]
    assert rows == [(0, plain(0, 1)), (1, txn(7, 0, 5)), (2, txn(7, 1, 6)), (3, marker(7, False))]
