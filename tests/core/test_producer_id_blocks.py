"""Cluster mode's producer ids, sans-IO (coordinator/core/producer_id_blocks.py): ids come from the
granted block in order, the next block is asked for once 90% of the current one is used (never twice
at once, not again within 50 ms of a failed request), a block not past the current one is refused,
and with the current block used up and the next not granted, allocation refuses without handing
anything out (InitProducerId: COORDINATOR_LOAD_IN_PROGRESS) until a block arrives."""

import pytest

from groupd.coordinator.core.producer_id_blocks import Block, BlockPending, ProducerIdBlocks


def test_no_block_no_id_and_a_request_is_due():
    blocks = ProducerIdBlocks()
    assert blocks.needs_block(0)
    with pytest.raises(BlockPending):
        blocks.allocate()
    blocks.ask()
    assert not blocks.needs_block(0)  # one request at a time
    assert blocks.grant(Block(5000, 10), 0)
    assert [blocks.allocate() for _ in range(3)] == [5000, 5001, 5002]


def test_the_next_block_is_asked_for_at_90_percent_and_taken_when_the_current_runs_out():
    blocks = ProducerIdBlocks()
    blocks.ask()
    blocks.grant(Block(0, 10), 0)
    ids = [blocks.allocate() for _ in range(8)]
    assert ids == list(range(8)) and not blocks.needs_block(0)
    assert blocks.allocate() == 8 and blocks.needs_block(0)  # 9 of 10 used
    blocks.ask()
    assert blocks.allocate() == 9
    with pytest.raises(BlockPending):  # used up, the next one still on its way
        blocks.allocate()
    assert not blocks.needs_block(0)
    assert blocks.grant(Block(40, 10), 0)  # another node took the blocks between
    assert not blocks.needs_block(0)
    assert [blocks.allocate() for _ in range(2)] == [40, 41]


def test_a_refused_request_is_asked_again_after_the_backoff():
    blocks = ProducerIdBlocks()
    blocks.ask()
    blocks.refused(1000)
    assert not blocks.needs_block(1049) and blocks.needs_block(1050)
    with pytest.raises(BlockPending):
        blocks.allocate()


def test_a_block_granted_early_waits_until_the_current_one_is_used_up():
    blocks = ProducerIdBlocks()
    blocks.ask()
    blocks.grant(Block(0, 2), 0)
    blocks.allocate()
    blocks.ask()
    blocks.grant(Block(100, 2), 0)
    assert [blocks.allocate() for _ in range(3)] == [1, 100, 101]


def test_a_block_that_is_not_past_the_current_one_is_refused():
    blocks = ProducerIdBlocks()
    blocks.ask()
    blocks.grant(Block(1000, 10), 0)
    blocks.allocate()
    blocks.ask()
    assert not blocks.grant(Block(1005, 10), 0) and not blocks.asking
    assert [blocks.allocate() for _ in range(9)] == list(range(1001, 1010))  # the current block holds
    assert not blocks.needs_block(10) and blocks.needs_block(50)  # used up: asked again after the backoff
