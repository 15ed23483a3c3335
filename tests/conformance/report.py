"""Run the conformance allowlists and print a table: test → PASS/FAIL against its expectation.

    python -m tests.conformance.report                  # the CI tier (make conformance)
    python -m tests.conformance.report --tier full      # everything (make conformance-full)
    python -m tests.conformance.report --suite librdkafka --only 0113_t 0102
    python -m tests.conformance.report --suite librdkafka-consumer   # the KIP-848 run
    python -m tests.conformance.report --suite librdkafka-share      # the share-consumer tests
    python -m tests.conformance.report --suite franz-go --only TestGroupETL
    python -m tests.conformance.report --suite sarama --only ConsumerGroup
    python -m tests.conformance.report --suite java-verifiable
    python -m tests.conformance.report --suite kafka-streams --tier full   # Kafka Streams' system tests

Builds and caches the suites on first use (~/.cache/groupd-conformance). Logs of every test and
of its groupd go to ~/.cache/groupd-conformance/logs/. Exits 1 when a result differs from the
allowlist's expectation or a FAIL has no reason in FINDINGS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import franz_go, java_verifiable, kafka_python, kafka_streams, librdkafka, sarama
from .common import CACHE, Result, finding_problem, read_allowlist, read_findings, select

SUITES = ("librdkafka", "librdkafka-consumer", "librdkafka-share", "kafka-python", "franz-go", "sarama",
          "java-verifiable", "kafka-streams")
# the suites run one test (one process) per allowlist entry
ONE_BY_ONE = {"librdkafka": librdkafka, "librdkafka-consumer": librdkafka, "librdkafka-share": librdkafka,
              "franz-go": franz_go, "sarama": sarama, "java-verifiable": java_verifiable,
              "kafka-streams": kafka_streams}


def run(suite: str, tier: str, only: list[str] | None, say=print) -> tuple[list[Result], float]:
    entries = select(read_allowlist(suite), tier, only)
    if not entries:
        return [], 0.0
    if suite in ONE_BY_ONE:
        runner = ONE_BY_ONE[suite]
        _, setup = runner.ensure_built(say)
        results = []
        for e in entries:
            say(f"  {suite} {e.id} ...", end=" ", flush=True)
            r = runner.run_entry(e)
            say(f"{r.status} ({r.seconds:.0f}s) {r.detail}")
            results.append(r)
        return results, setup
    _, setup = kafka_python.ensure_env(say)
    say(f"  kafka-python: {len(entries)} tests in one pytest run ...", flush=True)
    return kafka_python.run_entries(entries), setup


def table(results: list[Result]) -> str:
    findings = read_findings()
    width = max([len(r.entry.id) for r in results] + [4])
    suite_width = max(len(s) for s in SUITES)
    lines = [f"{'suite':<{suite_width}} {'test':<{width}} {'result':<6} {'expected':<8} {'time':>6}  note",
             "-" * (width + suite_width + 37)]
    for r in results:
        mark = "" if r.as_expected else "  <-- differs from the allowlist"
        note = " ".join(r.detail.split())[:160] if r.status != "PASS" else ""
        problem = finding_problem(r.entry, findings)
        if problem:
            note = f"{note}; {problem}" if note else problem
        lines.append(f"{r.entry.suite:<{suite_width}} {r.entry.id:<{width}} {r.status:<6} {r.entry.expect:<8} "
                     f"{r.seconds:>5.0f}s  {note}{mark}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.conformance.report", description=__doc__.split("\n")[0])
    p.add_argument("--tier", choices=("ci", "full"), default="ci")
    p.add_argument("--suite", choices=SUITES + ("all",), default="all")
    p.add_argument("--only", nargs="*", help="substrings of test ids to run")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)

    def say(*a, **k):
        print(*a, **k, file=sys.stderr)
        sys.stderr.flush()

    started = time.monotonic()
    results: list[Result] = []
    setups = {}
    for suite in SUITES if args.suite == "all" else (args.suite,):
        got, setup = run(suite, args.tier, args.only, say)
        results += got
        setups[suite] = setup
    elapsed = time.monotonic() - started
    findings = read_findings()
    print(table(results))
    print()
    for suite in SUITES:
        mine = [r for r in results if r.entry.suite == suite]
        if mine:
            passed = sum(r.status == "PASS" for r in mine)
            print(f"{suite}: {passed} PASS, {sum(r.status == 'FAIL' for r in mine)} FAIL, "
                  f"{sum(r.status == 'SKIP' for r in mine)} SKIP of {len(mine)}; "
                  f"setup {setups[suite]:.0f}s, tests {sum(r.seconds for r in mine):.0f}s")
    unexpected = [r for r in results if not r.as_expected]
    unexplained = [r for r in results if finding_problem(r.entry, findings)]
    print(f"total {elapsed:.0f}s (cache {CACHE}); {len(unexpected)} differ from the allowlist, "
          f"{len(unexplained)} expected failures lack a reason")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"suite": r.entry.suite, "id": r.entry.id, "status": r.status, "expect": r.entry.expect,
                        "seconds": round(r.seconds, 1), "detail": r.detail, "log": r.log} for r in results],
                      f, indent=1)
    passed = sum(r.status == "PASS" for r in results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 1 if unexpected or unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
