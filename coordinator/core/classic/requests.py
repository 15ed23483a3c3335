"""The classic APIs' requests as the machine takes them (decoded from any version by coordinator/apis)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    version: int
    client_id: str
    client_host: str
    reason: str | None = None


@dataclasses.dataclass(slots=True)
class SyncRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclasses.dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None


@dataclasses.dataclass(slots=True)
class LeaveRequest:
    group_id: str
    members: list[tuple[str, str | None]]  # (member id, group instance id)
