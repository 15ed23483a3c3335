"""ListTransactions (66), v0–v1.

v0 filters by states and producer ids; v1 adds a duration filter (transactions running longer than
that many ms). (v2, KIP-1152, adds a transactional-id regex: not yet.) Lists the transactional ids
of this coordinator the principal may DESCRIBE (others are left out, no error); state names a filter
does not know come back in `unknown_state_filters`, and if none of the filter's names is known the
list is empty (TransactionStateManager.listTransactionStates).
"""

from __future__ import annotations

from groupd.coordinator.runtime.transactions import wall_ms
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.transaction_records import TxnState

from .request import Request

KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = (0, 1)

_BY_LABEL = {s.label: s for s in TxnState}


def handle(node, request: Request):
    body = request.body
    transactions = getattr(node, "transactions", None)
    if transactions is None:
        return build_response(KEY, request.version, {"error_code": ErrorCode.coordinator_not_available,
                                                     "unknown_state_filters": [], "transaction_states": []})
    unknown = [name for name in body.state_filters if name not in _BY_LABEL]
    states = {_BY_LABEL[name] for name in body.state_filters if name in _BY_LABEL}
    producer_ids = set(body.producer_id_filters)
    duration = getattr(body, "duration_filter", -1)
    now = wall_ms()
    listed = []
    if not (body.state_filters and not states):
        for meta in transactions.core.txns.values():
            if meta.state == TxnState.DEAD or (producer_ids and meta.producer_id not in producer_ids) or (
                    states and meta.state not in states) or (duration >= 0 and now - meta.start_ms <= duration):
                continue
            if authorized(node, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                          meta.transactional_id, audit=False):
                listed.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                               "transaction_state": meta.state.label})
    return build_response(KEY, request.version, {"error_code": ErrorCode.none, "unknown_state_filters": unknown,
                                                 "transaction_states": listed})
