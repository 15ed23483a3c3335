"""DeleteAcls (31), v1–v3 (Kafka 4 removed v0).

v1 adds the pattern type filter; v2 is flexible; v3 adds the USER resource type. Needs ALTER on
the cluster (else CLUSTER_AUTHORIZATION_FAILED per filter); without an authorizer every filter
gets SECURITY_DISABLED. Each filter answers with the ACLs it deleted (none is not an error); a
filter with an UNKNOWN code gets INVALID_REQUEST alone. The remaining set is written to
data.dir/acls.json before the deletions apply.
"""

from __future__ import annotations

import logging

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.security.acls import AclOperation
from groupd.coordinator.security.authorizer import acl_binding
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .describe_acls import acl_filter, refused
from .request import Request, respond

KEY = ApiKey.DELETE_ACLS
VERSIONS = (1, 3)

log = logging.getLogger("groupd.authorizer")


def handle(node, request: Request):
    filters = request.body.filters
    refusal = refused(node, request, AclOperation.ALTER)
    if refusal is not None:
        return _failed(request.version, [refusal] * len(filters))
    wanted = [acl_filter(f) for f in filters]
    invalid = [f.invalid() for f in wanted]
    # the controller writes the ACL file (on another worker: the controller's answer, later)
    written = controller_writes.write(node, "delete_acls", {"filters": [
        controller_writes.acl_filter_args(f) for f, why in zip(wanted, invalid) if why is None]})
    return respond(written, lambda done: _deleted(request, invalid, done))


def _deleted(request: Request, invalid: list[str | None], done: dict):
    refusal = controller_writes.refusal(done, "The ACLs could not be stored.")
    if refusal is not None:
        if "failed" in done or "timed_out" in done:
            log.error("ACLs not deleted: cannot write the ACL file: %s", done.get("failed") or done["timed_out"])
        return _failed(request.version, [(ErrorCode.invalid_request, why) if why else refusal for why in invalid])
    deleted = iter([[acl_binding(row) for row in rows] for rows in done["deleted"]])
    results = []
    for why in invalid:
        if why is not None:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": why, "matching_acls": []})
            continue
        acls = next(deleted)
        for acl in acls:
            log.info("acl deleted %s by principal=%s host=%s", acl, request.principal, request.client_host.lstrip("/"))
        results.append({"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, "resource_type": acl.resource_type,
             "resource_name": acl.resource_name, "pattern_type": acl.pattern_type, "principal": acl.principal,
             "host": acl.host, "operation": acl.operation, "permission_type": acl.permission} for acl in acls]})
    return build_response(KEY, request.version, {"filter_results": results})


def _failed(version: int, errors: list[tuple[ErrorCode, str | None]]):
    return build_response(KEY, version, {"filter_results": [
        {"error_code": e, "error_message": m, "matching_acls": []} for e, m in errors]})
