"""EndTxn (26), v0–v5.

v1 changes only throttling; v2 answers PRODUCER_FENCED where v0–v1 answer INVALID_PRODUCER_EPOCH;
v3 is flexible; v4 adds TRANSACTION_ABORTABLE to what a client may get. v5 (KIP-890 part 2) is a
transactions-v2 client's: every end bumps the epoch (a new producer id once it is exhausted), the
answer carries the id and epoch to go on with, and a retry is recognised by the epoch it bumped from
(core/transactions/machine.py `_end_txn_v2`). librdkafka sends at most v1.

Ongoing → PrepareCommit/PrepareAbort, answered once that is durable; the coordinator then writes
the markers and Complete* (coordinator/runtime/transactions.py). A retry of a finished end answers
NONE (CONCURRENT_TRANSACTIONS while its markers are still being written), the opposite result
INVALID_TXN_STATE, an Empty transaction INVALID_TXN_STATE.
"""

from __future__ import annotations

import asyncio

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.END_TXN
VERSIONS = (0, 5)


def _answer(request: Request, error: ErrorCode, producer_id: int = -1, producer_epoch: int = -1):
    return build_response(KEY, request.version, {"error_code": error, "producer_id": producer_id,
                                                 "producer_epoch": producer_epoch})


def handle(node, request: Request):
    body = request.body
    if not authorized(node, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return _answer(request, ErrorCode.transactional_id_authorization_failed)
    transactions = getattr(node, "transactions", None)
    if transactions is None:
        return _answer(request, ErrorCode.not_coordinator)
    return asyncio.ensure_future(_end(transactions, request))


async def _end(transactions, request: Request):
    body = request.body
    error, producer_id, epoch = await transactions.end_txn(body.transactional_id, body.producer_id,
                                                           body.producer_epoch, body.committed,
                                                           2 if request.version >= 5 else 0)
    if error == ErrorCode.producer_fenced and request.version < 2:
        error = ErrorCode.invalid_producer_epoch
    if request.version < 5:  # v0–v4 answer -1, -1 (Kafka's TV1 path)
        producer_id = epoch = -1
    return _answer(request, error, producer_id, epoch)
