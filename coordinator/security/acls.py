"""Kafka's ACL model and the StandardAuthorizer's decision (spec security §5.1–5.2, §5.5): bindings,
the filters of DescribeAcls/DeleteAcls, super users and `allow.everyone.if.no.acl.found`. Pure: the
API layer asks, storage/acls.py keeps the bindings on disk."""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
from enum import IntEnum
from typing import Iterable


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD = "*"  # a LITERAL name matching every resource of its type; also the any-host value
ANY_PRINCIPAL = "User:*"

# An ALLOW of one of these operations also allows DESCRIBE (resp. DESCRIBE_CONFIGS); DENY never implies.
_IMPLIED_BY = {AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                                 AclOperation.DELETE, AclOperation.ALTER, AclOperation.ALL}),
               AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                                                         AclOperation.ALL})}


@dataclasses.dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType  # LITERAL or PREFIXED
    principal: str  # "User:alice", or "User:*"
    host: str  # an IP address, or "*"
    operation: AclOperation
    permission: AclPermission  # ALLOW or DENY

    def __str__(self) -> str:  # for log lines: `GROUP:LITERAL:orders User:alice host=* READ ALLOW`
        return (f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name} {self.principal} "
                f"host={self.host} {self.operation.name} {self.permission.name}")

    @classmethod
    def of(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
           operation: int, permission: int) -> AclBinding:
        """A binding from the wire's codes; ValueError with Kafka's reason when CreateAcls must refuse
        it with INVALID_REQUEST (AclControlManager.validateNewAcl; the host is not checked)."""
        if not _known(ResourceType, resource_type) or resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise ValueError(f"Invalid resourceType {resource_type}")
        if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"Invalid patternType {pattern_type}")
        if not _known(AclOperation, operation) or operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise ValueError(f"Invalid operation {operation}")
        if permission not in (AclPermission.ALLOW, AclPermission.DENY):
            raise ValueError(f"Invalid permissionType {permission}")
        if not resource_name:
            raise ValueError("Resource name should not be empty")
        if resource_type == ResourceType.CLUSTER and resource_name != CLUSTER_NAME:
            raise ValueError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if ":" not in principal:
            raise ValueError(f"Could not parse principal from `{principal}` (no colon is present separating "
                             "the principal type from the principal name)")
        return cls(ResourceType(resource_type), resource_name, PatternType(pattern_type), principal, host,
                   AclOperation(operation), AclPermission(permission))


def _known(enum: type[IntEnum], value: int) -> bool:
    return value in enum._value2member_map_


@dataclasses.dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' filter and each of DeleteAcls' (spec §5.5): None fields match anything."""
    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission: int = AclPermission.ANY

    def invalid(self) -> str | None:
        for value, enum, name in ((self.resource_type, ResourceType, "resourceType"),
                                  (self.pattern_type, PatternType, "patternType"),
                                  (self.operation, AclOperation, "operation"),
                                  (self.permission, AclPermission, "permissionType")):
            if not _known(enum, value) or value == 0:
                return f"Invalid {name} {value}"
        return None

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == AclOperation.ANY or self.operation == acl.operation)
                and (self.permission == AclPermission.ANY or self.permission == acl.permission))

    def _matches_pattern(self, acl: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            return name is None or _pattern_applies(acl.pattern_type, acl.resource_name, name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != acl.pattern_type:
            return False
        return name is None or name == acl.resource_name


def _pattern_applies(pattern_type: PatternType, pattern: str, name: str) -> bool:
    if pattern_type == PatternType.LITERAL:
        return pattern == name or pattern == WILDCARD
    return name.startswith(pattern)


@functools.lru_cache(maxsize=4096)  # one parse per client address, not per check
def _host_key(host: str) -> object:
    """Hosts compare as addresses, so `::1` and Java's `0:0:0:0:0:0:0:1` are one host."""
    try:
        return ipaddress.ip_address(host.lstrip("/"))
    except ValueError:
        return host


