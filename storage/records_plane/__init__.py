"""groupd's records plane (`records.plane: memory`, the default): Produce appends record batches
to in-memory partitions, Fetch and ListOffsets read them, InitProducerId serves idempotent
producers. With `records.plane: none` groupd is a pure coordinator and stores no records at all.

The group coordinator never imports this package; only the Produce, Fetch, ListOffsets and
InitProducerId handlers in `coordinator/apis/` do. Batches are parsed and CRC-checked with
`aiokafka.record` (no second codec). Nothing here does I/O or reads the clock.
"""

from __future__ import annotations

import weakref
from typing import Any

from .plane import Appended, MemoryPlane, ProducerIds

__all__ = ["Appended", "MemoryPlane", "ProducerIds", "plane_for", "producer_ids_for"]

NONE, MEMORY = "none", "memory"

_planes: weakref.WeakKeyDictionary[Any, MemoryPlane] = weakref.WeakKeyDictionary()
_producer_ids: weakref.WeakKeyDictionary[Any, ProducerIds] = weakref.WeakKeyDictionary()


def plane_for(node: Any) -> MemoryPlane | None:
    """The node's records plane, created on first use; None when `records.plane` is none."""
    settings = node.settings
    if settings.records_plane != MEMORY:
        return None
    plane = _planes.get(node)
    if plane is None:
        plane = _planes[node] = MemoryPlane(settings.records_retention_bytes, settings.records_retention_ms,
                                            settings.records_message_max_bytes, settings.records_memory_max_bytes)
    return plane


def producer_ids_for(node: Any) -> ProducerIds:
    """The node's producer ids: from its `producer_id_block` (first, step) where it shares the id space
    with other processes (workers), else 0, 1, 2, ..."""
    ids = _producer_ids.get(node)
    if ids is None:
        ids = _producer_ids[node] = ProducerIds(*getattr(node, "producer_id_block", (0, 1)))
    return ids
