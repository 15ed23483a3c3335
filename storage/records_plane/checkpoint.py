"""The records plane's small files in the data dir, each rewritten whole and crash-safe
(`storage.files.atomic_write`), one per node id (workers and cluster nodes share a data dir):

- `records-log-ends-<node>.json`, the memory plane's checkpoint (Kafka's recovery-point and
  log-start-offset checkpoints play this part): per partition (topic id, partition) an offset that no
  record given out so far reaches. After a restart the memory plane starts each partition there,
  empty, so no committed offset ever lies past a log end (a consumer group never skips new records).
  A clean stop writes the exact log ends; while serving, a partition's end is reserved ahead in steps
  of `RESERVE` offsets before a record passes it, so a kill -9 leaves a gap of unused offsets, never a
  log end below an offset that was handed out.
- `producer-ids-<node>.json`: the producer ids InitProducerId may have handed out, reserved in blocks
  of `PRODUCER_ID_BLOCK` before any id of a block is given (Kafka's producer-id blocks), so a restart
  never hands out an id again. A lone node's and workers'; cluster nodes take their blocks from etcd
  (coordinator/cluster/etcd/producer_ids.py), starting above what these files reserved
  (`residue_ids_floor`).
"""

from __future__ import annotations

import json
import os
import uuid

from ..files import JsonFile

RESERVE = 1 << 16
PRODUCER_ID_BLOCK = 1000  # Kafka's ProducerIdsBlock size


class LogEndsFile(JsonFile):
    what = "the memory records plane's log ends"
    remedy = "delete it: the memory plane then starts every partition at offset 0"

    def __init__(self, data_dir: str, node_id: int) -> None:
        self.name = f"records-log-ends-{node_id}.json"
        super().__init__(data_dir)

    @staticmethod
    def empty() -> dict:
        return {}

    @staticmethod
    def decode(data: bytes) -> dict:
        return {(uuid.UUID(t), int(p)): int(end) for t, p, end in json.loads(data)["log_ends"]}

    @staticmethod
    def encode(content: dict) -> bytes:
        return json.dumps({"version": 1, "log_ends": [[str(t), p, end] for (t, p), end in sorted(
            content.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))]}).encode()


class ProducerIdsFile(JsonFile):
    what = "the producer id blocks"
    remedy = ("set its next_block above every producer id handed out before (or delete it only if no "
              "idempotent producer of the previous run still writes)")

    def __init__(self, data_dir: str, node_id: int) -> None:
        self.name = f"producer-ids-{node_id}.json"
        super().__init__(data_dir)

    @staticmethod
    def empty() -> int:
        return 0

    @staticmethod
    def decode(data: bytes) -> int:
        return int(json.loads(data)["next_block"])

    @staticmethod
    def encode(content: int) -> bytes:
        return json.dumps({"version": 1, "next_block": content}).encode()




def residue_ids_floor(data_dir: str, spaces: int = 1 << 16) -> int:
    """An id above every one the producer-id files of `data_dir` may have let out when cluster nodes
    handed out residues of their node id mod `spaces` (node n: n + k·spaces, k below its file's
    next_block · PRODUCER_ID_BLOCK): where cluster mode's etcd counter starts on a dir of before it."""
    floor = 0
    for name in os.listdir(data_dir) if os.path.isdir(data_dir) else ():
        node = name.removeprefix("producer-ids-").removesuffix(".json")
        if name.startswith("producer-ids-") and name.endswith(".json") and node.isdigit():
            floor = max(floor, ProducerIdsFile(data_dir, int(node)).load() * PRODUCER_ID_BLOCK * spaces)
    return floor
