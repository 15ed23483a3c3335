"""`groupd analytics run`: the pipeline from the command line (the parser is in coordinator/cli.py,
which imports this module only when the subcommand runs)."""

from __future__ import annotations

import datetime
import os
import re
import sys
import time

from .segments import list_data_dir

_DURATION = re.compile(r"^(\d+)\s*(ms|s|m|h|d|w)$")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_time(text: str, now_ms: int | None = None) -> int:
    """A point in time as epoch milliseconds, from: epoch milliseconds (`1717236000000`), an ISO
    8601 date or time (`2024-06-01`, `2024-06-01T10:00:00Z`; UTC unless it names a zone), or a
    duration before now (`90s`, `15m`, `2h`, `7d`)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    found = _DURATION.match(text)
    if found:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return now_ms - int(found.group(1)) * _UNITS[found.group(2)]
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a time: use epoch ms, ISO 8601 (2024-06-01T10:00:00Z) "
                         "or a duration ago (15m, 2h, 7d)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def _error(message: str, code: int) -> int:
    print(f"groupd analytics: error: {message}", file=sys.stderr)
    return code


def _explain(error: BaseException) -> str:
    """The line that says what went wrong, out of a Spark error (a Python traceback from an
    executor wrapped in a JVM stack trace)."""
    text = str(error)
    for marker in ("FileNotFoundError: ", "PermissionError: ", "IsADirectoryError: "):
        for line in text.splitlines():
            if marker in line:
                return line[line.index(marker):].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def run_command(args) -> int:
    """args: data_dir, out, master, since, until, window, conf (list of KEY=VALUE)."""
    try:
        since = parse_time(args.since) if args.since else None
        until = parse_time(args.until) if args.until else None
    except ValueError as e:
        return _error(str(e), 2)
    if args.window < 1:
        return _error("--window must be at least 1", 2)
    conf = {}
    for item in args.conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            return _error(f"--conf {item!r}: expected KEY=VALUE", 2)
        conf[key] = value
    args.data_dir, args.out = os.path.abspath(args.data_dir), os.path.abspath(args.out)  # executors resolve paths
    try:
        segments = list_data_dir(args.data_dir)
    except (FileNotFoundError, NotADirectoryError):
        return _error(f"--data-dir {args.data_dir}: no such directory", 2)
    except PermissionError as e:
        return _error(f"--data-dir {args.data_dir}: {e}", 2)
    if not segments:
        return _error(f"--data-dir {args.data_dir}: no offsets log here (no __consumer_offsets-<p>/*.log "
                      "segments): is it a groupd data.dir?", 2)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        return _error(f"--out {args.out}: exists and is not a directory", 2)

    try:
        from pyspark.sql import SparkSession

        from . import pipeline, session
    except ImportError as e:
        return _error(f"{e}: the pipeline needs the spark extra: in groupd's clone, .ci/install-python spark", 2)

    start = time.monotonic()
    running = SparkSession.getActiveSession()  # in-process callers (tests, notebooks) keep theirs
    try:
        spark = running or session.build(args.master, conf=conf)
    except Exception as e:  # noqa: BLE001 — no Java, a bad master URL, ...
        return _error(f"could not start Spark: {_explain(e)}", 1)
    print(f"spark {spark.version} ready in {time.monotonic() - start:.1f}s", flush=True)
    try:
        summary = pipeline.run(spark, args.data_dir, args.out, since, until, args.window,
                               progress=lambda line: print(line, flush=True))
    except Exception as e:  # noqa: BLE001 — reported as one line; Spark's trace is on stderr above
        return _error(_explain(e), 1)
    finally:
        if running is None:
            spark.stop()
    print(f"done: {summary.records} records, {summary.groups} groups, {summary.segments} segments, "
          f"{summary.offsets_partitions} offsets partitions in {time.monotonic() - start:.1f}s "
          f"(pipeline {summary.seconds:.1f}s); tables in {args.out}: "
          + ", ".join(f"{name} {n}" for name, n in summary.rows.items()), flush=True)
    return 0


def report_command(args) -> int:
    """args: tables (the --out of `groupd analytics run`), out (the HTML file; default
    <tables>/report.html)."""
    try:
        from . import report
    except ImportError as e:
        return _error(f"{e}: the report needs the spark extra: in groupd's clone, .ci/install-python spark", 2)
    out = args.out or os.path.join(args.tables, "report.html")
    try:
        rows = report.write(args.tables, out)
    except FileNotFoundError as e:
        return _error(str(e), 2)
    except OSError as e:
        return _error(f"{out}: {e.strerror or e}", 1)
    print(f"wrote {out}: " + ", ".join(f"{n} {name}" for name, n in rows.items()), flush=True)
    return 0