class Authorizer:
    """The bindings and the decision for one (principal, host, operation, resource): super users
    first, then DENY over ALLOW, then `allow.everyone.if.no.acl.found` when no binding names the
    resource at all."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[AclBinding, object] = {}  # binding → its host as an address (insertion ordered)
        # (resource type, pattern type) → name → bindings: LITERAL looks up two names, PREFIXED walks prefixes
        self._index: dict[tuple[ResourceType, PatternType], dict[str, list[AclBinding]]] = {}
        for acl in acls:
            self.add(acl)

    def __len__(self) -> int:
        return len(self._acls)

    def __iter__(self):
        return iter(self._acls)

    def __contains__(self, acl: AclBinding) -> bool:
        return acl in self._acls

    def add(self, acl: AclBinding) -> bool:
        """Add a binding; False when it already exists (creating it again changes nothing)."""
        if acl in self._acls:
            return False
        self._acls[acl] = None if acl.host == WILDCARD else _host_key(acl.host)
        self._index.setdefault((acl.resource_type, acl.pattern_type), {}).setdefault(acl.resource_name, []).append(acl)
        return True

    def remove(self, acl: AclBinding) -> None:
        del self._acls[acl]
        by_name = self._index[(acl.resource_type, acl.pattern_type)]
        by_name[acl.resource_name].remove(acl)
        if not by_name[acl.resource_name]:
            del by_name[acl.resource_name]

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self._acls if acl_filter.matches(acl)]

    def _bindings_for(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern covers the resource (spec §5.2 step 2)."""
        out: list[AclBinding] = []
        literal = self._index.get((resource_type, PatternType.LITERAL))
        if literal:
            out += literal.get(name, ())
            if name != WILDCARD:
                out += literal.get(WILDCARD, ())
        prefixed = self._index.get((resource_type, PatternType.PREFIXED))
        if prefixed:
            if len(prefixed) < len(name):
                out += [acl for prefix, acls in prefixed.items() if name.startswith(prefix) for acl in acls]
            else:
                for end in range(1, len(name) + 1):
                    out += prefixed.get(name[:end], ())
        return out

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        bindings = self._bindings_for(resource_type, name)
        if not bindings:
            return self.allow_everyone_if_no_acl_found
        client = None
        allowed = False
        implied = _IMPLIED_BY.get(operation)
        for acl in bindings:
            if acl.principal != principal and acl.principal != ANY_PRINCIPAL:
                continue
            acl_host = self._acls[acl]
            if acl_host is not None:
                if client is None:
                    client = _host_key(host)
                if acl_host != client:
                    continue
            if acl.permission == AclPermission.DENY:
                if acl.operation == operation or acl.operation == AclOperation.ALL:
                    return False
            elif not allowed:
                allowed = (acl.operation == operation or acl.operation == AclOperation.ALL
                           or (implied is not None and acl.operation in implied))
        return allowed


    def may_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` on *some* resource of the type (Kafka's
        authorizeByResourceType, spec §5.3): an ALLOW pattern that no DENY pattern covers."""
        # a name no ACL can name: honours super users, LITERAL `*` and allow.everyone.if.no.acl.found
        if self.authorize(principal, host, operation, resource_type, "\0"):
            return True
        client = _host_key(host)
        allows, denies = [], []
        for acl, acl_host in self._acls.items():
            if (acl.resource_type == resource_type and acl.principal in (principal, ANY_PRINCIPAL)
                    and acl.operation in (operation, AclOperation.ALL) and acl_host in (None, client)):
                (denies if acl.permission == AclPermission.DENY else allows).append(acl)
        if any(d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD for d in denies):
            return False

        def cancelled(allow: AclBinding) -> bool:
            return any(d.resource_name == allow.resource_name if d.pattern_type == PatternType.LITERAL
                       else allow.resource_name.startswith(d.resource_name) for d in denies
                       if d.pattern_type == PatternType.PREFIXED or allow.pattern_type == PatternType.LITERAL)

        return any(not cancelled(a) for a in allows)
