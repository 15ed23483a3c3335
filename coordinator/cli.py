"""`groupd`: serve, show the effective configuration, read and repair the offsets log, print the
version. Every failure a user can cause ends in one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from groupd.storage.files import DataDirError

from . import __version__
from .settings import ConfigError, Settings, add_config_arguments

# `serve` builds only its own parser and imports none of the other commands' modules (the admin
# client, the chaos CLI, the log tools), nor the worker plumbing unless it is a worker: start-up time.


class _Parser(argparse.ArgumentParser):
    """argparse with a usage mistake on one line (the sub-commands' parsers are of this class too)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _top_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    p = _Parser(prog="groupd", description="A standalone Kafka group coordinator.")
    p.add_argument("--version", action="version", version=f"groupd {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the coordinator")
    add_config_arguments(serve)
    serve.add_argument("--workers", type=int, metavar="N", help="worker processes on this host (the setting "
                       "`workers`; docs/workers-and-cluster.md)")
    serve.add_argument("--worker", help=argparse.SUPPRESS)  # INDEX:FD, given by the supervisor to each worker
    return p, sub


def _serve_parser() -> argparse.ArgumentParser:
    """The parser of `groupd serve ...` alone: the same arguments, usage and errors as in the whole."""
    return _top_parser()[0]


def _parser() -> argparse.ArgumentParser:
    from .tools import acls as admin_acls
    from .tools import chaos_cli
    from .tools import commands as admin
    from .tools import transactions as admin_transactions

    p, sub = _top_parser()
    config = sub.add_parser("config", help="configuration commands")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser("show", help="the effective configuration (YAML) and where each value came from")
    add_config_arguments(show)
    show.add_argument("--json", action="store_true", help="one JSON document instead of YAML")
    logs = sub.add_parser("log", help="read the offsets log and the data partitions of a data directory "
                          "(no server needed)")
    logs_sub = logs.add_subparsers(dest="log_command", required=True)
    dump = logs_sub.add_parser("dump", help="print every record, decoded, one JSON object per line")
    dump.add_argument("--partition", type=int)
    dump.add_argument("--group", help="only this group's records (in the partition that holds it)")
    dump.add_argument("--topic", help="a data topic's partition (with --partition, default 0) instead of the "
                      "offsets log: each record's offset, timestamp, key, value and headers; __transaction_state: "
                      "each transactional id's stored state (every partition, or --partition)")
    verify = logs_sub.add_parser("verify", help="check every batch's CRC and the offsets, per partition")
    repair = logs_sub.add_parser("repair", help="rewrite partitions without their corrupt bytes (no server may "
                                 "use the data dir; the originals are copied to <data dir>/repair-<time>/)")
    repair.add_argument("--partition", type=int)
    repair.add_argument("--topic", help="only this data topic's partitions (all of them, or --partition)")
    for sp in (dump, verify, repair):  # the data dir serve uses, from the same sources, unless given
        sp.add_argument("--data-dir", help="the data directory (default: data.dir of the settings serve reads: "
                        "--config, GROUPD_* variables, --set)")
        add_config_arguments(sp)
    admin.add_parsers(sub)  # groups, offsets, health: talk to a running groupd
    admin_acls.add_parsers(sub)  # acls list|add|remove: likewise
    admin_transactions.add_parsers(sub)  # transactions list|describe|describe-producers|abort
    chaos_cli.add_parser(sub)  # fault injection through the admin endpoint
    analytics = sub.add_parser("analytics", help="the PySpark pipeline over the offsets log (needs the spark extra)")
    analytics_sub = analytics.add_subparsers(dest="analytics_command", required=True)
    run = analytics_sub.add_parser("run", help="read a data dir with Spark and write the Parquet tables")
    run.add_argument("--data-dir", required=True, help="the server's data.dir (a live one is fine)")
    run.add_argument("--out", required=True, help="directory for the tables (each overwritten)")
    run.add_argument("--master", help="Spark master URL (default local[*]; e.g. spark://host:7077)")
    run.add_argument("--since", metavar="TIME", help="history from TIME on: epoch ms, ISO 8601 or a duration ago (2h)")
    run.add_argument("--until", metavar="TIME", help="the log as it was at TIME (offsets at a past time)")
    run.add_argument("--window", type=int, default=10, help="commits per partition for partition_status (10)")
    run.add_argument("--conf", metavar="KEY=VALUE", action="append", default=[], help="a Spark setting (repeatable)")
    run.add_argument("--log-ends", metavar="FILE", help='log-end offsets for partition_status\'s lag, JSON: '
                     '{"topic": {"partition": offset, ...}, ...} (the offsets log holds none)')
    report = analytics_sub.add_parser("report", help="an HTML page of the tables: rebalance timeline, commit "
                                      "rates, partition status (no Spark)")
    report.add_argument("--tables", required=True, help="the --out directory of `groupd analytics run`")
    report.add_argument("--out", help="the HTML file to write (default <tables>/report.html)")
    return p


def _log_command(args) -> int:
    from groupd.storage import inspect
    from groupd.storage.log import partition_dir
    from groupd.storage.transaction_log import TOPIC as TXN_TOPIC

    if args.data_dir is None:
        try:
            args.data_dir = Settings.load(args.config, overrides=args.set, cross_checks=False).data_dir
        except ConfigError as e:
            return _fail(f"configuration error: {e}", 2)
        if not os.path.isdir(args.data_dir):
            return _fail(f"data.dir {args.data_dir} is not a directory (give the settings serve reads: --config, "
                         "GROUPD_* variables, --set; or --data-dir)")
    if not os.path.isdir(args.data_dir):
        return _fail(f"--data-dir {args.data_dir} is not a directory")
    partition = getattr(args, "partition", None)
    topic = getattr(args, "topic", None)
    if topic == TXN_TOPIC and args.log_command == "dump":  # every partition unless one is named
        if partition is not None and not os.path.isdir(os.path.join(args.data_dir, f"{topic}-{partition}")):
            return _fail(f"partition {topic}-{partition} has no directory in {args.data_dir}")
        for line in inspect.dump_transactions(args.data_dir, partition):
            print(line)
        return 0
    if topic is not None:
        if partition is not None and not os.path.isdir(os.path.join(args.data_dir, f"{topic}-{partition}")):
            return _fail(f"partition {topic}-{partition} has no directory in {args.data_dir}")
        if args.log_command == "dump":
            p = 0 if partition is None else partition
            for line in inspect.dump_data(os.path.join(args.data_dir, f"{topic}-{p}"), topic, p):
                print(line)
            return 0
    elif partition is not None and not os.path.isdir(partition_dir(args.data_dir, partition)):
        return _fail(f"partition {partition} has no directory in {args.data_dir}")
    if args.log_command == "dump":
        for line in inspect.dump(args.data_dir, args.partition, args.group):
            print(line)
        return 0
    if args.log_command == "repair":
        return _repair(args.data_dir, args.partition, topic)
    lines, ok = inspect.verify(args.data_dir)
    print("\n".join(lines) if lines else "no records")
    return 0 if ok else 1


def _repair(data_dir: str, partition: int | None, topic: str | None) -> int:
    from groupd.storage.files import DataDirLock
    from groupd.storage.inspect import data_partitions, partitions
    from groupd.storage.repair import repair_partition

    if topic is not None:  # a data topic's partitions, by directory name
        chosen: list = [f"{t}-{p}" for t, p, _ in data_partitions(data_dir)
                        if t == topic and (partition is None or p == partition)]
    elif partition is not None:
        chosen = [partition]
    else:  # everything: the offsets log, then every data partition
        chosen = partitions(data_dir) + [f"{t}-{p}" for t, p, _ in data_partitions(data_dir)]
    lock = DataDirLock(data_dir).acquire("groupd log repair")  # never under a running server
    try:
        results = [repair_partition(data_dir, p) for p in chosen]
    finally:
        lock.release()
    reported = [r for r in results if r.backup is not None or r.remaining]
    print("\n".join(r.describe() for r in reported) if reported else "nothing to repair")
    return 1 if any(r.remaining for r in results) else 0


def _worker(given: str, settings: Settings):
    """`--worker INDEX:FD`: this process is worker INDEX of the supervisor at the other end of FD."""
    from groupd.coordinator.server.supervisor_link import SupervisorLink
    from groupd.storage.compaction import die_with_parent

    die_with_parent(signal.SIGTERM)  # a supervisor killed with -9 takes its workers along (each drains)
    index, fd = (int(x) for x in given.split(":"))
    return SupervisorLink(index, settings.workers, fd, settings)


def _worker_args(args) -> list[str]:
    """A worker's command line: the supervisor's own sources, so a worker reads the same settings."""
    out = ["serve"] + (["--config", args.config] if args.config else [])
    for item in args.set:
        out += ["--set", item]
    return out


def _fail(message: str, code: int = 1) -> int:
    print(f"groupd: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed stdout is handled, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader went away (`groupd log dump | head`): stop quietly, as a tool killed by SIGPIPE
        # would; stdout goes to /dev/null so the interpreter's final flush cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    except DataDirError as e:
        return _fail(str(e))


def _main(argv: list[str] | None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["serve"]:
        args = _serve_parser().parse_args(given)
    else:
        args = _parser().parse_args(given)
        code = _tool_command(args)
        if code is not None:
            return code
    if getattr(args, "workers", None) is not None:
        args.set.append(f"workers={args.workers}")
    try:
        settings = Settings.load(args.config, overrides=args.set)
    except ConfigError as e:
        print(f"groupd: configuration error: {e}", file=sys.stderr)
        return 2
    if args.command == "config":
        from groupd.coordinator.tools.config_show import (
            show,  # and with it PyYAML, which `serve` without a config file never needs
        )

        for warning in settings.warnings:
            print(f"groupd: warning: {warning}", file=sys.stderr)
        print(show(settings, args.json))
        return 0
    worker = _worker(args.worker, settings) if args.worker else None
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s" + (f"[{worker.index}]" if worker else "") +
                        " %(message)s")
    if worker is None:
        for warning in settings.warnings:  # a worker's are its supervisor's
            logging.getLogger("groupd").warning("%s", warning)
    from groupd.coordinator.cluster.view import ClusterError
    from groupd.coordinator.server.server import ListenError, run

    try:
        if worker is None and settings.workers > 1:
            from .server import supervisor

            return supervisor.run(settings, _worker_args(args))
        if worker is not None:
            from groupd.coordinator.cluster.workers import worker_settings

            settings = worker_settings(settings, worker.index)
        run(settings, worker)
    except ClusterError as e:
        return _fail(str(e))
    except ConfigError as e:  # what only serving finds out: a keystore that does not load
        print(f"groupd: configuration error: {e}", file=sys.stderr)
        return 2
    except ListenError as e:  # names the setting, the address and what to do
        return _fail(str(e))
    return 0


def _tool_command(args) -> int | None:
    """Run every command but `serve` and `config show`; None for those two."""
    from .tools import acls as admin_acls
    from .tools import chaos_cli
    from .tools import commands as admin
    from .tools import transactions as admin_transactions

    if args.command == "log":
        return _log_command(args)
    if args.command == "analytics":
        from groupd.analytics.cli import report_command, run_command  # pyspark only when asked for

        return (report_command if args.analytics_command == "report" else run_command)(args)
    if args.command in admin.COMMANDS:
        return admin.run(args)
    if args.command == "acls":
        return admin_acls.run(args)
    if args.command == "transactions":
        return admin_transactions.run(args)
    if args.command == "chaos":
        return chaos_cli.run(args)
    return None
