"""Cluster mode's producer ids: blocks of 1000 granted from one counter in etcd (`producer.ids` under
the prefix: the first id of the next block), advanced by a compare-and-swap transaction, as Kafka's
controller grants AllocateProducerIds from its ProducerIdsRecord. A block is in etcd before any id
of it is handed out, so no id is handed out twice, whichever node restarts or is killed (a killed
node's unused ids are skipped). Idempotent and transactional producers share it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from groupd.coordinator.cluster.view import ClusterError
from groupd.coordinator.core.producer_id_blocks import BLOCK_SIZE, Block, ProducerIdBlocks

from .client import reason

log = logging.getLogger("groupd")

MAX_ID = (1 << 63) - 1
ATTEMPTS = 20  # contended swaps before a request gives up (the next allocation asks again)


async def grant_block(client, key: bytes, node_id: int, floor: int = 0, size: int = BLOCK_SIZE) -> Block:
    """The next block, taken from the counter at `key` (created at `floor` when absent)."""
    tx = client.transactions
    for _ in range(ATTEMPTS):
        found = await client.get(key)
        if found is None:
            first, compare = floor, [tx.create(key) == 0]
        else:
            first, compare = int(json.loads(found.value)["next_producer_id"]), [tx.value(key) == found.value]
        if first > MAX_ID - size:  # Kafka's controller: UnknownServerException, ids exhausted
            raise ClusterError(f"producer ids exhausted: {key.decode()} is at {first}")
        value = json.dumps({"version": 1, "next_producer_id": first + size, "node": node_id}).encode()
        ok, _ = await client.transaction(compare=compare, success=[tx.put(key, value)], failure=[])
        if ok:
            return Block(first, size)
    raise ClusterError(f"{key.decode()} changed under {ATTEMPTS} attempts in a row")


def _now_ms() -> float:
    return time.monotonic() * 1000


class EtcdProducerIds:
    """`allocate()` for InitProducerId (storage.records_plane.producer_ids_for): from the current block,
    asking etcd for the next one in the background (core/producer_id_blocks.py says when)."""

    def __init__(self, cluster, floor: int = 0) -> None:
        self.cluster = cluster
        self.floor = floor  # where a fresh counter starts: above the ids of before it existed
        self.blocks = ProducerIdBlocks()
        self._task: asyncio.Task | None = None
        self._failures = 0  # requests failed in a row (logged at the first and every 20th)

    async def start(self) -> None:
        """The first block, before the node serves."""
        self.blocks.ask()
        try:
            block = await self._grant()
        except ClusterError:
            raise
        except Exception as e:
            raise ClusterError(f"cannot get a producer id block from etcd: {reason(e)}") from None
        self.blocks.grant(block, _now_ms())

    def allocate(self) -> int:
        """The next id (raises BlockPending: InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS)."""
        try:
            return self.blocks.allocate()
        finally:
            if self.blocks.needs_block(_now_ms()):
                self.blocks.ask()
                self._task = asyncio.get_running_loop().create_task(self._ask())

    async def _grant(self) -> Block:
        c = self.cluster
        block = await grant_block(c.client, c.key("producer.ids"), c.node_id, self.floor)
        log.info("producer id block granted first=%d size=%d", block.first, block.size)
        return block

    async def _ask(self) -> None:
        try:
            block = await self._grant()
        except asyncio.CancelledError:
            self.blocks.refused(_now_ms())
            raise
        except Exception as e:  # noqa: BLE001  (etcd away: an allocation asks again after the backoff)
            self._failures += 1
            if self._failures == 1 or self._failures % 20 == 0:
                log.warning("producer id block request failed failures=%d: %s", self._failures, reason(e))
            self.blocks.refused(_now_ms())
            return
        self._failures = 0
        if not self.blocks.grant(block, _now_ms()):
            log.error("producer id block refused first=%d size=%d: not past the current block", block.first,
                      block.size)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
