"""The command line of `groupd groups|offsets|health`: the parsers, where a command finds groupd
(`--bootstrap`, or the settings `serve` reads), and the run that prints a table or `--json`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupd.coordinator.settings import ConfigError, Settings, add_config_arguments

from . import client_config
from .client import AdminError
from .client_config import ClientConfig
from .groups import (
    SCENARIOS,
    all_group_ids,
    delete_groups,
    delete_offsets,
    describe_groups,
    health,
    list_groups,
    reset_offsets,
)
from .offset_reset import PlanError, to_csv
from .render import describe_text, reset_text, table

COMMANDS = ("groups", "offsets", "health")


def listener_address(settings: Settings, protocol: str = "PLAINTEXT") -> str:
    """host:port of the first listener of groupd's `listeners` with the client's security protocol
    (PLAINTEXT unless --command-config says otherwise; else the first listener), a wildcard host
    meaning loopback: where a command finds the groupd those settings configure."""
    if not settings.listeners:
        raise ConfigError("listeners must name at least one PLAINTEXT://host:port")
    listener = next((l for l in settings.listeners
                     if settings.listener_security_protocol_map.get(l.name) == protocol), settings.listeners[0])
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(listener.host, listener.host)
    return f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"


def resolve_bootstrap(args: argparse.Namespace, env: Mapping[str, str] | None = None,
                      settings_sets: Iterable[str] | None = None, protocol: str = "PLAINTEXT") -> str:
    """`--bootstrap` when given; else the listener of the settings `serve` would read from the
    same sources (--config FILE, GROUPD_* variables, --set), so `groupd health --set
    listeners=PLAINTEXT://:19092` looks where `groupd serve --set listeners=...` listens.
    A bad setting is a ConfigError, as for serve."""
    if args.bootstrap:
        return args.bootstrap
    overrides = list(args.set if settings_sets is None else settings_sets)
    return listener_address(Settings.load(args.config, env=env, overrides=overrides, cross_checks=False), protocol)


STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead",  # classic
          "Assigning", "Reconciling")  # consumer (KIP-848) groups
TYPES = ("classic", "consumer", "share", "streams")


def _choices(allowed: tuple[str, ...], what: str) -> Callable[[str], list[str]]:
    """A comma-separated list of `allowed` names (any case) → Kafka's spelling of each."""
    by_lower = {a.lower(): a for a in allowed}

    def parse(text: str) -> list[str]:
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if s.lower() not in by_lower]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{', '.join(bad) or repr(text)}: not a {what} "
                                             f"(one of {', '.join(allowed)})")
        return [by_lower[s.lower()] for s in items]
    return parse


