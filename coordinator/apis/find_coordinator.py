"""FindCoordinator (10), v0–v6.

v1 adds the key type and error message; v3 is flexible; v4 batches keys (CoordinatorKeys in,
Coordinators[] out); v5/v6 change only error semantics. A group's coordinator is the node owning its
offsets partition in the node's view of the cluster (coordinator/cluster/view.py), at its address on the
listener the request came in on (COORDINATOR_NOT_AVAILABLE while nobody owns the partition). A
transactional id's coordinator is the owner of its `__transaction_state` partition, which rides on the
offsets partition of the same number (coordinator/core/transactions/ownership.py). Share groups have
none: COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from groupd.coordinator.cluster.view import address
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

GROUP, TRANSACTION, SHARE = 0, 1, 2

KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 6)


def _lookup(node, request: Request, key: str, key_type: int) -> dict:
    # Kafka answers a found coordinator with Errors.NONE's message up to v3 and an empty one from v4
    found = "NONE" if request.version < 4 else ""
    if key_type == GROUP:
        if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            error, message = ErrorCode.group_authorization_failed, None
        else:
            owner = node.cluster.coordinator(node.coordinator.partition(key))
            at = None if owner is None else address(node.cluster, owner, request.advertised)
            if at is not None:
                return {"key": key, "node_id": owner, "host": at[0], "port": at[1], "error_code": ErrorCode.none,
                        "error_message": found}
            error, message = ErrorCode.coordinator_not_available, None
    elif key_type == TRANSACTION and not authorized(node, request, AclOperation.DESCRIBE,
                                                    ResourceType.TRANSACTIONAL_ID, key):
        error, message = ErrorCode.transactional_id_authorization_failed, None
    elif key_type == TRANSACTION and getattr(node, "transactions", None) is not None:
        owner = node.transactions.coordinator_of(key)
        at = None if owner is None else address(node.cluster, owner, request.advertised)
        if at is not None:
            return {"key": key, "node_id": owner, "host": at[0], "port": at[1],
                    "error_code": ErrorCode.none, "error_message": found}
        error, message = ErrorCode.coordinator_not_available, None
    elif key_type == TRANSACTION:
        error = ErrorCode.coordinator_not_available
        message = "this node coordinates no transactions"
    elif key_type == SHARE:
        error = ErrorCode.coordinator_not_available
        message = "groupd coordinates consumer groups only"
    else:
        error, message = ErrorCode.invalid_request, f"Unknown coordinator type {key_type}"
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error,
            "error_message": message}


def handle(node, request: Request):
    body = request.body
    key_type = getattr(body, "key_type", GROUP)
    if request.version >= 4:
        coordinators = [_lookup(node, request, key, key_type) for key in body.coordinator_keys]
        return build_response(ApiKey.FIND_COORDINATOR, request.version, {"coordinators": coordinators})
    return build_response(ApiKey.FIND_COORDINATOR, request.version, _lookup(node, request, body.key, key_type))


def error_response(version: int, body, error: ErrorCode):
    """The answer carrying only `error`, for every key asked (an injected fault's)."""
    def lookup(key: str) -> dict:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": None}

    if version >= 4:
        return build_response(ApiKey.FIND_COORDINATOR, version,
                              {"coordinators": [lookup(k) for k in body.coordinator_keys]})
    return build_response(ApiKey.FIND_COORDINATOR, version, lookup(body.key))
