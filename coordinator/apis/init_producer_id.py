"""InitProducerId (22), v0–v4.

v1 changes only throttling; v2 is flexible; v3 lets a producer pass its current id and epoch
(KIP-360, to recover from an unknown-producer error); v4 adds nothing on the wire. v5 (KIP-890)
and v6 (KIP-939) only matter to transactions and are not advertised.

Idempotent producers (no transactional id): as in Kafka, every request gets a fresh producer id
with epoch 0, whatever id and epoch it carries. The Java producer is idempotent by default,
librdkafka when `enable.idempotence=true`, kafka-python when `enable_idempotence=True`. Ids are
handed out in every records-plane mode: with `records.plane: none` the producer then learns from
Produce itself (INVALID_REQUEST with a message) that nothing is stored. Ids are reserved in blocks
of 1000 in the data dir before any is handed out (`producer-ids-<node>.json`, Kafka's producer-id
blocks), so a restart never hands out an id again (storage/records_plane/checkpoint.py).

Transactional producers (a transactional id) go to the transaction coordinator
(coordinator/runtime/transactions.py): a new producer id with epoch 0 on first use, then the epoch
bumped on every call (a new id once the epoch is exhausted), an Ongoing transaction fenced and
aborted first (CONCURRENT_TRANSACTIONS until its abort is complete: the client retries), a timeout
over `transaction.max.timeout.ms` INVALID_TRANSACTION_TIMEOUT, and from v3 the producer's current id
and epoch checked (PRODUCER_FENCED, answered INVALID_PRODUCER_EPOCH below v4 as Kafka's KafkaApis).

Under `--workers` and in cluster mode the request goes to the worker or node FindCoordinator names for
the transactional id (the owner of its `__transaction_state` partition); elsewhere it answers
NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while that partition loads here) and the client looks
the coordinator up again. Producer ids are unique across workers and nodes: each worker hands out its
own residue of the id space (`producer_id_block`), reserved in blocks in the data dir; cluster nodes
take blocks of 1000 from a counter in etcd (coordinator/cluster/etcd/producer_ids.py, Kafka's
AllocateProducerIds), and while a node waits for its next block the request answers
COORDINATOR_LOAD_IN_PROGRESS, as Kafka's RPCProducerIdManager does (clients retry it).
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.core.producer_id_blocks import BlockPending
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized, denied
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.records_plane import producer_ids_for

from .request import Request, ms

KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 5)  # v5 (KIP-890) only lets a client be told TRANSACTION_ABORTABLE, which v1 transactions never answer here


def _refused(node, request: Request) -> ErrorCode | None:
    """A transactional id needs WRITE on it; an idempotent producer IDEMPOTENT_WRITE on the cluster
    or WRITE on some topic (Kafka's authorizeByResourceType)."""
    transactional_id = request.body.transactional_id
    if transactional_id is not None:
        if not authorized(node, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return ErrorCode.transactional_id_authorization_failed
        return None
    if node.access is None or authorized(node, request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                                         CLUSTER_NAME, audit=False):
        return None
    if node.access.authorizer.may_any(request.principal, request.client_host, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    denied(request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
    return ErrorCode.cluster_authorization_failed


def handle(node, request: Request):
    if (error := _refused(node, request)) is not None:
        return build_response(ApiKey.INIT_PRODUCER_ID, request.version, {
            "error_code": error, "producer_id": -1, "producer_epoch": -1})
    if request.body.transactional_id is not None:
        transactions = getattr(node, "transactions", None)
        if transactions is None:
            return build_response(ApiKey.INIT_PRODUCER_ID, request.version, {
                "error_code": ErrorCode.unsupported_for_message_format, "producer_id": -1, "producer_epoch": -1})
        return asyncio.ensure_future(_transactional(transactions, request))
    try:
        producer_id = producer_ids_for(node).allocate()
    except BlockPending:
        return build_response(ApiKey.INIT_PRODUCER_ID, request.version, {
            "error_code": ErrorCode.coordinator_load_in_progress, "producer_id": -1, "producer_epoch": -1})
    return build_response(ApiKey.INIT_PRODUCER_ID, request.version, {
        "error_code": ErrorCode.none, "producer_id": producer_id, "producer_epoch": 0})


async def _transactional(transactions, request: Request):
    body = request.body
    expected = (body.producer_id, body.producer_epoch) if request.version >= 3 else (-1, -1)
    error, producer_id, epoch = await transactions.init_producer_id(
        body.transactional_id, ms(body.transaction_timeout), *expected)
    if error == ErrorCode.producer_fenced and request.version < 4:
        error = ErrorCode.invalid_producer_epoch  # what clients before v4 understand
    return build_response(ApiKey.INIT_PRODUCER_ID, request.version, {
        "error_code": error, "producer_id": producer_id, "producer_epoch": epoch})
