"""Compaction of a cluster-mode partition (storage/owned_compaction.py), in process, with the manifest
and the claims played by the test: owner 5 wrote offsets 0..11, owner 9 took over at 12 and wrote on,
and owner 9 compacts into stamp 12. Each test loads the partition as a later owner would and checks
it holds the same state as before, whatever step the compaction stopped at."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time

import pytest

from groupd.coordinator.core.requests import OffsetCommitRequest
from groupd.coordinator.observability import readiness
from groupd.coordinator.runtime.coordinator import GroupCoordinator
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.coordinator.settings import Settings
from groupd.storage import inspect
from groupd.storage.files import remove_files
from groupd.storage.owned_compaction import closed_counted_bytes, compact_owned
from groupd.storage.owned_log import OwnedPartitionLog, Ownership, counted_segments, stamped_segments, unlisted_segments
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record
from tests.support.process import wait_for

SEGMENT_BYTES = 200  # a few batches per segment
BEFORE = ((5, 12), (9, None))  # the manifest while owner 9 holds the partition
COMPACTION = 12  # the stamp of owner 9's compaction output


def rec(partition: int, offset: int | None) -> Record:
    value = None if offset is None else OffsetCommitValue(offset, -1, "", 1)
    return Record(OffsetCommitKey("g", "t", partition), value)


def state(directory: str, ownership: Ownership) -> tuple[dict, int]:
    """What an owner with `ownership` loads: the latest value per key (a tombstone removes it), and
    the log's next offset."""
    seen: dict = {}

    def apply(record: Record) -> None:
        if record.value is None:
            seen.pop(record.key, None)
        else:
            seen[record.key] = record.value.offset
    plog = OwnedPartitionLog(os.path.dirname(directory), 0, SEGMENT_BYTES, ownership)
    plog.load(apply)
    plog.close()
    return seen, plog.next_offset


def owner_writes(directory: str, ownership: Ownership, records: list[Record]) -> OwnedPartitionLog:
    plog = OwnedPartitionLog(directory, 0, SEGMENT_BYTES, ownership)
    plog.load(lambda record: None)
    for record in records:
        plog.append([record], fsync=True)
    return plog


def two_owners(tmp_path) -> tuple[str, OwnedPartitionLog]:
    """Owner 5: partitions 0..3 committed three times (offsets 0..11) then a late write past its end;
    owner 9: partition 0 deleted, 1 and 4 committed, still open (its active segment last)."""
    first = owner_writes(str(tmp_path), Ownership(5, ()), [rec(n % 4, 100 + n) for n in range(12)])
    first.close()
    second = owner_writes(str(tmp_path), Ownership(9, ((5, None),)), [rec(0, None), rec(1, 200), rec(4, 400)]
                          + [rec(n % 3 + 1, 300 + n) for n in range(9)])
    late = OwnedPartitionLog(str(tmp_path), 0, SEGMENT_BYTES, Ownership(5, ()))
    late.next_offset, late.segments = 12, []
    late._roll(12)
    late.append([rec(3, 666)], fsync=True)  # deposed owner 5's late write: never counts
    late.close()
    return first.directory, second


