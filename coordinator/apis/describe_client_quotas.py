"""DescribeClientQuotas (48), v0–v1 (v1 flexible).

groupd enforces no client quotas, and keeps none: every valid filter matches no entity, so the
answer is an empty list (`kafka-configs --entity-type users --describe` asks this beside the
SCRAM credentials, and prints the credentials alone). The filter is still checked as Kafka's
ClientQuotasImage checks it, with its messages: an empty or repeated entity type and a match string
that contradicts the match type are INVALID_REQUEST, an entity type other than user, client-id and
ip UNSUPPORTED_VERSION, ip beside user or client-id INVALID_REQUEST. Needs DESCRIBE_CONFIGS on the
cluster, else CLUSTER_AUTHORIZATION_FAILED (entries null, as every error).
"""

from __future__ import annotations

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
VERSIONS = (0, 1)

ENTITY_TYPES = ("user", "client-id", "ip")
EXACT, DEFAULT, SPECIFIED = 0, 1, 2  # match types


def handle(node, request: Request):
    if not authorized(node, request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(request, ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    refused = _refusal(request.body.components)
    if refused is not None:
        return _response(request, *refused)
    return _response(request, ErrorCode.none, None, [])


def _refusal(components) -> tuple[ErrorCode, str] | None:
    seen: set[str] = set()
    for c in components:
        if not c.entity_type:
            return ErrorCode.invalid_request, "Invalid empty entity type."
        if c.entity_type in seen:
            return ErrorCode.invalid_request, f"Entity type {c.entity_type} cannot appear more than once in the filter."
        if c.entity_type not in ENTITY_TYPES:
            return ErrorCode.unsupported_version, f"Unsupported entity type {c.entity_type}"
        if c.match_type == EXACT and c.match is None:
            return ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null."
        if c.match_type == DEFAULT and c.match is not None:
            return ErrorCode.invalid_request, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
        if c.match_type == SPECIFIED and c.match is not None:
            return ErrorCode.invalid_request, ("Request specified MATCH_TYPE_SPECIFIED, but also specified a "
                                               "match string.")
        if c.match_type not in (EXACT, DEFAULT, SPECIFIED):
            return ErrorCode.invalid_request, f"Unknown match type {c.match_type}"
        seen.add(c.entity_type)
    if "ip" in seen and seen & {"user", "client-id"}:
        return ErrorCode.invalid_request, ("Invalid entity filter component combination. IP filter component "
                                           "should not be used with user or clientId filter component.")
    return None


def _response(request: Request, error: ErrorCode, message: str | None, entries: list | None = None):
    return build_response(KEY, request.version, {"error_code": error, "error_message": message, "entries": entries})
