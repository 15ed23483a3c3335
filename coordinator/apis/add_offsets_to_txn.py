"""AddOffsetsToTxn (25), v0–v3.

v1 changes only throttling; v2 answers PRODUCER_FENCED where v0–v1 answer INVALID_PRODUCER_EPOCH;
v3 is flexible. v4 (KIP-890 part 2, which Kafka 4.3 advertises) is not: a transactions-v2 client sends
no AddOffsetsToTxn (its TxnOffsetCommit v5 adds the group), and v4 only lets a v1 client be told
TRANSACTION_ABORTABLE.

Adds the group's `__consumer_offsets` partition to the transaction, so that the group's
TxnOffsetCommit is accepted and the EndTxn's marker reaches that partition. Needs WRITE on the
transactional id and READ on the group.
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = (0, 3)


def _answer(request: Request, error: ErrorCode):
    return build_response(KEY, request.version, {"error_code": error})


def handle(node, request: Request):
    body = request.body
    if not authorized(node, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return _answer(request, ErrorCode.transactional_id_authorization_failed)
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _answer(request, ErrorCode.group_authorization_failed)
    transactions = getattr(node, "transactions", None)
    if transactions is None:
        return _answer(request, ErrorCode.not_coordinator)
    partition = (node.offsets_topic.name, node.coordinator.partition(body.group_id))
    return asyncio.ensure_future(_add(transactions, request, partition))


async def _add(transactions, request: Request, partition: tuple[str, int]):
    body = request.body
    error = await transactions.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch,
                                              [partition])
    if error == ErrorCode.producer_fenced and request.version < 2:
        error = ErrorCode.invalid_producer_epoch
    return _answer(request, error)
