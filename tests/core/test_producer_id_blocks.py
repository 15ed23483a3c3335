"""Cluster mode's producer ids, sans-IO (coordinator/core/producer_id_blocks.py): ids come from the
granted block in order, the next block is asked for once 90% of the current one is used (never twice
at once), and with the current block used up and the next not granted, allocation refuses without
handing anything out (InitProducerId: COORDINATOR_LOAD_IN_PROGRESS) until a block arrives."""

import pytest

from groupd.coordinator.core.producer_id_blocks import Block, BlockPending, ProducerIdBlocks


def test_no_block_no_id_and_a_request_is_due():
    blocks = ProducerIdBlocks()
    assert blocks.needs_block()
    with pytest.raises(BlockPending):
        blocks.allocate()
    blocks.ask()
    assert not blocks.needs_block()  # one request at a time
    blocks.grant(Block(5000, 10))
    assert [blocks.allocate() for _ in range(3)] == [5000, 5001, 5002]


def test_the_next_block_is_asked_for_at_90_percent_and_taken_when_the_current_runs_out():
    blocks = ProducerIdBlocks()
    blocks.ask()
    blocks.grant(Block(0, 10))
    ids = [blocks.allocate() for _ in range(8)]
    assert ids == list(range(8)) and not blocks.needs_block()
    assert blocks.allocate() == 8 and blocks.needs_block()  # 9 of 10 used
    blocks.ask()
    assert blocks.allocate() == 9
    with pytest.raises(BlockPending):  # used up, the next one still on its way
        blocks.allocate()
    assert not blocks.needs_block()
    blocks.grant(Block(40, 10))  # another node took the blocks between
    assert not blocks.needs_block()
    assert [blocks.allocate() for _ in range(2)] == [40, 41]


def test_a_refused_request_is_asked_again():
    blocks = ProducerIdBlocks()
    blocks.ask()
    blocks.refused()
    assert blocks.needs_block()
    with pytest.raises(BlockPending):
        blocks.allocate()


def test_a_block_granted_early_waits_until_the_current_one_is_used_up():
    blocks = ProducerIdBlocks()
    blocks.ask()
    blocks.grant(Block(0, 2))
    blocks.allocate()
    blocks.ask()
    blocks.grant(Block(100, 2))
    assert [blocks.allocate() for _ in range(3)] == [1, 100, 101]
