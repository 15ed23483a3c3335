"""The `consumer` protocol's embedded bytes: the subscription a member sends in JoinGroup and the
assignment its leader hands out in SyncGroup (ConsumerProtocolSubscription/Assignment, any
version: later versions only append fields, so the v0 prefix is always readable)."""

from __future__ import annotations

import struct


class BadConsumerProtocol(Exception):
    pass


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise BadConsumerProtocol("bad string")
    return buf[pos : pos + n].decode(), pos + n


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription: int16 version, array of topic names."""
    try:
        (version, count) = struct.unpack_from(">hi", metadata, 0)
        if version < 0 or count < 0:
            raise BadConsumerProtocol("negative version or count")
        pos, topics = 6, []
        for _ in range(count):
            topic, pos = _string(metadata, pos)
            topics.append(topic)
        return topics
    except (struct.error, UnicodeDecodeError) as e:
        raise BadConsumerProtocol(str(e)) from None


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    """The partitions of a ConsumerProtocolAssignment: int16 version, array of (topic, [partition])."""
    if not assignment:
        return {}
    try:
        (version, count) = struct.unpack_from(">hi", assignment, 0)
        pos, out = 6, {}
        for _ in range(max(count, 0)):
            topic, pos = _string(assignment, pos)
            (n,) = struct.unpack_from(">i", assignment, pos)
            out[topic] = list(struct.unpack_from(f">{max(n, 0)}i", assignment, pos + 4))
            pos += 4 + 4 * max(n, 0)
        return out
    except (struct.error, UnicodeDecodeError) as e:
        raise BadConsumerProtocol(str(e)) from None


def encode_subscription(topics: list[str], user_data: bytes = b"") -> bytes:
    out = [struct.pack(">hi", 0, len(topics))]
    out += [struct.pack(">h", len(t.encode())) + t.encode() for t in topics]
    out.append(struct.pack(">i", len(user_data)) + user_data)
    return b"".join(out)


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = [struct.pack(">hi", 0, len(partitions))]
    for topic, parts in partitions.items():
        out.append(struct.pack(">h", len(topic.encode())) + topic.encode())
        out.append(struct.pack(f">i{len(parts)}i", len(parts), *parts))
    out.append(struct.pack(">i", len(user_data)) + user_data)
    return b"".join(out)
