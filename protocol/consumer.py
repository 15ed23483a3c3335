"""The `consumer` protocol's embedded bytes: the subscription a member sends in JoinGroup and the
assignment its leader hands out in SyncGroup (ConsumerProtocolSubscription/Assignment, any
version: later versions only append fields, so the v0 prefix is always readable)."""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    """A ConsumerProtocolSubscription: v1 adds the owned partitions, v2 the generation, v3 the rack."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    generation: int = -1
    rack_id: str | None = None


def decode_subscription(metadata: bytes) -> Subscription:
    """Every field of a ConsumerProtocolSubscription the version carries; a newer version's extra
    fields after these are ignored."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        topics = subscribed_topics(metadata)
        pos = 6 + sum(2 + len(t.encode()) for t in topics)
        (n,) = struct.unpack_from(">i", metadata, pos)
        user_data = None if n < 0 else metadata[pos + 4 : pos + 4 + n]
        pos += 4 + max(n, 0)
        owned, generation, rack = {}, -1, None
        if version >= 1:
            owned, pos = _topic_partitions(metadata, pos)
        if version >= 2:
            (generation,) = struct.unpack_from(">i", metadata, pos)
            pos += 4
        if version >= 3:
            (n,) = struct.unpack_from(">h", metadata, pos)
            rack = None if n < 0 else _string(metadata, pos)[0]
        return Subscription(tuple(topics), user_data, owned, generation, rack)
    except (struct.error, UnicodeDecodeError) as e:
        raise BadConsumerProtocol(str(e)) from None


def _topic_partitions(buf: bytes, pos: int) -> tuple[dict[str, list[int]], int]:
    """An array of (topic, [partition]), as assignments and owned partitions carry them."""
    (count,) = struct.unpack_from(">i", buf, pos)
    pos, out = pos + 4, {}
    for _ in range(max(count, 0)):
        topic, pos = _string(buf, pos)
        (n,) = struct.unpack_from(">i", buf, pos)
        out[topic] = list(struct.unpack_from(f">{max(n, 0)}i", buf, pos + 4))
        pos += 4 + 4 * max(n, 0)
    return out, pos


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    """The partitions of a ConsumerProtocolAssignment: int16 version, array of (topic, [partition])."""
    return decode_assignment(assignment)[0]


def decode_assignment(assignment: bytes) -> tuple[dict[str, list[int]], bytes | None]:
    """A ConsumerProtocolAssignment's partitions and user data (empty bytes: no assignment at all)."""
    if not assignment:
        return {}, None
    try:
        partitions, pos = _topic_partitions(assignment, 2)
        if pos == len(assignment):
            return partitions, None
        (n,) = struct.unpack_from(">i", assignment, pos)
        return partitions, None if n < 0 else assignment[pos + 4 : pos + 4 + n]
    except (struct.error, UnicodeDecodeError) as e:
        raise BadConsumerProtocol(str(e)) from None


def encode_subscription(topics: list[str], user_data: bytes = b"",
                        owned: dict[str, list[int]] | None = None) -> bytes:
    """v0, or v1 with the owned partitions when `owned` is given."""
    out = [struct.pack(">hi", 0 if owned is None else 1, len(topics))]
    out += [struct.pack(">h", len(t.encode())) + t.encode() for t in topics]
    out.append(struct.pack(">i", len(user_data)) + user_data)
    if owned is not None:
        out.append(_encode_topic_partitions(owned))
    return b"".join(out)


def _encode_topic_partitions(partitions: dict[str, list[int]]) -> bytes:
    out = [struct.pack(">i", len(partitions))]
    for topic, parts in partitions.items():
        out.append(struct.pack(">h", len(topic.encode())) + topic.encode())
        out.append(struct.pack(f">i{len(parts)}i", len(parts), *parts))
    return b"".join(out)


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes | None = b"", version: int = 0) -> bytes:
    """`user_data=None` writes null user data (length -1), as Kafka's ConsumerProtocol does for an
    assignment without any (the ones the coordinator builds for classic members of a consumer group).
    Versions 0-3 share one layout; only the header differs."""
    tail = struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    return struct.pack(">h", version) + _encode_topic_partitions(partitions) + tail


def assignment_version(subscription: bytes) -> int:
    """The ConsumerProtocolAssignment version Kafka answers a subscription with: the subscription's own
    version, at most 3 (`ConsumerProtocol.serializeAssignment(…, deserializeVersion(subscription))`)."""
    if len(subscription) < 2:
        return 0
    return max(0, min(struct.unpack_from(">h", subscription)[0], 3))
