"""What ShareFetch (78) and ShareAcknowledge (79) share (share-groups spec §1.7, §3.6): request
checks, acknowledgement batches validated and applied per partition, reading a data partition's
batches from the records plane (either plane) and cutting them to the acquired ranges, and the
leadership of a data partition: its share state is served only by its leader (workers, cluster
mode), elsewhere NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint, as Kafka answers."""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Iterable

from groupd.coordinator.cluster.view import address
from groupd.coordinator.core.group_config import SHARE_RECORD_LOCK_DURATION_MS
from groupd.coordinator.core.share.delivery import ACCEPT, GAP, REJECT, RELEASE, RENEW
from groupd.coordinator.observability import metrics
from groupd.coordinator.runtime.records_disk import Unavailable
from groupd.coordinator.runtime.share_partitions import ShareDeliveries
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.storage.records_plane.segments import offset_for_timestamp, read_from
from groupd.storage.share_state import partition_directories

_TYPES_V1 = (GAP, ACCEPT, RELEASE, REJECT)
_TYPES_RENEW = (*_TYPES_V1, RENEW)
_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length (the bytes after this field)
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a v2 batch
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_PRODUCER_ID = struct.Struct(">q")  # at byte 43
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
# The current leader of a partition answered without a leader change: ShareFetch's and
# ShareAcknowledge's schemas give these fields no default, so Kafka sends 0 and 0 (Fetch's, -1).
NO_LEADER = {"leader_id": 0, "leader_epoch": 0}

log = logging.getLogger("groupd")


def group_lock_ms(node, group: str) -> int:
    """The group's share.record.lock.duration.ms, else the broker's group.share.record.lock.duration.ms."""
    return node.group_configs.overrides.get(group, {}).get(SHARE_RECORD_LOCK_DURATION_MS,
                                                           node.settings.group_share_record_lock_duration_ms)


def member_error(group_id: str | None, member_id: str | None) -> ErrorCode | None:
    """INVALID_REQUEST for a missing group id or a member id that is not 1–36 characters."""
    if not group_id or not member_id or len(member_id) > 36:
        return ErrorCode.invalid_request
    return None


def refusal(node, request) -> ErrorCode | None:
    """What ShareFetch and ShareAcknowledge answer before looking at the session: a missing group id
    or a bad member id (member_error), then READ on the group (GROUP_AUTHORIZATION_FAILED)."""
    body = request.body
    error = member_error(body.group_id, body.member_id)
    if error is None and not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = ErrorCode.group_authorization_failed
    return error


def merged(topics) -> dict[tuple[uuid.UUID, int], list]:
    """(topic id, partition) → its acknowledgement batches. librdkafka may name a topic (and a
    partition) several times in one request: the entries are merged, never overwritten."""
    out: dict[tuple[uuid.UUID, int], list] = {}
    for t in topics:
        for p in t.partitions:
            out.setdefault((t.topic_id, p.partition_index), []).extend(p.acknowledgement_batches)
    return out


def batches_error(batches, renew: bool = False) -> ErrorCode | None:
    """Kafka's structural checks (KafkaApis.validateAcknowledgementBatches): ranges in order and not
    overlapping, a type array of 1 or of the range's length, types 0–3, and 4 (RENEW, v2) only in a
    request whose IsRenewAck is set."""
    allowed = _TYPES_RENEW if renew else _TYPES_V1
    previous = -1
    for b in batches:
        n = b.last_offset - b.first_offset + 1
        if b.first_offset > b.last_offset or b.first_offset < previous or not b.acknowledge_types \
                or len(b.acknowledge_types) not in (1, n) or any(t not in allowed for t in b.acknowledge_types):
            return ErrorCode.invalid_request
        previous = b.last_offset
    return None


def current_leader(node, topic, index: int) -> dict:
    """The data partition's leader and its epoch, as a ShareFetch/ShareAcknowledge entry names it."""
    leader = node.cluster.leader(topic.name, index)
    return NO_LEADER if leader is None else {"leader_id": leader,
                                             "leader_epoch": node.cluster.leader_epoch(topic.name, index)}


