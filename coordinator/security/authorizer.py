"""The node's ACL authorizer in the shell: its bindings loaded from and written to the data dir
(off the event loop, one change at a time) before a change is visible, and every denial counted (by
API and resource type) and logged at most once per interval per kind. The API modules call
`authorized` before the core sees a request."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Iterable

from groupd.coordinator.observability import metrics
from groupd.coordinator.observability.log_limit import LimitedLog
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage.acls import AclFile
from groupd.storage.files import DataDirError, save_change

from .acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    Authorizer,
    PatternType,
    ResourceType,
)

if TYPE_CHECKING:
    from groupd.coordinator.apis.request import Request
    from groupd.coordinator.settings import Settings

log = logging.getLogger("groupd.authorizer")

_denial_logs: dict[tuple[int, ResourceType, AclOperation], LimitedLog] = {}


def tick_denial_logs() -> None:
    for limited in _denial_logs.values():
        limited.tick()


class Access:
    """The authorizer of a node whose `authorizer.class.name` is set, and its ACL file."""

    def __init__(self, settings: Settings, store=None) -> None:
        self._settings = settings
        # cluster mode: the ACLs in etcd (coordinator/cluster/etcd/files.py)
        self._file = store or AclFile(settings.data_dir)
        self._writing = asyncio.Lock()  # one change at a time: each computes from the last one saved
        self.reload()

    def reload(self) -> None:
        """Read the ACLs again: at start, and on a worker when the controller worker rewrote the file."""
        self.follow(self._file.load())

    def follow(self, rows: list[dict[str, str]]) -> None:
        """The bindings as stored now: at start, and in cluster mode when another node changed them."""
        self.authorizer = Authorizer(self._settings.super_users, self._settings.allow_everyone_if_no_acl_found,
                                     (acl_binding(row) for row in rows))

    async def create(self, bindings: Iterable[AclBinding]) -> None:
        """Add the bindings (existing ones change nothing); written (off the loop) before they apply.
        OSError or DataDirError leaves the authorizer as it was."""
        bindings = list(dict.fromkeys(bindings))

        def rows():
            new = [b for b in bindings if b not in self.authorizer]
            return [acl_row(b) for b in [*self.authorizer, *new]] if new else None
        async with self._writing:
            if await save_change(self._file.write, rows, self.follow) is not None:
                for b in bindings:
                    self.authorizer.add(b)

    async def delete(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removes (a binding matched by several filters is listed under
        each, as Kafka does); written (off the loop) before they go. OSError or DataDirError leaves
        everything as it was."""
        filters, matched = list(filters), []

        def rows():
            matched[:] = [self.authorizer.matching(f) for f in filters]
            gone = {b for m in matched for b in m}
            return [acl_row(b) for b in self.authorizer if b not in gone] if gone else None
        async with self._writing:
            if await save_change(self._file.write, rows, self.follow) is not None:
                for b in {b for m in matched for b in m}:
                    self.authorizer.remove(b)
        return matched


def authorized(node, request: Request, operation: AclOperation, resource_type: ResourceType, name: str,
               audit: bool = True) -> bool:
    """Whether the request's principal may do `operation` on the resource; always with the
    authorizer off. `audit=False` for checks whose denial only filters (Kafka logs those at DEBUG)."""
    access = node.access
    if access is None:
        return True
    if access.authorizer.authorize(request.principal, request.client_host, operation, resource_type, name):
        return True
    if audit:
        denied(request, operation, resource_type, name)
    return False


def denied(request: Request, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    api = request.header.api_key
    metrics.authorization_denied(api, resource_type.name)
    kind = (api, resource_type, operation)
    limited = _denial_logs.get(kind)
    if limited is None:
        limited = _denial_logs[kind] = LimitedLog(log, f"authorization-denied {ApiKey(api).name} "
                                                  f"{resource_type.name} {operation.name}", per_interval=1)
    limited.log(logging.INFO, "authorization denied principal=%s host=%s operation=%s resource=%s:%s api=%s "
                "client=%s", request.principal, request.client_host.lstrip("/"), operation.name,
                resource_type.name, name, ApiKey(api).name, request.header.client_id)


def acl_row(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.resource_type.name, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission": b.permission.name}


def acl_binding(row: dict[str, str]) -> AclBinding:
    try:
        return AclBinding.of(ResourceType[row["resource_type"]], row["resource_name"],
                             PatternType[row["pattern_type"]], row["principal"], row["host"],
                             AclOperation[row["operation"]], AclPermission[row["permission"]])
    except (KeyError, ValueError) as e:
        raise DataDirError(f"the ACL file holds an invalid ACL {row!r}: {e}") from None


O = AclOperation
# the operations each resource type supports (spec security §5.1), reported by KIP-430's fields
OPERATIONS = {
    ResourceType.TOPIC: (O.READ, O.WRITE, O.CREATE, O.DELETE, O.ALTER, O.DESCRIBE, O.DESCRIBE_CONFIGS,
                         O.ALTER_CONFIGS),
    ResourceType.GROUP: (O.READ, O.DESCRIBE, O.DELETE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE,
                           O.ALTER, O.DESCRIBE),
}


def authorized_operations(node, request: Request, resource_type: ResourceType, name: str) -> int:
    """KIP-430's bit set: `1 << op` for each operation of the resource type the principal may do
    (everything without an authorizer: topic 3576, group 3400, cluster 8096). Probes: never logged."""
    return sum(1 << op for op in OPERATIONS[resource_type]
               if authorized(node, request, op, resource_type, name, audit=False))


# A config resource (DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: TOPIC 2, BROKER 4,
# GROUP 32) → the ACL resource it is checked on and the error a denial answers, as Kafka's
# ConfigAdminManager: a broker's configs are the cluster's.
_CONFIG_RESOURCES = {2: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed),
                     4: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
                     32: (ResourceType.GROUP, ErrorCode.group_authorization_failed)}


def config_resource_denied(node, request: Request, operation: AclOperation, config_type: int, name: str):
    """The ErrorCode a config request on (config_type, name) answers when the principal may not do
    `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on it; None when it may (or the type is unknown:
    the API answers that itself)."""
    checked = _CONFIG_RESOURCES.get(config_type)
    if checked is None:
        return None
    resource_type, error = checked
    resource = CLUSTER_NAME if resource_type is ResourceType.CLUSTER else name
    return None if authorized(node, request, operation, resource_type, resource) else error
