"""Produce (0), v3–v12.

v5 adds the log start offset; v7 allows zstd; v8 per-batch record errors and an error message; v9 is
flexible; v10 adds the current leader and node endpoints to a NOT_LEADER_OR_FOLLOWER answer (KIP-951:
left at their defaults here, so clients refresh metadata); v11 changes nothing on the wire; v12 (KIP-890
part 2) is a transactions-v2 producer's: a transactional batch for a partition not yet in its
transaction adds it (AddPartitionsToTxn v5 to the transaction coordinator) instead of failing
verification. (v13, topic ids instead of names, is not offered.)

With `records.plane: none` groupd is a pure coordinator and stores no records. Produce stays
advertised because librdkafka enables its modern fetcher when both Produce (≥3) and Fetch (≥4)
are listed (clients.md §1.2). Every partition is answered INVALID_REQUEST (non-retriable, so
producers fail fast instead of retrying forever) with a message naming the setting, and the
server logs it once per client id and host.

With `records.plane: disk` (the default) or `memory` each partition's record batches are validated
(`groupd.storage.records_plane.batches`) and appended to the partition, which assigns their offsets
(the disk plane: coordinator/runtime/records_disk.py; the answer waits until the batches are written,
acks=1, or durable under the flush policy, acks=all; a failed write answers KAFKA_STORAGE_ERROR for
that partition alone); idempotent producers'
sequences are checked as Kafka does (a retried batch is answered with its first offsets).
Each partition's batches are checked against its topic's configs as Kafka does
(storage/records_plane/validator.py: max.message.bytes, keys on compacted topics, CreateTime timestamps
within message.timestamp.before/after.max.ms; LogAppendTime topics get the broker's time, answered
in `log_append_time`). Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION (Produce never auto-creates),
INVALID_TOPIC_EXCEPTION for `__consumer_offsets` (Kafka's "Cannot append to internal topic"),
INVALID_TIMESTAMP, INVALID_RECORD,
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE, INVALID_PRODUCER_EPOCH,
OUT_OF_ORDER_SEQUENCE_NUMBER; acks other than 0, 1, -1 get INVALID_REQUIRED_ACKS.

Transactions (issue 23): transactional batches need the request's transactional id (else every
partition of the request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as KafkaApis answers); a producer
without an open transaction on the partition is verified with the transaction coordinator first when
the node has one (`node.transactions.verify_partition`, KIP-890: its error is the partition's; from v12
the partition is added instead, `_verify_first`); the first
transactional batch opens the producer's transaction on the partition (the last stable offset stays
at its first offset until the marker: coordinator/runtime/txn_data.py), and a non-transactional batch
while one is open gets INVALID_TXN_STATE (storage/records_plane/producers.py, transactions.py).

In both modes acks=0 gets no reply at all, as Kafka does.
"""

from __future__ import annotations

import asyncio
import datetime
import logging

from groupd.coordinator.runtime.offsets_topic import INVALID_APPEND
from groupd.coordinator.runtime.transactions import client_verdict, verification_error
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.coordinator.system_clock import wall_ms
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage.records_plane import plane_for
from groupd.storage.records_plane.batches import first_transactional, has_transactional

from .produce_response import encode
from .request import Request

KEY = ApiKey.PRODUCE
VERSIONS = (3, 12)

log = logging.getLogger("groupd")

MESSAGE = ("groupd runs with records.plane=none (a pure group coordinator) and stores no records; "
           "set records.plane=disk or memory to produce")
STORAGE_ERROR = "The partition's log could not be written (see the server's log)"
REFUSED_CLIENTS_KEPT = 10_000  # clients remembered as told (bounded: client ids are the client's choice)
_refused: dict[tuple[str | None, str], None] = {}


def _datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


def _partition(index: int, error: ErrorCode, base_offset: int = -1, log_start_offset: int = -1,
               message: str | None = None, record_errors: tuple = (), log_append_time: int = -1) -> dict:
    return {"index": index, "error_code": error, "base_offset": base_offset,
            "log_append_time": None if log_append_time < 0 else _datetime(log_append_time),
            "log_start_offset": log_start_offset, "error_message": message,
            "record_errors": tuple({"batch_index": i, "batch_index_error_message": m} for i, m in record_errors)}