def test_loading_after_compaction_gives_the_state_before_and_the_old_segments_go(tmp_path):
    directory, owner = two_owners(tmp_path)
    expected = state(directory, Ownership(20, BEFORE))
    assert expected[0][OffsetCommitKey("g", "t", 3)] != 666 and OffsetCommitKey("g", "t", 0) not in expected[0]
    active = owner.segments[-1][0]
    result = compact_owned(directory, BEFORE, active, COMPACTION, int(time.time() * 1000), 0)
    assert result.end == active and result.records_after < result.records_before
    assert result.written and all(os.path.exists(path) for path in result.written)
    after = ((COMPACTION, active), (9, None))  # the manifest once owner 9's swap succeeded
    old = unlisted_segments(directory, after, COMPACTION)
    assert old and not set(old) & set(result.written) and owner.segments[-1][1] not in old
    remove_files(old)
    assert state(directory, Ownership(21, after)) == expected
    assert sorted(stamped_segments(directory)) == [9, COMPACTION, 21]
    # `groupd log verify/dump` read each stamp's segments as a chain of its own, and say so
    lines, ok = inspect.verify(os.path.dirname(directory))
    assert ok and len(lines) == 1 and f"stamps={COMPACTION},9,21 (cluster mode" in lines[0], lines
    dumped = [json.loads(line) for line in inspect.dump(os.path.dirname(directory), 0)]
    assert {line["stamp"] for line in dumped} == {COMPACTION, 9}
    assert [line["log_offset"] for line in dumped if line["stamp"] == COMPACTION] == sorted(
        line["log_offset"] for line in dumped if line["stamp"] == COMPACTION)
    # the next compaction reads the first one's output and owner 9's segments from `active` on
    owner.append([rec(1, 999)], fsync=True)
    owner._roll(owner.next_offset)
    assert closed_counted_bytes(directory, after, owner.segments[-1][0]) > 0
    again = compact_owned(directory, after, owner.segments[-1][0], 30, int(time.time() * 1000), 0)
    then = ((30, owner.segments[-1][0]), (9, None))
    remove_files(unlisted_segments(directory, then, 30))
    owner.close()
    assert again.records_before > again.records_after
    seen, next_offset = state(directory, Ownership(31, then))
    assert seen == {**expected[0], OffsetCommitKey("g", "t", 1): 999} and next_offset == expected[1] + 1


def test_a_deposed_owners_compaction_changes_nothing_that_counts(tmp_path):
    """The swap failed (the claim was lost): the output goes, every file the manifest lists stays as it was."""
    directory, owner = two_owners(tmp_path)
    owner.close()
    expected = state(directory, Ownership(20, BEFORE))
    listed = {path: open(path, "rb").read() for _, _, segments in counted_segments(directory, BEFORE)
              for _, path in segments}
    result = compact_owned(directory, BEFORE, owner.segments[-1][0], COMPACTION, int(time.time() * 1000), 0)
    remove_files(result.written)
    assert result.written and not any(os.path.exists(path) for path in result.written)
    assert {path: open(path, "rb").read() for path in listed} == listed
    assert state(directory, Ownership(21, BEFORE)) == expected


def test_a_crash_before_the_swap_leaves_output_that_the_next_owners_load_removes(tmp_path):
    directory, owner = two_owners(tmp_path)
    owner.close()
    expected = state(directory, Ownership(20, BEFORE))
    result = compact_owned(directory, BEFORE, owner.segments[-1][0], COMPACTION, int(time.time() * 1000), 0)
    assert state(directory, Ownership(21, BEFORE)) == expected
    assert not any(os.path.exists(path) for path in result.written)  # not listed, under the claim: removed


def test_a_crash_after_the_swap_leaves_old_segments_that_the_next_owners_load_removes(tmp_path):
    directory, owner = two_owners(tmp_path)
    owner.close()
    expected = state(directory, Ownership(20, BEFORE))
    active = owner.segments[-1][0]
    compact_owned(directory, BEFORE, active, COMPACTION, int(time.time() * 1000), 0)
    after = ((COMPACTION, active), (9, None))
    old = unlisted_segments(directory, after, COMPACTION)
    assert state(directory, Ownership(21, after)) == expected
    assert not any(os.path.exists(path) for path in old)


def test_tombstones_stay_for_delete_retention_and_the_active_segment_is_not_read(tmp_path):
    directory, owner = two_owners(tmp_path)
    owner.close()
    active = owner.segments[-1][0]
    now = int(time.time() * 1000)
    kept = compact_owned(directory, BEFORE, active, COMPACTION, now, 3_600_000)
    remove_files(kept.written)
    dropped = compact_owned(directory, BEFORE, active, COMPACTION, now + 7_200_000, 3_600_000)
    assert kept.records_after == dropped.records_after + 1  # the tombstone of partition 0
    assert kept.records_before == active  # every counted offset below the active segment, once


# -- the runtime: the owner compacts as a lone node does, and swaps the manifest through its claim --


