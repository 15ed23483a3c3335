"""Transactions in the offsets log (KIP-98/447): an offset commit inside a producer's transaction,
and the COMMIT/ABORT marker that ends it (Kafka's EndTransactionMarker, a control batch).

In the log a transactional offset is an ordinary OffsetCommit record in a batch that carries the
producer id and epoch and the transactional attribute; a marker is the one record of a control
batch (control + transactional attributes): key = int16 version 0 + int16 type (0 ABORT, 1 COMMIT),
value = int16 version 0 + int32 coordinator epoch. In memory the producer travels in the key, so
the applier tells them apart by type and the writer knows which batch each record needs.
"""

from __future__ import annotations

import dataclasses
import struct

from .records import OffsetCommitKey

ABORT, COMMIT = 0, 1
_MARKER_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


@dataclasses.dataclass(frozen=True, slots=True)
class TxnOffsetKey:
    """An offset commit of producer `producer_id` inside its open transaction."""

    producer_id: int
    producer_epoch: int
    key: OffsetCommitKey

    @property
    def group(self) -> str:
        return self.key.group


@dataclasses.dataclass(frozen=True, slots=True)
class TxnMarkerKey:
    """The end of producer `producer_id`'s transaction on this partition (the record's value is None)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int

    group = ""  # no group's record: a revert never removes a group for it


def marker_key(commit: bool) -> bytes:
    return _MARKER_KEY.pack(0, COMMIT if commit else ABORT)


def marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER_VALUE.pack(0, coordinator_epoch)


def read_marker(key: bytes, value: bytes | None) -> tuple[bool, int]:
    """(commit, coordinator epoch) of a control record; ValueError if it is no transaction marker."""
    if len(key) < 4:
        raise ValueError("control record key too short")
    version, kind = _MARKER_KEY.unpack_from(key)
    if version != 0 or kind not in (ABORT, COMMIT):
        raise ValueError(f"unknown control record (version {version}, type {kind})")
    epoch = _MARKER_VALUE.unpack_from(value)[1] if value is not None and len(value) >= 6 else -1
    return kind == COMMIT, epoch
