"""The transaction coordinator's shell (coordinator/runtime/transactions.py) with fake marker seams:
EndTxn's markers go to every partition of the transaction, a retriable error is retried until the
marker is written, and only then is the transaction complete; a restart that finds PrepareCommit
writes the markers again and completes it."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools

from prometheus_client import REGISTRY

from groupd.coordinator.cluster.view import SingleNode
from groupd.coordinator.runtime.transactions import TransactionCoordinator
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.storage.transaction_records import TxnState


class FakeNode:
    catalog = None

    def __init__(self, view=None) -> None:
        self.cluster = view or SingleNode(1)


def make(tmp_path, ids):
    settings = dataclasses.replace(Settings.load(None, env={}), data_dir=str(tmp_path),
                                   transaction_state_log_num_partitions=3)
    tc = TransactionCoordinator(settings, FakeNode(), lambda: next(ids))
    marks: list[tuple] = []
    failures = {("t", 1): 2}  # NOT_LEADER_OR_FOLLOWER twice, then written

    async def data(topic, p, pid, epoch, commit, coordinator_epoch):
        marks.append((topic, p, pid, epoch, commit))
        if failures.get((topic, p)):
            failures[(topic, p)] -= 1
            return ErrorCode.not_leader_or_follower
        return ErrorCode.none

    async def offsets(p, pid, epoch, commit, coordinator_epoch):
        marks.append(("__consumer_offsets", p, pid, epoch, commit))
        return ErrorCode.none

    tc.data_marker, tc.offsets_marker = data, offsets
    return tc, marks


async def until(condition) -> None:
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.01)


def test_markers_are_retried_until_written_then_the_transaction_completes(tmp_path):
    def sample(name: str, **labels) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    async def run():
        ids = itertools.count(7)
        tc, marks = make(tmp_path, ids)
        commits, retries = sample("groupd_transactions_completed_total", result="commit"), \
            sample("groupd_transaction_marker_retries_total")
        await tc.start()
        error, pid, epoch = await tc.init_producer_id("tx", 60_000, -1, -1)
        assert (error, pid, epoch) == (ErrorCode.none, 7, 0)
        parts = [("t", 0), ("t", 1), ("__consumer_offsets", 4)]
        assert await tc.add_partitions("tx", pid, 0, parts) == ErrorCode.none
        assert (await tc.end_txn("tx", pid, 0, True))[0] == ErrorCode.none
        await until(lambda: tc.core.txns["tx"].state == TxnState.COMPLETE_COMMIT)
        assert marks.count(("t", 1, 7, 0, True)) == 3
        assert sample("groupd_transactions_completed_total", result="commit") == commits + 1
        assert sample("groupd_transaction_marker_retries_total") == retries + 2
        assert sample("groupd_transactions_open") == 0
        assert {m for m in marks} == {("t", 0, 7, 0, True), ("t", 1, 7, 0, True), ("__consumer_offsets", 4, 7, 0, True)}
        await tc.close()

    asyncio.run(run())


def test_a_prepared_commit_found_at_load_is_completed(tmp_path):
    async def first():
        tc, _ = make(tmp_path, itertools.count(7))
        never = asyncio.Event()

        async def stuck(*_):
            await never.wait()
            return ErrorCode.none

        tc.data_marker = stuck  # the process dies before any marker is written
        await tc.start()
        _, pid, _ = await tc.init_producer_id("tx", 60_000, -1, -1)
        await tc.add_partitions("tx", pid, 0, [("t", 0)])
        assert (await tc.end_txn("tx", pid, 0, True))[0] == ErrorCode.none
        await tc.close()

    async def second():
        tc, marks = make(tmp_path, itertools.count(100))
        await tc.start()
        await until(lambda: tc.core.txns["tx"].state == TxnState.COMPLETE_COMMIT)
        assert marks == [("t", 0, 7, 0, True)]
        await tc.close()

    asyncio.run(first())
    asyncio.run(second())


def test_the_log_is_compacted_and_loads_the_same(tmp_path):
    async def run():
        ids = itertools.count(7)
        tc, _ = make(tmp_path, ids)
        tc.settings = dataclasses.replace(tc.settings, transaction_state_log_segment_bytes=200)
        await tc.start()
        for _ in range(30):  # every init is a record of the same id: one value survives per closed segment run
            assert (await tc.init_producer_id("tx", 60_000, -1, -1))[0] == ErrorCode.none
        before = {k: m.value() for k, m in tc.core.txns.items()}
        writer = tc.writers[tc.partition("tx")]
        assert len(writer.plog.segments) > 2
        size = writer.plog.size
        tc._compact()
        await tc._compacting
        assert writer.plog.size < size
        await tc.close()
        again, _ = make(tmp_path, itertools.count(100))
        await again.start()
        assert {k: m.value() for k, m in again.core.txns.items()} == before
        await again.close()

    asyncio.run(run())


class TwoBrokers(SingleNode):
    """Broker 1 (this one) and broker 2: `leaders` says who leads each data partition now."""

    def __init__(self) -> None:
        super().__init__(1)
        self.leaders: dict[tuple[str, int], int] = {}

    def leader(self, topic, partition):
        return self.leaders.get((topic, partition), 1)

    def coordinator(self, partition):
        return 2 if partition == 4 else 1


class FakeChannel:
    def __init__(self, view: TwoBrokers) -> None:
        self.view = view
        self.sent: list[tuple[int, list]] = []

    async def write_markers(self, broker, pid, epoch, commit, coordinator_epoch, partitions):
        self.sent.append((broker, sorted(partitions)))
        if len(self.sent) == 1:  # the first answer: broker 2 no longer leads t-1 (it moved here)
            self.view.leaders[("t", 1)] = 1
            return {tp: ErrorCode.not_leader_or_follower if tp == ("t", 1) else ErrorCode.none for tp in partitions}
        return dict.fromkeys(partitions, ErrorCode.none)


def test_markers_for_another_brokers_partitions_go_in_one_request_and_follow_a_moved_leader(tmp_path):
    async def run():
        view = TwoBrokers()
        view.leaders[("t", 1)] = 2
        settings = dataclasses.replace(Settings.load(None, env={}), data_dir=str(tmp_path),
                                       transaction_state_log_num_partitions=3)
        channel = FakeChannel(view)
        tc = TransactionCoordinator(settings, FakeNode(view), lambda: 7, channel)
        here: list[tuple] = []

        async def data(topic, p, pid, epoch, commit, coordinator_epoch):
            here.append((topic, p))
            return ErrorCode.none

        async def offsets(p, pid, epoch, commit, coordinator_epoch):
            here.append(("__consumer_offsets", p))
            return ErrorCode.none

        tc.data_marker, tc.offsets_marker = data, offsets
        await tc.start()
        _, pid, _ = await tc.init_producer_id("tx", 60_000, -1, -1)
        await tc.add_partitions("tx", pid, 0, [("t", 0), ("t", 1), ("__consumer_offsets", 4)])
        assert (await tc.end_txn("tx", pid, 0, True))[0] == ErrorCode.none
        await until(lambda: tc.core.txns["tx"].state == TxnState.COMPLETE_COMMIT)
        # broker 2's partitions in one WriteTxnMarkers; t-1, moved here meanwhile, then marked here
        assert channel.sent == [(2, [("__consumer_offsets", 4), ("t", 1)])]
        assert sorted(here) == [("t", 0), ("t", 1)]
        await tc.close()

    asyncio.run(run())


def test_an_end_that_needs_a_producer_id_block_not_yet_granted_answers_load_in_progress(tmp_path):
    """Cluster mode's producer ids come in blocks from etcd; a TV2 end at an exhausted epoch needs a new id.
    While the next block is asked for, the end is answered COORDINATOR_LOAD_IN_PROGRESS (retried by the
    client) and nothing changes, as InitProducerId is answered."""
    from groupd.coordinator.core.producer_id_blocks import BlockPending
    from groupd.coordinator.core.transactions.machine import MAX_EPOCH
    from groupd.storage.transaction_records import TxnValue

    async def run():
        tc, _ = make(tmp_path, itertools.count(7))
        await tc.start()
        _, pid, _ = await tc.init_producer_id("tx", 60_000, -1, -1)
        before = TxnValue(pid, MAX_EPOCH - 1, 60_000, TxnState.ONGOING, frozenset({("t", 0)}), 1, 1,
                          client_transaction_version=2)
        tc.core.apply("tx", before)

        def pending():
            raise BlockPending()
        tc.new_producer_id = pending
        assert await tc.end_txn("tx", pid, MAX_EPOCH - 1, True, 2) == (ErrorCode.coordinator_load_in_progress, -1, -1)
        assert tc.core.txns["tx"].value() == before
        await tc.close()

    asyncio.run(run())
