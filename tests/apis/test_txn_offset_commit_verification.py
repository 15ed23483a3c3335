"""TxnOffsetCommit's liveness check through the transaction coordinator's seam (contract seam 3:
`node.transactions.verify_offsets(transactional_id, producer_id, producer_epoch, group_id)`), in
process: the handler against a real GroupCoordinator on disk and a stand-in transaction
coordinator. Its verdict is the partitions' error (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, and
TRANSACTION_ABORTABLE as INVALID_TXN_STATE before v4, as Kafka's verification hands them back);
nothing is written unless it says NONE. Synchronous and awaitable verdicts alike."""

from __future__ import annotations

import asyncio
import types

import pytest

from groupd.coordinator.apis import txn_offset_commit
from groupd.coordinator.apis.request import Request
from groupd.coordinator.core.requests import OffsetFetchRequest
from groupd.coordinator.runtime.coordinator import GroupCoordinator
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request
from tests.support.process import wait_for

E = ErrorCode


class Transactions:
    def __init__(self, verdict: ErrorCode, awaitable: bool) -> None:
        self.verdict, self.awaitable, self.calls = verdict, awaitable, []

    def verify_offsets(self, transactional_id, producer_id, producer_epoch, group_id, add=False):
        self.calls.append((transactional_id, producer_id, producer_epoch, group_id))
        if not self.awaitable:
            return self.verdict

        async def later():
            await asyncio.sleep(0)
            return self.verdict
        return later()


@pytest.fixture
async def node(tmp_path):
    settings = Settings.load(None, env={}, overrides=[f"data.dir={tmp_path}", "offsets.topic.num.partitions=1"])
    coordinator = GroupCoordinator(settings)
    coordinator.start()
    await wait_for(lambda: coordinator.states[0] is PartitionState.ACTIVE)
    yield types.SimpleNamespace(coordinator=coordinator, access=None, transactions=None,
                                catalog=types.SimpleNamespace(get=lambda name: types.SimpleNamespace(partitions=2)
                                                              if name == "t" else None))
    await coordinator.close()


async def send(node, version: int, group: str = "g"):
    body = build_request(ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": "tx", "group_id": group, "producer_id": 5, "producer_epoch": 1, "generation_id": -1,
        "member_id": "", "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 9, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    header = RequestHeader(ApiKey.TXN_OFFSET_COMMIT, version, 1, "c")
    reply = txn_offset_commit.handle(node, Request(header, body, "/127.0.0.1", None))
    if isinstance(reply, asyncio.Future):
        reply = await reply
    return reply.topics[0].partitions[0].error_code


async def pending(node) -> bool:
    result = node.coordinator.fetch_offsets(OffsetFetchRequest("g", [("t", [0])], True))
    rows = await result if isinstance(result, asyncio.Future) else result
    return rows[0][2] is E.unstable_offset_commit


@pytest.mark.parametrize("awaitable", [False, True])
async def test_a_live_transaction_commits_pending_offsets(node, awaitable):
    node.transactions = Transactions(E.none, awaitable)
    assert await send(node, 3) == E.none
    assert node.transactions.calls == [("tx", 5, 1, "g")]
    assert await pending(node)


@pytest.mark.parametrize("awaitable", [False, True])
@pytest.mark.parametrize("verdict, version, answer", [
    (E.invalid_producer_id_mapping, 3, E.invalid_producer_id_mapping),
    (E.producer_fenced, 3, E.invalid_producer_epoch),
    (E.invalid_producer_epoch, 0, E.invalid_producer_epoch),
    (E.invalid_txn_state, 3, E.invalid_txn_state),
    (E.transaction_abortable, 3, E.invalid_txn_state),
    (E.transaction_abortable, 4, E.transaction_abortable),
])
async def test_a_refused_verification_is_the_partitions_error_and_writes_nothing(node, awaitable, verdict, version,
                                                                                  answer):
    node.transactions = Transactions(verdict, awaitable)
    assert await send(node, version) == answer
    assert not await pending(node)
    assert "g" not in node.coordinator.shards[0].groups


async def test_group_id_and_coordinator_errors_come_before_verification(node):
    node.transactions = Transactions(E.none, False)
    assert await send(node, 3, group="") == E.invalid_group_id
    node.coordinator.states[0] = PartitionState.LOADING
    try:
        assert await send(node, 3) == E.coordinator_load_in_progress
    finally:
        node.coordinator.states[0] = PartitionState.ACTIVE
    assert node.transactions.calls == []
