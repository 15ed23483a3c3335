"""AddPartitionsToTxn (24), v0–v5.

v1 changes only throttling; v2 answers PRODUCER_FENCED where v0–v1 answer INVALID_PRODUCER_EPOCH;
v3 is flexible. v4 (KIP-890: batches of transactions, the verify-only form) is broker-to-broker,
taken but not advertised (Kafka hides it from clients, KAFKA-15757), and needs CLUSTER_ACTION: a worker or node that
takes a transactional write for an id another one coordinates asks that one to verify it
(coordinator/cluster/broker_channel.py). v5 (transactions v2) is v4 that a broker sends for Produce v12
and TxnOffsetCommit v5 (not verify-only): the partitions join the transaction of a TV2 client; broker
only as well.

Every partition gets the same answer from the transaction coordinator; a partition the principal may
not write (TOPIC_AUTHORIZATION_FAILED) or that does not exist (UNKNOWN_TOPIC_OR_PARTITION) fails the
request, the others answering OPERATION_NOT_ATTEMPTED (Kafka's KafkaApis).
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 3)  # advertised: what clients may send
BROKER_VERSIONS = (0, 5)  # taken: v4–v5 from other workers and nodes only, not advertised (as Kafka)


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
    if request.version >= 4:
        return _brokers(node, request)
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


def _batch_answer(request: Request, error: ErrorCode, results: list[tuple[str, dict[tuple[str, int], ErrorCode]]]):
    out = []
    for txn_id, errors in results:
        topics: dict[str, list[dict]] = {}
        for (topic, p), e in errors.items():
            topics.setdefault(topic, []).append({"partition_index": p, "partition_error_code": e})
        out.append({"transactional_id": txn_id, "topic_results": [
            {"name": t, "results_by_partition": parts} for t, parts in topics.items()]})
    return build_response(KEY, request.version, {"error_code": error, "results_by_transaction": out})


def _brokers(node, request: Request):
    """v4–v5: a broker's batch. Verify-only transactions get the coordinator's verdict per partition
    (nothing changes); others are added as v3 adds them (v5: for a transactions-v2 client, Kafka's
    clientTransactionVersion from the request version)."""
    if not authorized(node, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return _batch_answer(request, ErrorCode.cluster_authorization_failed, [])
    transactions = getattr(node, "transactions", None)

    async def one(txn) -> tuple[str, dict[tuple[str, int], ErrorCode]]:
        partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
        if transactions is None:
            return txn.transactional_id, dict.fromkeys(partitions, ErrorCode.not_coordinator)
        if txn.verify_only:
            if (error := transactions.unavailable(txn.transactional_id)) is not None:
                return txn.transactional_id, dict.fromkeys(partitions, error)
            verdicts = transactions.verify(txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
            return txn.transactional_id, verdicts if isinstance(verdicts, dict) else await verdicts
        error = await transactions.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                  partitions, 2 if request.version >= 5 else 0)
        return txn.transactional_id, dict.fromkeys(partitions, error)

    async def run():
        results = await asyncio.gather(*(one(txn) for txn in request.body.transactions))
        return _batch_answer(request, ErrorCode.none, list(results))

    return asyncio.ensure_future(run())
