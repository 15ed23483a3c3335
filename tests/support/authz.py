"""Servers with the ACL authorizer on, and clients on their PLAINTEXT listener, so `User:ANONYMOUS`
(host 127.0.0.1). Users who log in with SASL: tests/security/test_acls_principals.py."""

from __future__ import annotations

from typing import Any

from groupd.protocol.apis import ApiKey

from .process import GroupdProcess, WireClient

ANONYMOUS = "User:ANONYMOUS"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# codes (spec security §5.1)
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, IDEMPOTENT_WRITE = 2, 3, 4, 5, 6, 7, 8, 12
DESCRIBE_CONFIGS, ALTER_CONFIGS = 10, 11
DENY, ALLOW = 2, 3


def authorizer_settings(*, super_users: tuple[str, ...] = (), allow_everyone: bool = False) -> list[str]:
    return [f"authorizer.class.name={STANDARD_AUTHORIZER}", f"super.users={';'.join(super_users)}",
            f"allow.everyone.if.no.acl.found={str(allow_everyone).lower()}"]


def start_secured(data_dir: str, *settings: str, super_users: tuple[str, ...] = (), allow_everyone: bool = False,
                  port: int | None = None) -> GroupdProcess:
    """`groupd serve` with the authorizer on, plus `settings`."""
    return GroupdProcess(data_dir, *authorizer_settings(super_users=super_users, allow_everyone=allow_everyone),
                         *settings, port=port).start()


def _plaintext_only(principal: str) -> None:
    if principal != ANONYMOUS:
        raise NotImplementedError(f"{principal} needs a SASL listener: see tests/security/test_acls_principals.py")


def client_config(bootstrap: str, principal: str = ANONYMOUS) -> dict[str, Any]:
    """librdkafka settings for a client that authenticates as `principal`."""
    _plaintext_only(principal)
    return {"bootstrap.servers": bootstrap}


def connect(bootstrap: str, principal: str = ANONYMOUS) -> WireClient:
    """A wire client that authenticates as `principal`."""
    _plaintext_only(principal)
    return WireClient(bootstrap)


def acl(resource_type: int, name: str, operation: int, permission: int = ALLOW, pattern: int = LITERAL,
        principal: str = ANONYMOUS, host: str = "*") -> dict:
    """One CreateAcls creation."""
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": operation, "permission_type": permission}


def create_acls(bootstrap: str, *creations: dict, version: int = 3, principal: str = ANONYMOUS) -> list:
    with connect(bootstrap, principal) as c:
        r = c.request(ApiKey.CREATE_ACLS, version, {"creations": list(creations)})
    return [res.error_code for res in r.results]
