"""Run (part of) the differential corpus against a fresh Apache Kafka and a fresh groupd and print every
difference, in allowlist.txt's format with `F?` for an unlisted one; `--steps` also prints each answer
of both servers, normalised (`DIFFERENTIAL_MESSAGES=1` keeps error-message text).

    .venv/bin/python -m tests.differential.report [scenario ...] [--steps]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time

from tests.support.kafka import KafkaBroker, groupd_settings
from tests.support.process import GroupdProcess

from .conftest import create_topics
from .corpus import CORPUS
from .diff import Side, allowlist, compare, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--steps", action="store_true", help="print every normalised answer")
    parser.add_argument("--keep", action="store_true", help="keep both servers' data dirs and logs")
    args = parser.parse_args(argv)
    unknown = [n for n in args.scenarios if n not in CORPUS]
    if unknown:
        parser.error(f"unknown scenarios: {unknown}")
    started = time.monotonic()
    dirs = [tempfile.mkdtemp(prefix="differential-kafka-"), tempfile.mkdtemp(prefix="differential-groupd-")]
    kafka = KafkaBroker(dirs[0]).start()
    print(f"kafka {kafka.version} ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    groupd = GroupdProcess(dirs[1], *groupd_settings()).start()
    listed = {name: {d: f for f, d in entries} for name, entries in allowlist().items()}
    unlisted = 0
    try:
        k_topics, g_topics = create_topics(kafka.bootstrap), create_topics(groupd.bootstrap)
        for name in args.scenarios or sorted(CORPUS):
            k = run(CORPUS[name], Side("kafka", kafka.bootstrap, name, k_topics))
            g = run(CORPUS[name], Side("groupd", groupd.bootstrap, name, g_topics))
            if args.steps:
                for s in (k, g):
                    for label, value in s.steps:
                        print(f"# {s.name} {name} {label} {json.dumps(s.normalise(value), default=str)}")
            for d in compare(k, g):
                finding = listed.get(name, {}).get(d, "F?")
                unlisted += finding == "F?"
                print(f"{finding} {name} {d}")
    finally:
        groupd.stop()
        kafka.stop()
        for d in dirs:
            if args.keep:
                print(f"kept {d}", file=sys.stderr)
            else:
                shutil.rmtree(d, ignore_errors=True)
    print(f"{unlisted} unlisted differences; {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
