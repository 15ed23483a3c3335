"""The group coordinator's side of a transaction on a real event loop and disk (no server):
TxnOffsetCommit appends a transactional batch, the offsets stay pending across a restart (the
load replays them), and `GroupCoordinator.complete_transaction` — the seam the transaction
coordinator's WriteTxnMarkers calls — writes the marker and commits or drops them, durably."""

from __future__ import annotations

import asyncio
import logging

import pytest

from groupd.coordinator.core.requests import OffsetCommitRequest, OffsetFetchRequest, TxnOffsetCommitRequest
from groupd.coordinator.runtime.coordinator import GroupCoordinator
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.storage.log import list_segments, partition_dir
from groupd.storage.scanner import scan_segments
from tests.support.process import wait_for

E = ErrorCode


@pytest.fixture
async def start(tmp_path):
    running = []

    async def start() -> GroupCoordinator:
        for groups in running:  # a restart: the previous one closes first
            await groups.close()
        running.clear()
        settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "offsets.topic.num.partitions=1"])
        groups = GroupCoordinator(settings)
        groups.start()
        running.append(groups)
        await wait_for(lambda: groups.states[0] is PartitionState.ACTIVE)
        return groups

    yield start
    for groups in running:
        await groups.close()


async def answer(result):
    return await result if isinstance(result, asyncio.Future) else result


def txn_commit(groups, partition: int, offset: int, producer_id: int = 42):
    return groups.txn_commit(TxnOffsetCommitRequest("g", "txn-1", producer_id, 0, -1, "", None,
                                                    [("t", partition, offset, -1, "m")], 3))


async def fetch(groups, stable: bool):
    rows = await answer(groups.fetch_offsets(OffsetFetchRequest("g", [("t", [0, 1])], stable)))
    return {p: (v if isinstance(v, ErrorCode) or v is None else v.offset) for _, p, v in rows}


async def test_pending_across_a_restart_then_the_commit_marker(start, caplog):
    groups = await start()
    assert await answer(groups.commit(_plain(1))) == {("t", 1): E.none}
    assert await answer(txn_commit(groups, 0, 5)) == {("t", 0): E.none}
    assert await answer(txn_commit(groups, 1, 6)) == {("t", 1): E.none}
    assert await fetch(groups, stable=True) == {0: E.unstable_offset_commit, 1: E.unstable_offset_commit}
    groups = await start()
    assert await fetch(groups, stable=False) == {0: None, 1: 1}
    assert await fetch(groups, stable=True) == {0: E.unstable_offset_commit, 1: E.unstable_offset_commit}
    assert await groups.complete_transaction(0, 42, 0, True, 7) == E.none
    assert await fetch(groups, stable=True) == {0: 5, 1: 6}
    groups = await start()
    assert await fetch(groups, stable=True) == {0: 5, 1: 6}
    # an older transaction coordinator's marker is fenced
    with caplog.at_level(logging.WARNING, "groupd"):
        assert await groups.complete_transaction(0, 42, 0, False, 6) == E.transaction_coordinator_fenced
    assert [r.getMessage() for r in caplog.records if "marker refused" in r.getMessage()] == [
        "transaction marker refused partition=0 producer_id=42 producer_epoch=0 coordinator_epoch=6 result=abort: "
        "transaction_coordinator_fenced"]


async def test_abort_marker_drops_the_pending_offsets(start):
    groups = await start()
    await answer(txn_commit(groups, 0, 5))
    assert await groups.complete_transaction(0, 42, 0, False, 0) == E.none
    assert await fetch(groups, stable=True) == {0: None, 1: None}
    groups = await start()
    assert await fetch(groups, stable=True) == {0: None, 1: None}


async def test_markers_for_partitions_not_served_here(start):
    groups = await start()
    assert await groups.complete_transaction(3, 42, 0, True, 0) == E.unknown_topic_or_partition
    groups.states[0] = PartitionState.UNOWNED
    try:
        assert await groups.complete_transaction(0, 42, 0, True, 0) == E.not_leader_or_follower
    finally:
        groups.states[0] = PartitionState.ACTIVE


def _plain(offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest("g", -1, "", None, -1, [("t", 1, offset, -1, "")], 9)


async def test_one_loop_turn_writes_a_batch_per_transaction_beside_the_plain_one(start, tmp_path):
    """The writer gathers a loop turn's appends into one batch, but a transaction's records (and a
    marker) never share a batch with others: each gets its own, with its producer's attributes."""
    groups = await start()
    replies = [groups.commit(_plain(1)), txn_commit(groups, 0, 5, producer_id=7), groups.commit(_plain(2)),
               txn_commit(groups, 0, 6, producer_id=8)]
    for reply in replies:
        await answer(reply)
    assert await groups.complete_transaction(0, 8, 0, True, 0) == E.none
    kinds = [(b.batch.producer_id, b.batch.is_control_batch, len(list(b.batch)))
             for _, _, _, found, _ in scan_segments(list_segments(partition_dir(str(tmp_path), 0)))
             for b in found.batches]
    assert kinds == [(-1, False, 1), (7, False, 1), (-1, False, 1), (8, False, 1), (8, True, 1)]
    assert await fetch(groups, stable=False) == {0: 6, 1: 2}
