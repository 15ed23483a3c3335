"""Producer ids handed out from blocks a node is granted, as Kafka's brokers do (RPCProducerIdManager
asks the controller with AllocateProducerIds): ids come from the current block; once 90% of it is
used the node asks for the next one, so a busy node rarely waits; when the current block is used up
and the next has not arrived, InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS (the client
retries) and the node asks again, not sooner than 50 ms after a failed request. Sans-IO: the shell
(coordinator/cluster/etcd/producer_ids.py) does the asking, with the time passed in, and reports
back with `grant` or `refused`.
"""

from __future__ import annotations

from dataclasses import dataclass

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PREFETCH = 0.9  # Kafka's RPCProducerIdManager.PID_PREFETCH_THRESHOLD
RETRY_BACKOFF_MS = 50  # and its RETRY_BACKOFF_MS


class BlockPending(Exception):
    """The current block is used up and the next one has not been granted yet."""


@dataclass(frozen=True, slots=True)
class Block:
    first: int
    size: int = BLOCK_SIZE

    @property
    def end(self) -> int:
        return self.first + self.size


class ProducerIdBlocks:
    def __init__(self) -> None:
        self._current: Block | None = None
        self._next = 0
        self._upcoming: Block | None = None
        self.asking = False  # a request for the next block is under way
        self._retry_at = 0.0  # monotonic ms before which a failed request is not repeated

    def allocate(self) -> int:
        """The next id; raises BlockPending when there is none until a block is granted."""
        if self._current is None or self._next >= self._current.end:
            if self._upcoming is None:
                raise BlockPending
            self._current, self._upcoming = self._upcoming, None
            self._next = self._current.first
        pid, self._next = self._next, self._next + 1
        return pid

    def needs_block(self, now_ms: float) -> bool:
        """Whether to ask for the next block now: none is asked for or waiting, the last refusal is
        50 ms old, and the current block is 90% used (or there is none)."""
        if self.asking or self._upcoming is not None or now_ms < self._retry_at:
            return False
        current = self._current
        return current is None or self._next >= current.first + int(current.size * PREFETCH)

    def ask(self) -> None:
        self.asking = True

    def grant(self, block: Block, now_ms: float) -> bool:
        """The requested block; refused (False) unless it lies past the current one, as Kafka's
        broker checks the controller's answer."""
        if (self._current is not None and block.first < self._current.end) or block.first < 0 or block.size <= 0:
            self.refused(now_ms)
            return False
        self.asking = False
        self._upcoming = block
        return True

    def refused(self, now_ms: float) -> None:
        """The request failed: `needs_block` asks again from 50 ms on."""
        self.asking = False
        self._retry_at = now_ms + RETRY_BACKOFF_MS
