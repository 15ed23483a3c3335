"""DescribeTransactions (65), v0: each transactional id's state, timeout, start, producer id and
epoch and partitions (what `kafka-transactions.sh describe` prints). An id the principal may not
DESCRIBE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, one another worker or node coordinates
NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its partition loads here), an unknown one
TRANSACTIONAL_ID_NOT_FOUND; the topics it may not DESCRIBE are left out of the partitions (Kafka's KafkaApis)."""

from __future__ import annotations

import datetime

from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.transaction_records import TxnState

from .request import Request

KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = (0, 0)


def _time(ms: int) -> datetime.datetime:
    """-1 (no transaction) included: kio writes a datetime's milliseconds."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _failed(txn_id: str, error: ErrorCode) -> dict:
    """Kafka leaves the other fields at their schema defaults (zeros)."""
    return {"error_code": error, "transactional_id": txn_id, "transaction_state": "",
            "transaction_timeout": datetime.timedelta(0), "transaction_start_time": _time(0), "producer_id": 0,
            "producer_epoch": 0, "topics": []}


def _describe(node, request: Request, txn_id: str) -> dict:
    if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return _failed(txn_id, ErrorCode.transactional_id_authorization_failed)
    transactions = getattr(node, "transactions", None)
    if transactions is None:
        return _failed(txn_id, ErrorCode.coordinator_not_available)
    if not txn_id:
        return _failed(txn_id, ErrorCode.invalid_request)
    if (error := transactions.unavailable(txn_id)) is not None:  # another worker or node coordinates it
        return _failed(txn_id, error)
    meta = transactions.core.txns.get(txn_id)
    if meta is None or meta.state == TxnState.DEAD:
        return _failed(txn_id, ErrorCode.transactional_id_not_found)
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(meta.partitions):
        topics.setdefault(topic, []).append(p)
    shown = [{"topic": t, "partitions": ps} for t, ps in topics.items()
             if authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t, audit=False)]
    return {"error_code": ErrorCode.none, "transactional_id": txn_id, "transaction_state": meta.state.label,
            "transaction_timeout": datetime.timedelta(milliseconds=meta.timeout_ms), "transaction_start_time": _time(meta.start_ms),
            "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch, "topics": shown}


def handle(node, request: Request):
    return build_response(KEY, request.version, {"transaction_states": [
        _describe(node, request, txn_id) for txn_id in request.body.transactional_ids]})