def common(sp: argparse.ArgumentParser, json_output: bool = True, timeout: float = 10.0) -> None:
    """The options every command that talks to a running groupd takes."""
    sp.add_argument("--bootstrap", "--bootstrap-server", dest="bootstrap", metavar="HOST:PORT", default=None,
                    help="groupd's address (default: the first PLAINTEXT listener in the settings serve "
                         "reads: --config, GROUPD_* variables, --set)")
    add_config_arguments(sp)  # --set: a Kafka client property (below) or a groupd setting (to find groupd)
    command_config_argument(sp)
    sp.add_argument("--timeout", type=float, default=timeout, metavar="SECONDS",
                    help=f"network timeout (default {timeout:g})")
    if json_output:
        sp.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def command_config_argument(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--command-config", metavar="FILE",
                    help="Kafka client properties for a TLS or SASL listener, as Kafka's tools take them "
                         "(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...); "
                         "--set KEY=VALUE gives one too")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `groups`, `offsets` and `health` on groupd's sub-command parser."""
    groups = sub.add_parser("groups", help="list, describe and delete groups of a running groupd")
    groups_sub = groups.add_subparsers(dest="groups_command", required=True)
    listing = groups_sub.add_parser("list", help="every group: id, state, protocol type, type (ListGroups)")
    listing.add_argument("--state", type=_choices(STATES, "group state"), action="extend", default=[],
                         metavar="S[,S...]", help="only groups in one of these states")
    listing.add_argument("--type", type=_choices(TYPES, "group type"), action="extend", default=[],
                         metavar="T[,T...]", help="only groups of one of these types")
    common(listing)
    describe = groups_sub.add_parser("describe", help="groups' state, members, assignments and committed offsets")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("group", nargs="*", default=[])
    which.add_argument("--all-groups", action="store_true", help="every group groupd knows")
    common(describe)
    delete = groups_sub.add_parser("delete", help="delete Empty groups and their offsets (DeleteGroups)")
    delete.add_argument("group", nargs="+")
    common(delete)

    offsets = sub.add_parser("offsets", help="change a group's committed offsets")
    offsets_sub = offsets.add_subparsers(dest="offsets_command", required=True)
    drop = offsets_sub.add_parser("delete", help="delete a group's committed offsets of topics (OffsetDelete)")
    drop.add_argument("group")
    drop.add_argument("--topic", action="append", required=True, metavar="T[:P,...]",
                      help="a topic, or some of its partitions (repeatable)")
    common(drop)
    reset = offsets_sub.add_parser("reset", help="plan new committed offsets and, with --execute, commit them "
                                                 "(only while the group is Empty)")
    reset.add_argument("group")
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", metavar="T[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="each partition's earliest offset (ListOffsets)")
    to.add_argument("--to-latest", action="store_true", help="each partition's log-end offset (ListOffsets)")
    to.add_argument("--to-current", action="store_true",
                    help="the committed offset (the log-end offset where there is none)")
    to.add_argument("--to-offset", type=_non_negative, metavar="N", help="offset N on every partition")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="the committed offset plus N (negative: back), kept within [earliest, latest]")
    to.add_argument("--to-datetime", metavar="ISO8601",
                    help="the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss, local unless a zone)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after this long ago")
    to.add_argument("--from-file", metavar="CSV", help="the offsets of a topic,partition,offset file (--export)")
    run_mode = reset.add_mutually_exclusive_group()
    run_mode.add_argument("--execute", action="store_true", help="commit the plan (default: print it only)")
    run_mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    reset.add_argument("--export", action="store_true", help="print the plan as CSV topic,partition,offset")
    common(reset)

    health_parser = sub.add_parser("health", help="exit 0 if groupd answers ApiVersions within the timeout, else 1")
    health_parser.add_argument("--ready", action="store_true",
                               help="exit 0 only once every offsets partition is loaded (readiness)")
    common(health_parser, json_output=False, timeout=5.0)


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError("an offset is 0 or more")
    return n