def _denied(node, request: Request) -> dict[str, ErrorCode]:
    """Topics this producer may not write: all of them (53) when the request carries transactional
    records without a transactional id or its transactional id is refused, else those without WRITE
    (29). Checked before anything else, as Kafka does."""
    body = request.body
    if body.transactional_id is None:
        refused = any(has_transactional(p.records) for t in body.topic_data for p in t.partition_data)
    else:
        refused = not authorized(node, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                 body.transactional_id)
    if refused:
        return {t.name: ErrorCode.transactional_id_authorization_failed for t in body.topic_data}
    return {t.name: ErrorCode.topic_authorization_failed for t in body.topic_data
            if not authorized(node, request, AclOperation.WRITE, ResourceType.TOPIC, t.name)}


def handle(node, request: Request, verdicts: dict | None = None):
    denied = _denied(node, request)
    plane = plane_for(node)
    if plane is None:
        return _refuse(request, denied)
    body = request.body
    if verdicts is None and (verifying := _verify_first(node, request, denied)) is not None:
        return verifying
    if body.acks not in (-1, 0, 1):
        responses = [{"name": t.name, "partition_responses": [
            _partition(p.index, ErrorCode.invalid_required_acks) for p in t.partition_data]}
            for t in body.topic_data]
        return encode(request.version, responses)
    now = wall_ms()
    disk = getattr(plane, "DISK", False)
    written = _Written(request.version) if disk and body.acks != 0 else None
    live_ids = lambda: (t.topic_id for t in node.catalog)  # noqa: E731
    responses = []
    for t in body.topic_data:
        topic = node.catalog.get(t.name)
        partitions = []
        for p in t.partition_data:
            r = None
            if t.name in denied:
                partitions.append(_partition(p.index, denied[t.name]))
            elif t.name == node.offsets_topic.name:
                partitions.append(_partition(p.index, ErrorCode.invalid_topic_exception, message=INVALID_APPEND))
            elif topic is None or not 0 <= p.index < topic.partitions:
                partitions.append(_partition(p.index, ErrorCode.unknown_topic_or_partition,
                                             message="This server does not host this topic-partition."))
            elif not node.cluster.leads(topic.name, p.index):
                partitions.append(_partition(p.index, ErrorCode.not_leader_or_follower,
                                             message="This server is not the leader for that topic-partition."))
            elif disk:
                entry = {}  # filled in below: the write may only be answered (`then`) once it is
                then = None if written is None else written.waiter(entry)
                r, waiting = plane.append_then(topic, p.index, p.records, request.version, now, body.acks, then,
                                               body.transactional_id, _verifier(node, body.transactional_id, t.name,
                                                                                p.index, request.version, verdicts))
                entry.update(_partition(p.index, r.error, r.base_offset, r.log_start_offset, r.message,
                                        r.record_errors, r.log_append_time))
                partitions.append(entry)
                if waiting:
                    written.waiting += 1
            else:
                r = plane.append((topic.topic_id, p.index), p.records, request.version, now, live_ids,
                                 f"{t.name}-{p.index}", node.catalog.topic_config(t.name), body.transactional_id,
                                 _verifier(node, body.transactional_id, t.name, p.index, request.version, verdicts))
                partitions.append(_partition(p.index, r.error, r.base_offset, r.log_start_offset, r.message,
                                             r.record_errors, r.log_append_time))
            if r is not None and r.error is ErrorCode.none:
                plane.traffic.produced(t.name, len(p.records or b""), r.records)
            if r is not None and r.record_errors:
                log.info("produce refused partition=%s-%d records=%d error=%s: %s", t.name, p.index,
                         len(r.record_errors), r.error.name, r.record_errors[0][1])
        responses.append({"name": t.name, "partition_responses": partitions})
    if body.acks == 0:
        return None
    if written is not None and written.waiting:
        return written.answer(responses)
    return encode(request.version, responses)


