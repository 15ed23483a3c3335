"""TxnOffsetCommit (28), v0–v5: offsets committed inside a producer's transaction (KIP-98), held
pending until the transaction's marker (coordinator/core/txn_offsets.py).

v1 changes nothing on the wire; v2 adds the committed leader epoch; v3 (KIP-447) the member id,
generation and group instance id, checked as the group's membership; v3 is flexible; v4 (KIP-890
part 1) may answer TRANSACTION_ABORTABLE (older versions get INVALID_TXN_STATE instead). v5 (KIP-890
part 2, a transactions-v2 client, which sends no AddOffsetsToTxn) adds the group's offsets partition
to the transaction instead of verifying it is there (AddPartitionsToTxn v5 to the transaction
coordinator, in process or over the wire).

Errors are per partition only (the response has no top-level error), in Kafka's order: WRITE on
the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
(GROUP_AUTHORIZATION_FAILED), READ on each topic and its existence (KafkaApis); then an empty
group id (INVALID_GROUP_ID), the coordinator's state, the transaction's liveness (verified by the
transaction coordinator: `node.transactions.verify_offsets`, in process or, when another worker or
node coordinates the transactional id, with AddPartitionsToTxn v4 verify-only there), and the
membership and metadata checks of the group's shard. The reply leaves once the transactional
batch is durable.
"""

from __future__ import annotations

import asyncio
import inspect

from groupd.coordinator.core.requests import TxnOffsetCommitRequest
from groupd.coordinator.runtime.transactions import client_verdict
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .offset_commit import checked_offsets
from .request import Request, respond

KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = (0, 5)

E = ErrorCode


def handle(node, request: Request):
    body, version = request.body, request.version
    order = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    if not authorized(node, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return error_response(version, body, E.transactional_id_authorization_failed)
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return error_response(version, body, E.group_authorization_failed)
    offsets, refused = checked_offsets(node, request)
    if not offsets:
        return _response(version, order, refused)
    req = TxnOffsetCommitRequest(body.group_id, body.transactional_id, body.producer_id, body.producer_epoch,
                                 getattr(body, "generation_id", -1), getattr(body, "member_id", ""),
                                 getattr(body, "group_instance_id", None), offsets, version)

    def failed(error: ErrorCode):
        return _response(version, order, {**refused, **{(t, p): error for t, p, *_ in offsets}})

    if not body.group_id:
        return failed(E.invalid_group_id)
    coordinator = node.coordinator
    if (error := coordinator.unavailable(coordinator.partition(body.group_id))) is not None:
        return failed(error)

    def commit(verdict: ErrorCode):
        if verdict != E.none:
            return failed(_verdict_error(verdict, version))
        return respond(coordinator.txn_commit(req), lambda errors: _response(version, order, {**refused, **errors}))

    if body.producer_id < 0:  # no producer: no transaction could have added the group (what verification says)
        return failed(E.invalid_producer_id_mapping)
    transactions = getattr(node, "transactions", None)
    if transactions is None:  # no transaction coordinator on this node: accepted, as before verification
        return commit(E.none)
    verdict = transactions.verify_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                          body.group_id, add=version >= 5)
    if not inspect.isawaitable(verdict):
        return commit(verdict)

    async def verified():
        reply = commit(await verdict)
        return await reply if isinstance(reply, asyncio.Future) else reply

    return asyncio.ensure_future(verified())


def _verdict_error(error: ErrorCode, version: int) -> ErrorCode:
    """As Kafka's verification hands the errors back (client_verdict; TRANSACTION_ABORTABLE from v4); a
    coordinator that could not be asked (NOT_ENOUGH_REPLICAS) becomes COORDINATOR_NOT_AVAILABLE, as the
    group coordinator normalises it (clients look the coordinator up again and retry)."""
    if error == E.not_enough_replicas:
        return E.coordinator_not_available
    return client_verdict(error, version >= 4)


def _response(version: int, order, errors: dict):
    return build_response(KEY, version, {"topics": [
        {"name": name, "partitions": [{"partition_index": p, "error_code": errors[(name, p)]} for p in parts]}
        for name, parts in order]})


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error`, in every requested partition."""
    order = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    return _response(version, order, {(name, p): error for name, parts in order for p in parts})
