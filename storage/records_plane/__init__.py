"""groupd's records plane: Produce appends record batches, Fetch and ListOffsets read them,
InitProducerId serves idempotent producers. `records.plane: disk` (the default) keeps each data
partition as segments in the data dir (`segments.py`; its writer and plane are the runtime's,
coordinator/runtime/records_disk.py); `memory` keeps them in memory (`plane.py`, `log.py`) and
resumes each partition at its last log end after a restart (`checkpoint.py`); with `none` groupd is
a pure coordinator and stores no records at all.

The group coordinator never imports this package; only the Produce, Fetch, ListOffsets and
InitProducerId handlers in `coordinator/apis/` do. Batches are parsed and CRC-checked with
`aiokafka.record` (no second codec). Nothing here does I/O or reads the clock.
"""

from __future__ import annotations

import weakref
from typing import Any

from .checkpoint import PRODUCER_ID_BLOCK, LogEndsFile, ProducerIdsFile, residue_ids_floor
from .plane import Appended, MemoryPlane, ProducerIds

__all__ = ["Appended", "MemoryPlane", "ProducerIds", "plane_for", "producer_ids_for", "register",
           "register_producer_ids", "residue_ids_floor", "save_log_ends"]

NONE, MEMORY, DISK = "none", "memory", "disk"

_planes: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_producer_ids: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # has allocate()


def plane_for(node: Any):
    """The node's records plane: the memory plane, created on first use (resuming each partition at
    its checkpointed log end); the disk plane its server registered (`register`); None when
    `records.plane` is none."""
    settings = node.settings
    if settings.records_plane == DISK:
        return _planes.get(node)
    if settings.records_plane != MEMORY:
        return None
    plane = _planes.get(node)
    if plane is None:
        ends = LogEndsFile(settings.data_dir, settings.node_id)
        plane = _planes[node] = MemoryPlane(settings.records_retention_bytes, settings.records_retention_ms,
                                            settings.records_message_max_bytes, settings.records_memory_max_bytes,
                                            resume=ends.load(), reserve=ends.save)
    return plane


def register(node: Any, plane: Any) -> None:
    """The node's disk plane (built by the runtime, which owns its writers)."""
    _planes[node] = plane


def save_log_ends(node: Any) -> None:
    """A clean stop of the memory plane: the exact log ends, where each partition resumes."""
    plane = _planes.get(node)
    if isinstance(plane, MemoryPlane):
        LogEndsFile(node.settings.data_dir, node.settings.node_id).save(plane.checkpoint())


def register_producer_ids(node: Any, ids: Any) -> None:
    """The node's producer ids from elsewhere (cluster mode: blocks granted through etcd), anything
    with `allocate()`."""
    _producer_ids[node] = ids


def producer_ids_for(node: Any):
    """The node's producer ids: those registered (`register_producer_ids`), else from its
    `producer_id_block` (first, step) where it shares the id space with other processes (workers),
    else 0, 1, 2, ...; reserved in blocks in the data dir (`producer-ids-<node>.json`), so they
    survive a restart."""
    ids = _producer_ids.get(node)
    if ids is None:
        blocks = ProducerIdsFile(node.settings.data_dir, node.settings.node_id)
        first, step = getattr(node, "producer_id_block", (0, 1))
        ids = _producer_ids[node] = ProducerIds(first, step, blocks.load(), PRODUCER_ID_BLOCK, blocks.save)
    return ids
