"""Requests on a group's offsets and on the group itself, whatever its type (decoded from any
version by coordinator/apis)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class OffsetCommitRequest:
    group_id: str
    generation: int  # the generation (classic) or member epoch (consumer); -1 without group management
    member_id: str
    group_instance_id: str | None
    retention_ms: int  # -1: the broker's retention (v5+ never send another)
    offsets: list[tuple[str, int, int, int, str | None]]  # (topic, partition, offset, leader epoch, metadata)
    version: int


@dataclasses.dataclass(slots=True)
class TxnOffsetCommitRequest:
    """TxnOffsetCommit (28): offsets committed inside a producer's transaction (KIP-98, KIP-447)."""

    group_id: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    generation: int  # v3+ (KIP-447): the generation or member epoch; -1 before v3
    member_id: str  # "" before v3
    group_instance_id: str | None
    offsets: list[tuple[str, int, int, int, str | None]]  # (topic, partition, offset, leader epoch, metadata)
    version: int


@dataclasses.dataclass(slots=True)
class OffsetFetchRequest:
    group_id: str
    topics: list[tuple[str, list[int]]] | None  # None: every committed offset
    require_stable: bool = False
    member_id: str | None = None  # v9: the member checked on a consumer group (spec §7.1)
    member_epoch: int = -1


@dataclasses.dataclass(slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: list[tuple[str, list[int]]]
