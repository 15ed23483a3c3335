"""`groupd chaos ...`: fault injection against a running groupd through its admin endpoint
(`admin.listener`; `--admin URL`, or the GROUPD_ADMIN_LISTENER environment variable)."""

from __future__ import annotations

import argparse
import os
import sys

from groupd.coordinator.settings import ConfigError

from . import client_config
from .chaos_client import ChaosClient, ChaosError, duration_ms
from .commands import command_config_argument


def add_parser(sub) -> None:
    chaos = sub.add_parser("chaos", help="inject faults into a running groupd (needs admin.listener)")
    ops = chaos.add_subparsers(dest="chaos_command", required=True)

    def op(name: str, help: str) -> argparse.ArgumentParser:
        p = ops.add_parser(name, help=help)
        p.add_argument("--admin", metavar="URL", default=os.environ.get("GROUPD_ADMIN_LISTENER"),
                       help="the admin endpoint, e.g. http://127.0.0.1:9465 (default: $GROUPD_ADMIN_LISTENER)")
        command_config_argument(p)  # a groupd with sasl.users wants one of them: the properties' user
        p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                       help="a Kafka client property (sasl.username, sasl.password, sasl.jaas.config, ...)")
        return p

    def bounded(p: argparse.ArgumentParser) -> None:
        p.add_argument("--group", help="only requests of this group (default: every group)")
        bound = p.add_mutually_exclusive_group(required=True)
        bound.add_argument("--count", type=int, help="this many requests")
        bound.add_argument("--for", dest="duration", metavar="DURATION", help="this long (500ms, 10s, 2m)")

    op("rebalance", "a new generation (classic) or group epoch (consumer) now").add_argument("--group", required=True)
    expire = op("expire", "remove members as if their sessions expired")
    expire.add_argument("--group", required=True)
    who = expire.add_mutually_exclusive_group(required=True)
    who.add_argument("--member", action="append", help="a member id (repeatable)")
    who.add_argument("--all", action="store_true", help="every member")
    error = op("error", "answer an API with Kafka's error instead of handling it")
    error.add_argument("--api", required=True, help="Kafka's API name: Heartbeat, SyncGroup, JoinGroup, ...")
    error.add_argument("--code", required=True, help="Kafka's error name, e.g. REBALANCE_IN_PROGRESS")
    bounded(error)
    delay = op("delay", "hold an API's requests back before handling them")
    delay.add_argument("--api", required=True)
    delay.add_argument("--ms", type=int, required=True)
    bounded(delay)
    move = op("move-coordinator", "NOT_COORDINATOR for the group's requests for a while, as a failover looks")
    move.add_argument("--group", required=True)
    move.add_argument("--for", dest="duration", metavar="DURATION", required=True)
    op("drop-connections", "close client connections").add_argument("--client-id", help="only this client.id's")
    op("list", "the armed faults")
    op("clear", "disarm every fault")


def run(args) -> int:
    if not args.admin:
        print("groupd: chaos needs --admin URL (or GROUPD_ADMIN_LISTENER)", file=sys.stderr)
        return 2
    try:
        security, others = client_config.load(args.command_config, args.set)
        if others:
            raise ConfigError(f"--set {others[0]}: not a Kafka client property (chaos reads no groupd settings)")
    except ConfigError as e:
        print(f"groupd: configuration error: {e}", file=sys.stderr)
        return 2
    client = ChaosClient(args.admin, credentials=security.credentials())
    try:
        print(_call(client, args))
    except ChaosError as e:
        print(f"groupd: {e}", file=sys.stderr)
        return 1
    return 0


def _call(client: ChaosClient, args) -> str:
    command = args.chaos_command
    bound = {}
    if command in ("error", "delay"):
        bound = {"count": args.count, "for_ms": duration_ms(args.duration) if args.duration else None}
    if command == "rebalance":
        client.rebalance(args.group)
        return f"rebalance started for group {args.group}"
    if command == "expire":
        client.expire(args.group, None if args.all else args.member)
        return f"expired {'every member' if args.all else ', '.join(args.member)} of group {args.group}"
    if command == "error":
        return _fault(client.error(args.api, args.code, args.group, **bound))
    if command == "delay":
        return _fault(client.delay(args.api, args.ms, args.group, **bound))
    if command == "move-coordinator":
        return _fault(client.move_coordinator(args.group, duration_ms(args.duration)))
    if command == "drop-connections":
        return f"dropped {client.drop_connections(args.client_id)} connection(s)"
    if command == "clear":
        return f"cleared {client.clear()} fault(s)"
    faults = client.faults()
    return "\n".join(_fault(f) for f in faults) if faults else "no faults armed"


def _fault(f: dict) -> str:
    left = (f"{f['remaining']} request(s) left" if f["remaining"] is not None
            else f"{f['expires_in_ms']} ms left")
    what = f"error={f['error']}" if f["error"] else f"delay_ms={f['delay_ms']}"
    return f"#{f['id']} {f['kind']} apis={','.join(f['apis'])} group={f['group'] or '*'} {what} hits={f['hits']} {left}"
