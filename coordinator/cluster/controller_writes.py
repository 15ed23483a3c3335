"""The writes only the controller makes to the shared data dir (ACLs, SCRAM credentials, group
configs, topic configs, streams groups' internal topics), each an operation of plain JSON values: the
controller applies it (the write runs off its event loop, coordinator/security/authorizer.py and the
like), another worker hands it to the controller through its supervisor and answers once the
controller did (Kafka's brokers forward these requests to their controller the same way). Either way
the API gets a future of the result, a dict: `failed` (the file could not be written), `timed_out`
(etcd did not answer: the change may have been made), `unavailable` (no controller answered), or the
operation's own."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from types import SimpleNamespace
from typing import Any, Awaitable, Callable

from groupd.coordinator.core import topic_configs
from groupd.coordinator.core.group_config import ConfigError
from groupd.coordinator.security.acls import AclFilter
from groupd.coordinator.security.authorizer import acl_binding, acl_row
from groupd.protocol import ErrorCode
from groupd.storage.files import DataDirError, DocumentUnavailable

UNAVAILABLE = {"unavailable": True}
TIMED_OUT = "The change was not confirmed in time (etcd did not answer); it may or may not have been made."


async def create_acls(node, args: dict) -> dict:
    await node.access.create([acl_binding(row) for row in args["acls"]])
    return {}


async def delete_acls(node, args: dict) -> dict:
    matched = await node.access.delete(AclFilter(**f) for f in args["filters"])
    return {"deleted": [[acl_row(b) for b in bindings] for bindings in matched]}


async def alter_scram(node, args: dict) -> dict:
    results = await node.scram_users.alter(
        [SimpleNamespace(**d) for d in args["deletions"]],
        [SimpleNamespace(**{**u, "salt": base64.b64decode(u["salt"]),
                            "salted_password": base64.b64decode(u["salted_password"])}) for u in args["upsertions"]])
    return {"results": [[r.user, int(r.error), r.message] for r in results]}


async def set_group_configs(node, args: dict) -> dict:
    await node.set_group_configs(args["group"], args["configs"])
    return {}


async def set_topic_configs(node, args: dict) -> dict:
    """A topic's config changes (IncrementalAlterConfigs' operations, or AlterConfigs' whole set) applied
    to its overrides as they are when written, and checked: `configs` (the new overrides), `refused`
    ([error code, message]), or `missing` when the topic is gone by now."""
    try:
        topic = await node.catalog.reconfigure(args["topic"], lambda current: topic_configs.checked(
            topic_configs.altered(current, args["changes"], args["incremental"]), node.settings))
    except ConfigError as e:
        return {"refused": [int(e.error_code), str(e)]}
    return {"configs": dict(topic.configs)} if topic else {"missing": True}


async def create_internal_topic(node, args: dict) -> dict:
    """A streams group's internal topic (coordinator/apis/streams_topics.py), with the partitions and
    configs its topology asks for: `created` (its partitions), or `exists` when it is there by now."""
    topic = await node.catalog.add(args["name"], args["partitions"], args["configs"])
    return {"exists": True} if topic is None else {"created": topic.partitions}


OPERATIONS: dict[str, Callable[[Any, dict], Awaitable[dict]]] = {
    "create_acls": create_acls, "delete_acls": delete_acls, "alter_scram": alter_scram,
    "set_group_configs": set_group_configs, "set_topic_configs": set_topic_configs,
    "create_internal_topic": create_internal_topic}


async def apply(node, op: str, args: dict) -> dict:
    """Run `op` here, on the controller; its result once written, or why it was not. A failed write
    changed nothing here."""
    try:
        return await OPERATIONS[op](node, args)
    except DocumentUnavailable as e:
        return {"timed_out": str(e)}
    except OSError as e:
        return {"failed": e.strerror or str(e)}
    except DataDirError as e:  # other nodes kept changing the document (cluster mode)
        return {"failed": str(e)}


def write(node, op: str, args: dict) -> asyncio.Future:
    """A future of the result of `op`: written here on the controller, else the controller's answer."""
    if node.controller is None:
        return node.spawn(apply(node, op, args))
    return node.controller.call(op, args)


def refusal(done: dict, not_stored: str) -> tuple[ErrorCode, str | None] | None:
    """The error a write's result answers with: UNKNOWN_SERVER_ERROR and `not_stored` when it could not
    be written, REQUEST_TIMED_OUT when etcd did not answer in time (as Kafka answers when its controller
    cannot commit in time: the change may or may not have been made), NOT_CONTROLLER (which clients
    retry) when no controller answered; None when done."""
    if "failed" in done:
        return ErrorCode.unknown_server_error, not_stored
    if "timed_out" in done:
        return ErrorCode.request_timed_out, TIMED_OUT
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
