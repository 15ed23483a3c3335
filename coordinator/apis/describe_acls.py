"""DescribeAcls (29), v1–v3 (Kafka 4 removed v0).

v1 adds the pattern type filter (LITERAL by default; ANY, MATCH, LITERAL, PREFIXED); v2 is flexible;
v3 adds the USER resource type. Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED);
without an authorizer: SECURITY_DISABLED. A filter with an UNKNOWN code gets INVALID_REQUEST
(Kafka closes the connection while decoding it). ACLs come back grouped by resource pattern.
"""

from __future__ import annotations

from groupd.coordinator.security.acls import CLUSTER_NAME, AclFilter, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = (1, 3)
SECURITY_DISABLED = "No Authorizer is configured."


def acl_filter(f) -> AclFilter:
    """DescribeAcls' filter, or one of DeleteAcls' (the same fields)."""
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


def refused(node, request: Request, operation: AclOperation) -> tuple[ErrorCode, str | None] | None:
    """Why an ACL API is refused before it looks at its entries: the principal may not do
    `operation` on the cluster (checked first, as Kafka), or no authorizer is configured."""
    if not authorized(node, request, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, None
    if node.access is None:
        return ErrorCode.security_disabled, SECURITY_DISABLED
    return None


def handle(node, request: Request):
    refusal = refused(node, request, AclOperation.DESCRIBE)
    if refusal is not None:
        return _error(request.version, *refusal)
    wanted = acl_filter(request.body)
    invalid = wanted.invalid()
    if invalid:
        return _error(request.version, ErrorCode.invalid_request, invalid)
    resources: dict[tuple, list[dict]] = {}
    for acl in node.access.authorizer.matching(wanted):
        resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
             "permission_type": acl.permission})
    return build_response(KEY, request.version, {"error_code": ErrorCode.none, "error_message": None, "resources": [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in resources.items()]})


def _error(version: int, error: ErrorCode, message: str | None):
    return build_response(KEY, version, {"error_code": error, "error_message": message, "resources": []})