def node_endpoints(node, request, entries: Iterable[dict]) -> list[dict]:
    """The endpoints of the leaders the refused entries name (Kafka's NodeEndpoints), on the request's
    listener; an entry served here carries NO_LEADER, which names no node."""
    named = {e["current_leader"]["leader_id"] for e in entries if e["error_code"] != ErrorCode.none}
    out = []
    for leader in sorted(named - {-1, node.cluster.node_id}):
        at = address(node.cluster, leader, request.advertised)
        if at is not None:
            out.append({"node_id": leader, "host": at[0], "port": at[1], "rack": None})
    return out


async def held_here(node, deliveries: ShareDeliveries, topic, index: int) -> ErrorCode | None:
    """None when this node leads the data partition and holds its share state (taken over now if
    needed); NOT_LEADER_OR_FOLLOWER (or KAFKA_STORAGE_ERROR) otherwise."""
    if not node.cluster.leads(topic.name, index):
        return ErrorCode.not_leader_or_follower
    return await deliveries.hold(topic.topic_id, index, node.cluster.data_stamp(topic.name, index))


def still_held(node, deliveries: ShareDeliveries, topic, index: int) -> bool:
    """After a state write: this node still leads the data partition under the stamp it took it over
    for. If not, the next leader may have read the state before the write: the answer is an error
    (a write answered with an error may or may not have landed) and the state is let go here."""
    if topic is None:  # deleted meanwhile
        return False
    data = (topic.topic_id, index)
    if node.cluster.leads(topic.name, index) and deliveries.stamp(data) == node.cluster.data_stamp(topic.name, index):
        return True
    deliveries.let_go(data)
    return False


def led_share_state(node) -> list[tuple[tuple[uuid.UUID, int], int]]:
    """The data partitions with share state in the data dir that this node leads, with their stamps."""
    out = []
    for topic_id, index in partition_directories(node.settings.data_dir):
        topic = node.catalog.by_id(topic_id)
        if topic is not None and 0 <= index < topic.partitions and node.cluster.leads(topic.name, index):
            out.append(((topic_id, index), node.cluster.data_stamp(topic.name, index)))
    return out


