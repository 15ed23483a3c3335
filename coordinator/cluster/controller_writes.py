"""The writes only the controller makes to the shared data dir (ACLs, SCRAM credentials, group
configs, topic configs), each an operation of plain JSON values: the controller applies it at once, another worker
hands it to the controller through its supervisor and answers once the controller did (Kafka's
brokers forward these requests to their controller the same way). The result is a dict: `failed`
(the file could not be written), `unavailable` (no controller answered), or the operation's own."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from types import SimpleNamespace
from typing import Any, Callable

from groupd.protocol import ErrorCode
from groupd.storage.files import DataDirError

from groupd.coordinator.security.authorizer import acl_binding, acl_row
from groupd.coordinator.security.acls import AclFilter

UNAVAILABLE = {"unavailable": True}


def create_acls(node, args: dict) -> dict:
    node.access.create([acl_binding(row) for row in args["acls"]])
    return {}


def delete_acls(node, args: dict) -> dict:
    matched = node.access.delete(AclFilter(**f) for f in args["filters"])
    return {"deleted": [[acl_row(b) for b in bindings] for bindings in matched]}


def alter_scram(node, args: dict) -> dict:
    results = node.scram_users.alter(
        [SimpleNamespace(**d) for d in args["deletions"]],
        [SimpleNamespace(**{**u, "salt": base64.b64decode(u["salt"]),
                            "salted_password": base64.b64decode(u["salted_password"])}) for u in args["upsertions"]])
    return {"results": [[r.user, int(r.error), r.message] for r in results]}


def set_group_configs(node, args: dict) -> dict:
    node.set_group_configs(args["group"], args["configs"])
    return {}


def set_topic_configs(node, args: dict) -> dict:
    """A topic's config overrides (the catalog); `missing` when the topic is gone by now."""
    try:
        return {} if node.set_topic_configs(args["topic"], args["configs"]) else {"missing": True}
    except DataDirError as e:  # cluster mode: etcd's catalog kept changing under the swap
        return {"failed": str(e)}


OPERATIONS: dict[str, Callable[[Any, dict], dict]] = {
    "create_acls": create_acls, "delete_acls": delete_acls, "alter_scram": alter_scram,
    "set_group_configs": set_group_configs, "set_topic_configs": set_topic_configs}


def apply(node, op: str, args: dict) -> dict:
    """Run `op` here, on the controller."""
    try:
        return OPERATIONS[op](node, args)
    except OSError as e:
        return {"failed": e.strerror or str(e)}


def write(node, op: str, args: dict) -> dict | asyncio.Future:
    """The result of `op`: now on the controller, else a future of the controller's answer."""
    if node.controller is None:
        return apply(node, op, args)
    return node.controller.call(op, args)


def refusal(done: dict, not_stored: str) -> tuple[ErrorCode, str | None] | None:
    """The error a write's result answers with: UNKNOWN_SERVER_ERROR and `not_stored` when the file could
    not be written, NOT_CONTROLLER (which clients retry) when no controller answered; None when done."""
    if "failed" in done:
        return ErrorCode.unknown_server_error, not_stored
    if "unavailable" in done:
        return ErrorCode.not_controller, None
    return None


def acl_filter_args(f: AclFilter) -> dict:
    return dataclasses.asdict(f)


def scram_args(deletions, upsertions) -> dict:
    """AlterUserScramCredentials' changes as plain values (the salts and salted passwords base64)."""
    return {"deletions": [{"name": d.name, "mechanism": d.mechanism} for d in deletions],
            "upsertions": [{"name": u.name, "mechanism": u.mechanism, "iterations": u.iterations,
                            "salt": base64.b64encode(u.salt).decode(),
                            "salted_password": base64.b64encode(u.salted_password).decode()} for u in upsertions]}
