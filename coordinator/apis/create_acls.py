"""CreateAcls (30), v1–v3 (Kafka 4 removed v0).

v1 adds the resource pattern type (LITERAL or PREFIXED); v2 is flexible; v3 adds the USER resource
type. Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED per creation); without an
authorizer every creation gets SECURITY_DISABLED. A creation Kafka cannot accept (codes UNKNOWN/ANY/
MATCH, an empty name, a CLUSTER name other than kafka-cluster, a principal without ':') gets
INVALID_REQUEST alone; the rest are written to data.dir/acls.json before they apply. Creating an
ACL that exists succeeds and changes nothing.
"""

from __future__ import annotations

import logging

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.security.acls import AclBinding, AclOperation
from groupd.coordinator.security.authorizer import acl_row
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .describe_acls import refused
from .request import Request, respond

KEY = ApiKey.CREATE_ACLS
VERSIONS = (1, 3)

log = logging.getLogger("groupd.authorizer")


def handle(node, request: Request):
    creations = request.body.creations
    refusal = refused(node, request, AclOperation.ALTER)
    if refusal is not None:
        return _response(request.version, [refusal] * len(creations))
    results: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    for c in creations:
        try:
            valid.append(AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                                       c.operation, c.permission_type))
            results.append((ErrorCode.none, None))
        except ValueError as e:
            results.append((ErrorCode.invalid_request, str(e)))
    # the controller writes the ACL file (on another worker: the controller's answer, later)
    written = controller_writes.write(node, "create_acls", {"acls": [acl_row(b) for b in valid]})
    return respond(written, lambda done: _created(request, valid, results, done))


def _created(request: Request, valid: list[AclBinding], results: list[tuple[ErrorCode, str | None]], done: dict):
    refusal = controller_writes.refusal(done, "The ACLs could not be stored.")
    if refusal is not None:
        if "failed" in done or "timed_out" in done:
            log.error("ACLs not created: cannot write the ACL file: %s", done.get("failed") or done["timed_out"])
        results = [refusal if error is ErrorCode.none else (error, message) for error, message in results]
    else:
        for acl in valid:
            log.info("acl created %s by principal=%s host=%s", acl, request.principal, request.client_host.lstrip("/"))
    return _response(request.version, results)


def _response(version: int, results: list[tuple[ErrorCode, str | None]]):
    return build_response(KEY, version, {"results": [{"error_code": e, "error_message": m} for e, m in results]})
