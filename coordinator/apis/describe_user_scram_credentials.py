"""DescribeUserScramCredentials (50), v0 (flexible; the only version).

Per user: the mechanisms and iteration counts of its SCRAM credentials, never a salt or key. Null
or empty Users = every user with a credential; a name listed twice gets DUPLICATE_RESOURCE, one
without credentials RESOURCE_NOT_FOUND. Needs DESCRIBE on the cluster: else a top-level
CLUSTER_AUTHORIZATION_FAILED and one such result per requested user (with an empty User, as Kafka).
"""

from __future__ import annotations

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .request import Request

KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)


def handle(node, request: Request):
    names = [u.name for u in request.body.users or ()]
    if not authorized(node, request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        denied = ErrorCode.cluster_authorization_failed
        return _response(denied, [{"user": "", "error_code": denied, "error_message": None, "credential_infos": []}
                                  for _ in names])
    return _response(ErrorCode.none, [
        {"user": result.user, "error_code": result.error, "error_message": result.message,
         "credential_infos": [{"mechanism": m, "iterations": i} for m, i in infos]}
        for result, infos in node.scram_users.describe(names)])


def _response(error: ErrorCode, results: list[dict]):
    return build_response(KEY, 0, {"error_code": error, "error_message": None,
                                   "results": results})
