"""Replies of the classic APIs as plain dicts with Kafka's field names; the API modules turn them
into the version-specific messages."""

from __future__ import annotations

from groupd.protocol import ErrorCode


def join_reply(error: ErrorCode, member_id: str = "", generation: int = -1, protocol_type=None,
               protocol_name=None, leader: str = "", members=(), skip_assignment: bool = False) -> dict:
    return {"error_code": error, "generation_id": generation, "protocol_type": protocol_type,
            "protocol_name": protocol_name, "leader": leader, "skip_assignment": skip_assignment,
            "member_id": member_id, "members": list(members)}


def sync_reply(error: ErrorCode, protocol_type=None, protocol_name=None, assignment: bytes = b"") -> dict:
    return {"error_code": error, "protocol_type": protocol_type, "protocol_name": protocol_name,
            "assignment": assignment}