def _warn(line: str) -> None:
    print(f"groupd: warning: {line}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run a parsed `groups`, `offsets` or `health` command; the exit status."""
    if args.command == "offsets" and args.offsets_command == "reset" and not (
            args.topic or args.all_topics or args.from_file):  # a usage mistake: 2, as argparse's
        prog = "groupd offsets reset"
        print(f"{prog}: one of the reset scopes is needed: --topic T[:P,...] or --all-topics (see {prog} --help)",
              file=sys.stderr)
        return 2
    if args.command == "health":
        return report(args, lambda bootstrap, security: _health(args, bootstrap, security))
    return report(args, lambda bootstrap, security: _command(args, bootstrap, security))


def _health(args: argparse.Namespace, bootstrap: str, security: ClientConfig) -> tuple[int, Any, str]:
    ok, line = health(bootstrap, args.timeout, args.ready, security)
    return (0 if ok else 1), None, line


def report(args: argparse.Namespace, work: Callable[[str, ClientConfig], tuple[int, Any, str]]) -> int:
    """Find groupd (resolve_bootstrap) and how to connect (--command-config and the client
    properties among --set: client_config.load), run a command's `work(bootstrap, security)` →
    (exit status, data, text) and print the text, or the data with --json; a failure is one line
    on stderr. The exit status."""
    try:
        security, settings_sets = client_config.load(args.command_config, args.set)
        bootstrap = resolve_bootstrap(args, settings_sets=settings_sets, protocol=security.protocol)
    except ConfigError as e:
        print(f"groupd: configuration error: {e}", file=sys.stderr)
        return 2
    for key in client_config.unused(security):
        _warn(f"the client property {key} is not used by groupd's commands")
    try:
        code, data, text = work(bootstrap, security)
    except ConfigError as e:  # what only connecting reads: an OAUTHBEARER token file
        print(f"groupd: configuration error: {e}", file=sys.stderr)
        return 2
    except (AdminError, PlanError) as e:
        print(f"groupd: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"groupd: {bootstrap}: {e.strerror or e}", file=sys.stderr)
        return 1
    output = json.dumps(data, indent=2) if getattr(args, "json", False) and data is not None else text
    if output:
        print(output)
    return code


def _command(args: argparse.Namespace, bootstrap: str, security: ClientConfig) -> tuple[int, Any, str]:
    """(exit status, the JSON document, the text) of a groups or offsets command."""
    timeout = args.timeout
    if args.command == "groups" and args.groups_command == "list":
        data: Any = list_groups(bootstrap, args.state, args.type, timeout, security)
        return 0, data, table(["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"],
                               [[g["group"], g["state"], g["protocol_type"] or "-", g["type"]] for g in data])
    if args.command == "groups" and args.groups_command == "describe":
        names = all_group_ids(bootstrap, timeout, security) if args.all_groups else list(dict.fromkeys(args.group))
        found, missing = describe_groups(bootstrap, names, timeout, security)
        for group in missing:
            print(f"groupd: group {group!r} does not exist", file=sys.stderr)
        one = len(names) == 1 and not args.all_groups
        if one and not found:
            return 1, None, ""
        data = found[0] if one else found
        text = "\n\n".join(describe_text(d) for d in found) if found else "no groups"
        if any(o["lag"] is None and o["offset"] is not None for d in found for o in d["offsets"]):
            text += "\n\n" + LAG_FOOTNOTE
        return (1 if missing else 0), data, text
    if args.command == "groups":
        results = delete_groups(bootstrap, args.group, timeout, security)
        failed = {g: e for g, e in results.items() if e is not None}
        for group, error in failed.items():
            print(f"groupd: group {group!r} could not be deleted: {error}"
                  + (" (it has members; stop them first)" if error == "NON_EMPTY_GROUP" else ""), file=sys.stderr)
        deleted = [g for g, e in results.items() if e is None]
        text = f"deleted group{'s' if len(deleted) > 1 else ''} " + ", ".join(repr(g) for g in deleted) if deleted else ""
        return (1 if failed else 0), {"deleted": deleted, "failed": failed}, text
    if args.offsets_command == "delete":
        r = delete_offsets(bootstrap, args.group, args.topic, timeout, security)
        if r["error"] is not None:
            raise AdminError(f"cannot delete the offsets of group {args.group!r}: {r['error']}"
                             + _OFFSET_DELETE_HINTS.get(r["error"], ""))
        failed = any(p["error"] for p in r["partitions"])
        if failed:
            print(f"groupd: some offsets of group {args.group!r} were not deleted", file=sys.stderr)
        return (1 if failed else 0), r, table(["TOPIC", "PARTITION", "STATUS"], [
            [p["topic"], p["partition"], f"Error: {p['error']}" if p["error"] else "Successful"]
            for p in r["partitions"]])
    scenario = next(s for s in SCENARIOS if getattr(args, s) not in (None, False))
    value = getattr(args, scenario)
    if scenario == "from_file":
        value = _read_plan_file(value)
    r = reset_offsets(bootstrap, args.group, scenario, value, topics=args.topic or (), all_topics=args.all_topics,
                      execute=args.execute, timeout=timeout, warn=_warn, security=security)
    if args.export:
        return 0, r, to_csv({(o["topic"], o["partition"]): o["offset"] for o in r["offsets"]}).rstrip("\n")
    return 0, r, reset_text(r)


_OFFSET_DELETE_HINTS = {"NON_EMPTY_GROUP": " (it has members; stop them first)",
                        "GROUP_ID_NOT_FOUND": " (no such group)",
                        "GROUP_SUBSCRIBED_TO_TOPIC": " (its members consume that topic)"}

LAG_FOOTNOTE = ("LAG -: the committed offset is past the log-end offset: groupd does not hold those records "
                "(records.plane: none keeps none; the memory plane's are gone after a restart; or the partition's "
                "records were removed from the data dir)")


def _read_plan_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise AdminError(f"cannot read --from-file {path}: {e.strerror or e}") from None
