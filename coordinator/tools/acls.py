"""`groupd acls list|add|remove`: a running groupd's ACLs through DescribeAcls, CreateAcls and
DeleteAcls (Kafka's `kafka-acls.sh`, smaller). The connection's principal is `User:ANONYMOUS` on a
PLAINTEXT listener; on a SASL or TLS one it is the user of `--command-config` (or its certificate's),
which must be allowed on the cluster (or be a super user)."""

from __future__ import annotations

import argparse
from typing import Any

from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, AclPermission, PatternType, ResourceType
from groupd.protocol.apis import ApiKey

from .client import AdminConnection, check
from .commands import common, report
from .render import table

ACLS_V = 3
RESOURCES = {"group": ResourceType.GROUP, "topic": ResourceType.TOPIC,
             "transactional_id": ResourceType.TRANSACTIONAL_ID}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    acls = sub.add_parser("acls", help="list, add and remove ACLs of a running groupd")
    acls_sub = acls.add_subparsers(dest="acls_command", required=True)
    listing = acls_sub.add_parser("list", help="ACLs, all or those matching the options (DescribeAcls)")
    add = acls_sub.add_parser("add", help="create ACLs: one per --operation (CreateAcls)")
    remove = acls_sub.add_parser("remove", help="delete the ACLs matching the options (DeleteAcls)")
    for sp, adding in ((listing, False), (add, True), (remove, False)):
        where = sp.add_mutually_exclusive_group(required=adding)
        where.add_argument("--group", metavar="NAME")
        where.add_argument("--topic", metavar="NAME")
        where.add_argument("--transactional-id", metavar="ID")
        where.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
        sp.add_argument("--prefixed", action="store_true", help="a PREFIXED pattern (default: LITERAL)")
        sp.add_argument("--principal", required=adding, metavar="TYPE:NAME", help="e.g. User:alice, User:*")
        sp.add_argument("--host", default="*" if adding else None, help="an IP address, or * (the default)"
                        if adding else "only ACLs for this host")
        sp.add_argument("--operation", action="append", required=adding, type=_operation,
                        metavar="OP", help="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL, ... (repeatable)")
        permission = sp.add_mutually_exclusive_group()
        permission.add_argument("--allow", action="store_const", dest="permission", const=AclPermission.ALLOW)
        permission.add_argument("--deny", action="store_const", dest="permission", const=AclPermission.DENY)
        common(sp)


def _operation(text: str) -> AclOperation:
    try:
        return AclOperation[text.strip().upper().replace("-", "_")]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ACL operation") from None


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    for option, resource_type in RESOURCES.items():
        if getattr(args, option) is not None:
            return resource_type, getattr(args, option)
    return ResourceType.ANY, None


def _filters(args: argparse.Namespace) -> list[dict]:
    resource_type, name = _resource(args)
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL if name is not None else PatternType.ANY
    return [{"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
             "principal_filter": args.principal, "host_filter": args.host, "operation": op,
             "permission_type": args.permission or AclPermission.ANY}
            for op in args.operation or [AclOperation.ANY]]


def _row(resource_type: int, name: str, pattern: int, principal: str, host: str, operation: int,
         permission: int) -> dict[str, Any]:
    return {"resource_type": ResourceType(resource_type).name, "name": name, "pattern": PatternType(pattern).name,
            "principal": principal, "host": host, "operation": AclOperation(operation).name,
            "permission": AclPermission(permission).name}


def _text(rows: list[dict], what: str) -> str:
    if not rows:
        return f"no ACLs {what}"
    return table(["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
                 [list(r.values()) for r in rows]) + f"\n{len(rows)} ACL{'s' if len(rows) != 1 else ''} {what}"


def list_acls(conn: AdminConnection, args: argparse.Namespace) -> list[dict]:
    out = []
    for f in _filters(args):
        r = conn.request(ApiKey.DESCRIBE_ACLS, ACLS_V, f)
        check(r.error_code, "DescribeAcls", r.error_message)
        out += [_row(res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host, a.operation,
                     a.permission_type) for res in r.resources for a in res.acls]
    return out


def add_acls(conn: AdminConnection, args: argparse.Namespace) -> list[dict]:
    resource_type, name = _resource(args)
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
    creations = [{"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
                  "principal": args.principal, "host": args.host, "operation": op,
                  "permission_type": args.permission or AclPermission.ALLOW} for op in args.operation]
    r = conn.request(ApiKey.CREATE_ACLS, ACLS_V, {"creations": creations})
    for result in r.results:
        check(result.error_code, "CreateAcls", result.error_message)
    return [_row(c["resource_type"], name, pattern, args.principal, args.host, c["operation"], c["permission_type"])
            for c in creations]


def remove_acls(conn: AdminConnection, args: argparse.Namespace) -> list[dict]:
    r = conn.request(ApiKey.DELETE_ACLS, ACLS_V, {"filters": _filters(args)})
    out = []
    for result in r.filter_results:
        check(result.error_code, "DeleteAcls", result.error_message)
        out += [_row(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                     m.permission_type) for m in result.matching_acls]
    return out


COMMANDS = {"list": (list_acls, "found"), "add": (add_acls, "created"), "remove": (remove_acls, "deleted")}


def run(args: argparse.Namespace) -> int:
    command, what = COMMANDS[args.acls_command]

    def work(bootstrap: str, security) -> tuple[int, list[dict], str]:
        with AdminConnection(bootstrap, timeout=args.timeout, security=security) as conn:
            rows = command(conn, args)
        return 0, rows, _text(rows, what)

    return report(args, work)
