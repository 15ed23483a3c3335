"""AlterUserScramCredentials (51), v0 (flexible; the only version).

Deletions by (user, mechanism) and upsertions carrying the salt and SaltedPassword the admin client
computed (the server derives StoredKey and ServerKey and keeps only those). One result per user, as
coordinator/security/scram_users.py validates them; valid changes are stored in the data dir and apply to the
next SCRAM login on every listener. Needs ALTER on the cluster: else every user named gets
CLUSTER_AUTHORIZATION_FAILED (sorted by name, as Kafka).
"""

from __future__ import annotations

import logging

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.coordinator.security.scram_users import Result
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request, respond

KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)

log = logging.getLogger("groupd.security")


def handle(node, request: Request):
    body = request.body
    if not authorized(node, request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        names = sorted({e.name for e in (*body.deletions, *body.upsertions)})
        return _response([Result(n, ErrorCode.cluster_authorization_failed, None) for n in names])
    # the controller writes the credential file (on another worker: the controller's answer, later)
    written = controller_writes.write(node, "alter_scram", controller_writes.scram_args(body.deletions, body.upsertions))
    return respond(written, lambda done: _altered(request, done))


def _altered(request: Request, done: dict):
    refusal = controller_writes.refusal(done, "The credentials could not be stored.")
    if refusal is not None:
        if "failed" in done or "timed_out" in done:
            log.error("SCRAM credentials not altered: cannot write the credential file: %s",
                      done.get("failed") or done["timed_out"])
        body = request.body
        names = dict.fromkeys(e.name for e in (*body.deletions, *body.upsertions))
        return _response([Result(n, *refusal) for n in names])
    results = [Result(user, ErrorCode(error), message) for user, error, message in done["results"]]
    changed = [r.user for r in results if r.error is ErrorCode.none]
    if changed:
        log.info("scram credentials altered users=%s by principal=%s host=%s", ",".join(changed), request.principal,
                 request.client_host.lstrip("/"))
    return _response(results)


def _response(results: list[Result]):
    return build_response(KEY, 0, {"results": [
        {"user": r.user, "error_code": r.error, "error_message": r.message} for r in results]})