def _verifier(node, transactional_id: str | None, topic: str, partition: int, version: int,
              verdicts: dict | None = None):
    """The transaction coordinator's check of this partition for a producer (contract seam 3), or None
    without a coordinator (then transactional batches are accepted, as before verification). `verdicts`:
    those the coordinator gave for this request first (`_verify_first`)."""
    transactions = getattr(node, "transactions", None)
    if transactions is None or transactional_id is None:
        return None
    if verdicts is not None:
        return lambda producer_id, epoch: client_verdict(verification_error(
            # not asked (its transaction was open here) but closed meanwhile: retried, then verified
            verdicts.get((topic, partition), ErrorCode.not_enough_replicas)), version >= 11)
    return lambda producer_id, epoch: client_verdict(transactions.verify_partition(
        transactional_id, producer_id, epoch, topic, partition), version >= 11)


def _verify_first(node, request: Request, denied: dict):
    """A transactional produce whose partitions (those where the producer has no transaction open at
    its epoch) go to the transaction coordinator before the append, then the request runs with its
    verdicts: from v12 (transactions v2) to be added (AddPartitionsToTxn v5), in process or over the
    wire; before v12 to be verified (v4 verify-only) when another worker or node coordinates the
    transactional id (in process the plane asks during the append). Kafka's AddPartitionsToTxnManager.
    None when not needed."""
    body = request.body
    transactions = getattr(node, "transactions", None)
    add = request.version >= 12
    if transactions is None or body.transactional_id is None or (
            not add and transactions.verifies_here(body.transactional_id)):
        return None
    partitions, producer = [], None
    plane = plane_for(node)
    for t in body.topic_data:
        topic = node.catalog.get(t.name)
        if t.name in denied or topic is None:
            continue
        for p in t.partition_data:
            found = first_transactional(p.records)
            if found is None or not node.cluster.leads(t.name, p.index):
                continue
            held = plane.peek((topic.topic_id, p.index))
            if held is not None and held.producers.in_transaction(found[0], found[1]):
                continue  # verified when its transaction began here, as Kafka
            partitions.append((t.name, p.index))
            producer = found
    if producer is None:
        return None
    pending = transactions.verify(body.transactional_id, producer[0], producer[1], partitions, add)

    async def verified():
        verdicts = pending if isinstance(pending, dict) else await pending
        reply = handle(node, request, verdicts)
        return await reply if isinstance(reply, asyncio.Future) else reply

    return asyncio.ensure_future(verified())


class _Written:
    """The disk plane: the answer once every partition's batches are written (acks=1) or durable
    (acks=all); a partition whose write failed answers its error (KAFKA_STORAGE_ERROR) alone. The
    plane calls each partition's waiter on the loop (no future per partition)."""

    __slots__ = ("version", "waiting", "responses", "out")

    def __init__(self, version: int) -> None:
        self.version, self.waiting = version, 0
        self.responses: list[dict] | None = None
        self.out: asyncio.Future | None = None

    def waiter(self, entry: dict):
        def one_done(error: ErrorCode | None) -> None:
            if error is not None:
                entry.update(error_code=error, base_offset=-1, error_message=STORAGE_ERROR)
            self.waiting -= 1
            if self.waiting == 0 and self.out is not None and not self.out.done():
                self.out.set_result(encode(self.version, self.responses))
        return one_done

    def answer(self, responses: list[dict]) -> asyncio.Future:
        """The reply's future, set once the last waiter is called (never during `handle`: the plane
        calls them from later loop callbacks)."""
        self.responses = responses
        self.out = asyncio.get_running_loop().create_future()
        return self.out


def _refuse(request: Request, denied: dict[str, ErrorCode]):
    body = request.body
    client = (request.header.client_id, request.client_host)
    if client not in _refused:
        if len(_refused) >= REFUSED_CLIENTS_KEPT:
            del _refused[next(iter(_refused))]
        _refused[client] = None
        log.warning("produce refused client=%s host=%s topics=%s: records.plane=none stores no records "
                    "(set records.plane=disk or memory to produce)", client[0], client[1],
                    ",".join(sorted({t.name for t in body.topic_data})))
    if body.acks == 0:
        return None
    responses = [{"name": t.name, "partition_responses": [
        _partition(p.index, denied[t.name]) if t.name in denied else
        _partition(p.index, ErrorCode.invalid_request, message=MESSAGE) for p in t.partition_data]}
        for t in body.topic_data]
    return encode(request.version, responses)
