"""A partition moving between nodes, in process on a real event loop: `GroupCoordinator.gain` loads it
(COORDINATOR_LOAD_IN_PROGRESS until then) and `lose` gives it up (NOT_COORDINATOR, parked requests
answered, log closed, state dropped); with an `Ownership` only the manifest's segments count."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from groupd.coordinator.cluster.view import SingleNode
from groupd.coordinator.core.classic.requests import JoinRequest
from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.core.requests import OffsetCommitRequest, OffsetFetchRequest
from groupd.coordinator.observability import readiness
from groupd.coordinator.runtime.coordinator import GroupCoordinator
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.storage.log import PartitionLog
from groupd.storage.owned_log import OwnedPartitionLog, Ownership, stamped_segments
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record
from tests.support.process import wait_for

PARTITIONS = 3


class Movable(SingleNode):
    """A view in which this node owns what the test says."""

    def __init__(self) -> None:
        super().__init__(1)
        self.owned: set[int] = set()

    def coordinator(self, partition):
        return 1 if partition in self.owned else None

    def owns(self, partition):
        return partition in self.owned


def group_on(partition: int) -> str:
    return next(g for g in (f"g{i}" for i in range(10_000)) if partition_for(g, PARTITIONS) == partition)


def commit(group_id: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id, -1, "", None, -1, [("t", 0, offset, -1, None)], 8)


def fetched(groups: GroupCoordinator, group_id: str):
    reply = groups.fetch_offsets(OffsetFetchRequest(group_id, [("t", [0])]))
    return reply if isinstance(reply, ErrorCode) else reply[0][2].offset




@pytest.fixture
async def groups(tmp_path):
    settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "node.id=1",
                                                      f"offsets.topic.num.partitions={PARTITIONS}"])
    coordinator = GroupCoordinator(settings)
    view = Movable()
    coordinator.start(p for p in range(PARTITIONS) if view.owns(p))
    await wait_for(lambda: readiness.is_ready(coordinator))
    yield coordinator
    await coordinator.close()


async def test_a_gained_partition_loads_then_serves(groups):
    g = group_on(1)
    assert groups.unavailable(1) is ErrorCode.not_coordinator
    loaded = groups.gain(1)
    assert groups.unavailable(1) is ErrorCode.coordinator_load_in_progress
    assert await loaded is PartitionState.ACTIVE
    assert await groups.commit(commit(g, 42)) == {("t", 0): ErrorCode.none}
    assert fetched(groups, g) == 42


async def test_a_lost_partition_answers_not_coordinator_and_a_later_gain_reloads_its_log(groups):
    g = group_on(0)
    await groups.gain(0)
    await groups.commit(commit(g, 7))
    assert await groups.lose(0) == 1  # the next offset: one record was written
    assert groups.unavailable(0) is ErrorCode.not_coordinator
    assert groups.shards[0].groups == {} and groups.writers[0] is None
    assert groups.commit(commit(g, 8)) == {("t", 0): ErrorCode.not_coordinator}
    await groups.gain(0)
    assert fetched(groups, g) == 7


async def test_losing_a_partition_answers_its_parked_join_not_coordinator(groups):
    g = group_on(2)
    await groups.gain(2)
    join = JoinRequest(g, "", None, 10_000, 10_000, "consumer", (("range", b""),), 3, "c", "/127.0.0.1")
    parked = groups.join(join)  # waits out group.initial.rebalance.delay.ms
    assert isinstance(parked, asyncio.Future) and not parked.done()
    await groups.lose(2)
    assert (await parked)["error_code"] is ErrorCode.not_coordinator
    assert groups.runners[2].armed == {}


async def test_a_fenced_lose_answers_the_writes_in_flight_at_once(groups, monkeypatch):
    g = group_on(1)
    await groups.gain(1)
    plog = groups.writers[1].plog
    release = threading.Event()
    append = plog.append_encoded
    monkeypatch.setattr(plog, "append_encoded", lambda *a: (release.wait(30), append(*a))[1])
    pending = groups.commit(commit(g, 9))
    lost = asyncio.ensure_future(groups.lose(1, fenced=True))
    assert await asyncio.wait_for(pending, 20) == {("t", 0): ErrorCode.not_coordinator}  # not acknowledged
    release.set()  # the write lands late
    assert await lost == 1


async def test_a_load_that_finishes_after_the_partition_was_lost_is_dropped(groups):
    loading = groups.gain(0)
    await groups.lose(0)
    assert await loading is PartitionState.UNOWNED
    assert groups.writers[0] is None and groups.unavailable(0) is ErrorCode.not_coordinator


def test_only_the_manifests_stamps_count_up_to_their_end(tmp_path):
    """Owner 5 wrote offsets 0..1, owner 9 took over at 2 and wrote 2; a late write of owner 5 (its
    offset 2), a segment of a claim that never made the manifest (stamp 7) and a torn tail of owner
    9's are not loaded."""
    def write(ownership: Ownership, records: list[Record]) -> PartitionLog:
        plog = OwnedPartitionLog(str(tmp_path), 0, 1 << 20, ownership)
        plog.load(lambda record: None)
        for record in records:
            plog.append([record], fsync=True)
        plog.close()
        return plog

    def rec(offset: int) -> Record:
        return Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset, -1, "", 1))

    first = write(Ownership(5, ()), [rec(100), rec(101)])
    assert first.next_offset == 2
    second = write(Ownership(9, ((5, None),)), [rec(102)])
    assert second.next_offset == 3
    late = OwnedPartitionLog(str(tmp_path), 0, 1 << 20, Ownership(5, ()))
    late.next_offset, late.segments = 2, []
    late._roll(2)  # a deposed owner rolling on: its own file, never the successor's
    late.append([rec(666)], fsync=True)
    late.close()
    write(Ownership(7, ((5, 2), (9, None))), [rec(777)])
    assert sorted(stamped_segments(first.directory)) == [5, 7, 9]
    torn = stamped_segments(first.directory)[9][-1][1]
    with open(torn, "ab") as f:
        f.write(b"\0\0\0\0\0\0\0\x03\0\0")  # the start of a batch owner 9 never finished
    size = os.path.getsize(torn)
    seen: list[int] = []
    final = OwnedPartitionLog(str(tmp_path), 0, 1 << 20, Ownership(11, ((5, 2), (9, 3))))
    final.load(lambda record: seen.append(record.value.offset))
    assert seen == [100, 101, 102] and final.next_offset == 3
    assert os.path.getsize(torn) == size  # another owner's file: read, never cut
    assert os.path.basename(final.segments[-1][1]) == f"{3:020d}-11.log"
    final.close()


def test_rendezvous_spreads_partitions_and_a_joining_node_takes_only_what_it_wins():
    from groupd.coordinator.cluster.etcd.cluster import rendezvous

    before = {p: rendezvous(p, [1, 2]) for p in range(50)}
    after = {p: rendezvous(p, [1, 2, 3]) for p in range(50)}
    assert set(before.values()) == {1, 2} and set(after.values()) == {1, 2, 3}
    assert all(after[p] in (before[p], 3) for p in range(50))  # nothing moves between 1 and 2
    assert {p: rendezvous(p, [2, 1]) for p in range(50)} == before  # the order of the nodes does not matter
    assert rendezvous(0, []) is None
