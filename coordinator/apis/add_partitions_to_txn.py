"""AddPartitionsToTxn (24), v0–v3.

v1 changes only throttling; v2 answers PRODUCER_FENCED where v0–v1 answer INVALID_PRODUCER_EPOCH;
v3 is flexible. v4–v5 (KIP-890: batches of transactions, the brokers' verify-only form) are
broker-to-broker: Kafka's clients send at most v3 (KAFKA-15757), and groupd's brokers verify in
process (`node.transactions.verify_partition`), so they are not advertised.

Every partition gets the same answer from the transaction coordinator; a partition the principal may
not write (TOPIC_AUTHORIZATION_FAILED) or that does not exist (UNKNOWN_TOPIC_OR_PARTITION) fails the
request, the others answering OPERATION_NOT_ATTEMPTED (Kafka's KafkaApis).
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 3)


def _answer(request: Request, errors: dict[tuple[str, int], ErrorCode]):
    topics: dict[str, list[dict]] = {}
    for (topic, p), error in errors.items():
        topics.setdefault(topic, []).append({"partition_index": p, "partition_error_code": error})
    return build_response(KEY, request.version, {"results_by_topic_v3_and_below": [
        {"name": t, "results_by_partition": parts} for t, parts in topics.items()]})


def _exists(node, topic: str, partition: int) -> bool:
    if topic == node.offsets_topic.name:
        return 0 <= partition < node.offsets_topic.partitions
    found = node.catalog.get(topic)
    return found is not None and 0 <= partition < found.partitions


def handle(node, request: Request):
    body = request.body
    txn_id = body.v3_and_below_transactional_id
    partitions = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    if not authorized(node, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return _answer(request, dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed))
    refused: dict[tuple[str, int], ErrorCode] = {}
    allowed: dict[str, bool] = {}
    for topic, p in partitions:
        if topic not in allowed:
            allowed[topic] = authorized(node, request, AclOperation.WRITE, ResourceType.TOPIC, topic)
        if not allowed[topic]:
            refused[(topic, p)] = ErrorCode.topic_authorization_failed
        elif not _exists(node, topic, p):
            refused[(topic, p)] = ErrorCode.unknown_topic_or_partition
    if refused:
        return _answer(request, {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in partitions})
    transactions = getattr(node, "transactions", None)
    if transactions is None:
        return _answer(request, dict.fromkeys(partitions, ErrorCode.not_coordinator))
    return asyncio.ensure_future(_add(transactions, request, txn_id, partitions))


async def _add(transactions, request: Request, txn_id: str, partitions: list[tuple[str, int]]):
    body = request.body
    error = await transactions.add_partitions(txn_id, body.v3_and_below_producer_id,
                                              body.v3_and_below_producer_epoch, partitions)
    if error == ErrorCode.producer_fenced and request.version < 2:
        error = ErrorCode.invalid_producer_epoch
    return _answer(request, dict.fromkeys(partitions, error))