def acknowledge(node, deliveries: ShareDeliveries, group: str, member: str, topic, index: int,
                batches, now: int, renew: bool = False) -> ErrorCode:
    """Apply one partition's acknowledgements (checked by batches_error), all or nothing (its state held here)."""
    sp = deliveries.partitions.get((group, topic.topic_id, index))
    if sp is None:
        return ErrorCode.unknown_topic_or_partition  # Kafka: not a share-partition loaded here
    return sp.acknowledge(member, [(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches],
                          now, group_lock_ms(node, group))


async def apply_acknowledgements(node, request, deliveries: ShareDeliveries, named: dict, now: int) -> dict:
    """(topic id, partition) → the error of its acknowledgements, for the partitions that carry some.
    The changed share-partitions are written to the share-state log before this returns; if that
    write fails they are put back as they were and answer UNKNOWN_SERVER_ERROR."""
    group, member = request.body.group_id, request.body.member_id
    renew = getattr(request.body, "is_renew_ack", False)  # v2+
    results: dict = {}
    saved: dict = {}
    for (topic_id, index), batches in named.items():
        if not batches:
            continue
        topic = node.catalog.by_id(topic_id)
        if topic is not None and not authorized(node, request, AclOperation.READ, ResourceType.TOPIC, topic.name):
            error = ErrorCode.topic_authorization_failed
        else:
            error = batches_error(batches, renew)
        if error is None and topic is None:
            error = ErrorCode.unknown_topic_id
        elif error is None and not 0 <= index < topic.partitions:
            error = ErrorCode.unknown_topic_or_partition
        if error is None:
            error = await held_here(node, deliveries, topic, index)
        if error is not None:
            results[(topic_id, index)] = error
            continue
        key = (group, topic_id, index)
        if key in deliveries.partitions and key not in saved:
            saved[key] = deliveries.partitions[key].copy()
        results[(topic_id, index)] = acknowledge(node, deliveries, group, member, topic, index, batches, now, renew)
    changed = [(group, *tp) for tp, code in results.items() if code is ErrorCode.none and (group, *tp) in saved]
    if changed:
        try:
            await deliveries.persist(changed)
        except OSError as e:
            log.error("share state not written group=%s partitions=%d: %s", group, len(changed), e)
            for key in changed:
                deliveries.partitions[key] = saved[key]
                results[key[1:]] = ErrorCode.unknown_server_error
        else:
            for key in changed:
                if not still_held(node, deliveries, node.catalog.by_id(key[1]), key[2]):
                    results[key[1:]] = ErrorCode.not_leader_or_follower
            deliveries.wake()
    _count(named, results)
    return results


_TYPE_NAMES = {GAP: "gap", ACCEPT: "accept", RELEASE: "release", REJECT: "reject", RENEW: "renew"}


def _count(named: dict, results: dict) -> None:
    """groupd_share_records_acknowledged_total{type}, for the partitions whose acknowledgements held."""
    for tp, code in results.items():
        if code is not ErrorCode.none:
            continue
        for b in named[tp]:
            types = b.acknowledge_types
            if len(types) == 1:
                metrics.SHARE_ACKNOWLEDGED.labels(_TYPE_NAMES[types[0]]).inc(b.last_offset - b.first_offset + 1)
            else:
                for t in types:
                    metrics.SHARE_ACKNOWLEDGED.labels(_TYPE_NAMES[t]).inc()


async def close_session(deliveries: ShareDeliveries, group: str, member: str, session, now: int) -> None:
    """Epoch -1: the session goes and what the member still holds on its partitions is released
    (and written, so that the delivery counts survive a restart)."""
    deliveries.sessions.close(group, member)
    released = deliveries.release_member(group, member, session.partitions, now)
    try:
        await deliveries.persist(released)
    except OSError as e:  # the release stands in memory: the records are delivered again either way
        log.error("share state not written group=%s member=%s: %s", group, member, e)


def log_bounds(plane, topic, index: int) -> tuple[int, int] | ErrorCode:
    """(log start, high watermark) of a data partition, or its error (disk plane still loading it)."""
    if plane is None:
        return 0, 0  # records.plane: none: nothing to deliver
    if getattr(plane, "DISK", False):
        try:
            part = plane.partition(topic, index)
        except Unavailable as e:
            return e.error
        return part.log_start, part.high_watermark
    log = plane.peek((topic.topic_id, index))
    return (log.log_start, log.high_watermark) if log is not None else (0, 0)


async def read(node, plane, topic, index: int, offset: int, end: int, max_bytes: int, first: bool) -> bytes:
    """Whole batches from the one holding `offset`, below `end` (the disk plane's read runs off the loop)."""
    if getattr(plane, "DISK", False):
        part = plane.partition(topic, index)
        planned = part.dlog.plan_read(offset)
        if planned is None:
            return b""
        path, position, cap, inode = planned
        following = part.dlog.following(path)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(node.answers, read_from, path, position, offset, end, max_bytes, first,
                                          following, cap, inode)
    log = plane.peek((topic.topic_id, index))
    return b"".join(b.data for b in log.read(offset, max_bytes, first)) if log is not None else b""


def batch_spans(data: bytes) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, byte start, byte end) of each complete v2 batch in `data`."""
    spans = []
    pos = 0
    while pos + 27 <= len(data):
        base, length = _BATCH_HEADER.unpack_from(data, pos)
        size = 12 + length
        if pos + size > len(data):
            break
        spans.append((base, base + _LAST_DELTA.unpack_from(data, pos + 23)[0], pos, pos + size))
        pos += size
    return spans


def cut(data: bytes, spans: list[tuple[int, int, int, int]], ranges: list[tuple[int, int, int]]) -> bytes:
    """The batches of `data` that overlap an acquired range (first, last, count), unmodified: a batch
    between two ranges (archived: a marker, an aborted transaction) is left out."""
    kept = [data[a:b] for base, end_offset, a, b in spans
            if any(end_offset >= first and base <= last for first, last, _ in ranges)]
    return b"".join(kept)


def undeliverable(data: bytes, spans: list[tuple[int, int, int, int]], txns) -> list[tuple[int, int]]:
    """The offset ranges of `data` that no share consumer gets: every control batch (transaction
    markers), and with `txns` (the partition's transactions: read_committed) every batch of an
    aborted transaction, as Kafka's SharePartition.filterAbortedTransactionalAcquiredRecords
    archives them (a ShareFetch answer has no aborted-transactions list for a client to filter by)."""
    out = []
    # the aborted transactions overlapping this read, looked up once (not per batch)
    aborted = txns.aborted_spans(spans[0][0], spans[-1][1] + 1) if txns is not None and spans else ()
    for base, last, a, _ in spans:
        attributes = _ATTRIBUTES.unpack_from(data, a + 21)[0]
        if attributes & _CONTROL:
            out.append((base, last))
        elif aborted and attributes & _TRANSACTIONAL:
            producer = _PRODUCER_ID.unpack_from(data, a + 43)[0]
            # aborted: a transaction of this producer from at or before the batch to its ABORT marker
            if any(pid == producer and first <= base <= marker for pid, first, marker in aborted):
                out.append((base, last))
    return out


def partition_txns(plane, topic, index: int):
    """The data partition's transactions (storage/records_plane/transactions.py), None if it has no log."""
    if getattr(plane, "DISK", False):
        return plane.partition(topic, index).producers.txns
    log = plane.peek((topic.topic_id, index))
    return log.producers.txns if log is not None else None


def last_stable(plane, topic, index: int) -> int:
    """The data partition's last stable offset: where a read_committed share-partition stops."""
    if getattr(plane, "DISK", False):
        return plane.partition(topic, index).last_stable_offset
    log = plane.peek((topic.topic_id, index))
    return log.last_stable_offset if log is not None else 0


async def offset_for_time(node, plane, topic, index: int, timestamp: int, log_end: int) -> int:
    """The first offset whose record's timestamp is at or after `timestamp` (ListOffsets by time),
    else the log end: where a `by_duration` share-partition starts."""
    if plane is None:
        return log_end
    if getattr(plane, "DISK", False):
        part = plane.partition(topic, index)
        found = await asyncio.get_running_loop().run_in_executor(
            node.answers, offset_for_timestamp, part.dlog.timestamp_plan(timestamp), timestamp, part.high_watermark,
            part.log_start)
    else:
        log = plane.peek((topic.topic_id, index))
        found = log.offset_for_timestamp(timestamp) if log is not None else None
    return log_end if found is None else found[0]


ELSEWHERE = "The share-partition is led by another worker or node now."


async def reset_share_partition(node, deliveries: ShareDeliveries, group: str, topic, index: int,
                                start: int | None) -> tuple[ErrorCode, str | None]:
    """AlterShareGroupOffsets / DeleteShareGroupOffsets of one share-partition, at this node as its
    data partition's leader: (error, message). Led elsewhere (moved meanwhile): NOT_LEADER_OR_FOLLOWER,
    which the coordinator's share_state_at_leaders.py retries at the new leader."""
    if not 0 <= index < topic.partitions:
        return ErrorCode.unknown_topic_or_partition, None
    error = await held_here(node, deliveries, topic, index)
    if error is ErrorCode.not_leader_or_follower:
        return error, ELSEWHERE
    if error is not None:
        return error, None
    try:
        await deliveries.reset((group, topic.topic_id, index), start)
    except OSError as e:
        log.error("share state not written group=%s topic=%s partition=%d: %s", group, topic.name, index, e)
        return ErrorCode.kafka_storage_error, None
    if not still_held(node, deliveries, topic, index):
        return ErrorCode.not_leader_or_follower, None
    return ErrorCode.none, None


def offsets_admin_refusal(node, request, operation) -> tuple[ErrorCode, str | None] | None:
    """AlterShareGroupOffsets and DeleteShareGroupOffsets: the group-level checks (`operation` on the
    group, then Kafka's: an empty id INVALID_GROUP_ID, another type GROUP_ID_NOT_FOUND, members
    NON_EMPTY_GROUP; a missing group answers GROUP_ID_NOT_FOUND for Delete, passes for Alter)."""
    group = request.body.group_id
    if not group:
        return ErrorCode.invalid_group_id, None
    if not authorized(node, request, operation, ResourceType.GROUP, group):
        return ErrorCode.group_authorization_failed, None
    members = node.coordinator.share_group_has_members(group)
    if isinstance(members, ErrorCode):
        return members, None
    if members:
        return ErrorCode.non_empty_group, None
    if members is None and operation is AclOperation.DELETE:
        return ErrorCode.group_id_not_found, None
    return None


async def set_initialized(node, group: str, add: dict, remove: list, create: bool) -> ErrorCode:
    """The group's initialized share-partitions changed at its coordinator (durable), as Kafka's
    ShareGroupStatePartitionMetadata follows AlterShareGroupOffsets and DeleteShareGroupOffsets."""
    result = node.coordinator.share_set_initialized(group, add, remove, node.topics_image(), create)
    return await result if isinstance(result, asyncio.Future) else result