class FakeClaim:
    """A claim held by `stamp`, with the manifest in memory; `holds` False: lost before the swap."""
    revisions = iter(range(1000, 10**6))

    def __init__(self, stamp: int, manifest: list, holds: bool = True) -> None:
        self.stamp, self.manifest, self.holds, self.swaps = stamp, [list(e) for e in manifest], holds, []

    async def ownership(self) -> Ownership:
        return Ownership(self.stamp, self.counted())

    async def confirm(self, next_offset: int) -> bool:
        if self.manifest and self.manifest[-1][1] is None:
            self.manifest[-1][1] = next_offset
        self.manifest.append([self.stamp, None])
        return True

    def counted(self):
        return tuple((s, e) for s, e in self.manifest)

    async def compaction_stamp(self) -> int:
        return next(self.revisions)

    async def swap(self, counted, stamp: int, end: int) -> bool:
        self.swaps.append((stamp, end))
        if not self.holds or self.counted() != counted:
            return False
        self.manifest = [[stamp, end], [self.stamp, None]]
        return True


async def commit_many(groups, count: int) -> dict:
    """`count` commits over a few partitions of one group: the offsets expected back."""
    from .test_partition_moves import commit, group_on
    g = group_on(0)
    expected = {}
    for n in range(count):
        reply = groups.commit(commit(g, n) if n % 5 == 0 else OffsetCommitRequest(
            g, -1, "", None, -1, [("t", n % 5, n, -1, None)], 8))
        if asyncio.isfuture(reply):
            await reply
        expected[n % 5] = n
    return expected


def offsets_of(groups) -> dict:
    from .test_partition_moves import group_on
    return {tp[1]: v.offset for tp, v in groups.shards[0].offsets[group_on(0)].items()}


@pytest.fixture
async def owner(tmp_path, caplog):
    from .test_partition_moves import Movable
    caplog.set_level(logging.INFO, logger="groupd")
    view = Movable()
    settings = Settings.load(None, env={}, overrides=[
        f"data.dir={tmp_path}", "node.id=1", "offsets.topic.num.partitions=3", "offsets.topic.segment.bytes=400",
        "min.cleanable.dirty.ratio=0.1", "log.cleaner.backoff.ms=50"])
    groups = GroupCoordinator(settings)
    groups.start(p for p in range(3) if view.owns(p))
    await wait_for(lambda: readiness.is_ready(groups))
    view.owned.add(0)
    yield groups, view
    await groups.close()


async def test_the_owner_compacts_swaps_the_manifest_and_the_next_owner_loads_every_offset(owner, caplog):
    groups, view = owner
    claim = FakeClaim(9, [[0, None]])
    assert await groups.gain(0, claim) is PartitionState.ACTIVE
    expected = await commit_many(groups, 60)
    directory = groups.writers[0].plog.directory
    await wait_for(lambda: claim.manifest[0][0] >= 1000, timeout=60)  # swapped: the compaction's stamp first
    await wait_for(lambda: "compacted partition=0" in caplog.text)
    stamp, end = claim.manifest[0]
    assert sorted(stamped_segments(directory)) == [9, stamp]  # the old segments of stamp 9 below `end` went
    assert all(base >= end or i + 1 == len(segments) or segments[i + 1][0] > end
               for segments in [stamped_segments(directory)[9]] for i, (base, _) in enumerate(segments))
    end_of_9 = await groups.lose(0)
    view.owned.discard(0)
    claim.manifest[-1][1] = end_of_9  # owner 9's clean hand-over
    assert await groups.gain(0, FakeClaim(2000, claim.manifest)) is PartitionState.ACTIVE
    assert offsets_of(groups) == expected


async def test_a_compaction_whose_claim_was_lost_is_discarded_and_the_listed_segments_stay(owner, caplog):
    groups, view = owner
    claim = FakeClaim(9, [[0, None]], holds=False)
    assert await groups.gain(0, claim) is PartitionState.ACTIVE
    expected = await commit_many(groups, 60)
    directory = groups.writers[0].plog.directory
    listed = {path: open(path, "rb").read() for path in (p for _, p in stamped_segments(directory)[9])}
    await wait_for(lambda: "compaction discarded partition=0" in caplog.text, timeout=60)
    assert claim.swaps and claim.manifest == [[0, 0], [9, None]]
    assert sorted(stamped_segments(directory)) == [9]  # its output removed
    for path, data in listed.items():
        with open(path, "rb") as f:
            assert f.read()[:len(data)] == data  # untouched (the active one may have grown)
    end_of_9 = await groups.lose(0)
    claim.manifest[-1][1] = end_of_9
    assert await groups.gain(0, FakeClaim(2000, claim.manifest)) is PartitionState.ACTIVE
    assert offsets_of(groups) == expected
