"""franz-go's own kgo integration tests: the `*_test.go` files of github.com/twmb/franz-go@v1.22.3
(shipped in the Go module zip) compiled once into a test binary by `.ci/install-franz-go`, then run
one test (or one subtest pattern) per invocation against a fresh groupd.

Environment the tests read (pkg/kgo/helpers_test.go): KGO_SEEDS (the broker), KGO_TEST_RF
(replication factor of the topics they create: 1 here), KGO_TEST_RECORDS (records the ETL tests
produce and chain through three groups; the suite's default 500 000 is a load test, 10 000 here).
TLS and SASL stay off (no KGO_TEST_TLS / KGO_TEST_SCRAM*). The consumer group protocol needs no
switch: a test asks for KIP-848 itself (TestGroupETL's `*/848` variations, TestGroupSimple,
Test848RegexBrokerResolves) when ApiVersions offers ConsumerGroupHeartbeat v1, and skips otherwise.

Subtest filters: TestGroupETL/TestTxnEtl take a 4-slot semaphore before each `t.Run` and free it
inside the subtest, so a `-test.run` pattern that filters out five of the six variations leaks
the slots and hangs the test. Keep at least two variations per pattern (`^range$` runs `range`
and `range/848`: Go matches `range/848` level by level).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from .common import Entry, Result, install_once, logs_dir, run_bounded, safe_name, start_groupd, stop_groupd

VERSION = "v1.22.3"
CLIENTS = Path(os.environ.get("KAFKA_TEST_CLIENTS", "~/.cache/groupd-clients")).expanduser()
RECORDS = 10_000
# the default disk records plane (common.GROUPD_SETTINGS says memory for the other suites)
SETTINGS = ("records.plane=disk",)

_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(", re.M)


def binary() -> Path:
    return CLIENTS / "go" / f"franz-go-{VERSION}" / "kgo.test"


def ensure_built(say=print) -> tuple[Path, float]:
    """The kgo test binary, built by .ci/install-franz-go on first use (cached afterwards)."""
    started = time.monotonic()
    install_once("install-franz-go", binary(), {"FRANZ_GO_VERSION": VERSION, "KAFKA_TEST_CLIENTS": str(CLIENTS)},
                 say, f"franz-go: building pkg/kgo's tests {VERSION} into {binary().parent}")
    return binary(), time.monotonic() - started


def targets(entry: Entry) -> list[str]:
    """The top-level tests of an entry: `A,B` runs both in one binary and needs both to pass. Go
    runs a test that is not parallel (A) before the parallel ones, so A can set up what B reads."""
    return entry.target.split(",")


def run_pattern(entry: Entry) -> str:
    """The -test.run value: the top-level test(s), or their subtests matching `subtests`."""
    top = f"^({'|'.join(targets(entry))})$"
    return f"{top}/{entry.subtests}" if entry.subtests else top


def run_entry(entry: Entry, run_dir: Path | None = None) -> Result:
    run_dir = run_dir or logs_dir(entry.suite)
    log = run_dir / f"{safe_name(entry.id)}.log"
    server, data_dir = start_groupd(SETTINGS)
    try:
        env = {**os.environ, "KGO_SEEDS": server.bootstrap, "KGO_TEST_RF": "1",
               "KGO_TEST_RECORDS": str(RECORDS), "KGO_LOG_LEVEL": "info"}
        for var in ("KGO_TEST_TLS", "KGO_TEST_SCRAM", "KGO_TEST_SCRAM_SEEDS", "KGO_TEST_OAUTH_SEEDS",
                    "KGO_TEST_CHAOS", "KGO_TEST_MAX_TOPIC_PARTS", "KGO_TEST_UNSAFE"):
            env.pop(var, None)
        # the binary's own timeout a little before ours: it then prints every goroutine's stack
        args = [str(binary()), "-test.v", "-test.count=1", "-test.run", run_pattern(entry),
                "-test.timeout", f"{max(entry.timeout - 10, 10)}s"]
        rc, seconds = run_bounded(args, cwd=data_dir, env=env, timeout=entry.timeout, log_path=log)
    finally:
        stop_groupd(server, data_dir, keep_log=run_dir / f"{safe_name(entry.id)}.groupd.log")
    status, detail = verdict(log.read_text(errors="replace"), rc, entry)
    return Result(entry, status, seconds, detail, str(log))


def verdict(output: str, rc: int | None, entry: Entry) -> tuple[str, str]:
    """PASS when the binary exited 0 and the test's own `--- PASS` line is there, and, with a
    subtest pattern, some subtest passed (a pattern that matches nothing passes vacuously). SKIP
    when the test (or every subtest that ran) skipped itself."""
    results = _RESULT.findall(output)
    names = targets(entry)
    top = [s for s, name in results if name in names]
    subs = [(s, name) for s, name in results if name.split("/")[0] in names and "/" in name]
    failed = [name for s, name in results if s == "FAIL"]
    if rc is None:
        return "FAIL", f"killed after {entry.timeout}s" + (f"; failed: {failed}" if failed else "")
    if "panic: test timed out" in output:
        return "FAIL", "test binary timed out" + (f"; failed: {failed}" if failed else "")
    if failed or rc != 0:
        return "FAIL", f"failed: {', '.join(failed) or entry.target} (rc {rc}){_first_error(output)}"
    if len(top) != len(names):
        return "FAIL", "no result line for the test (pattern matched nothing?)"
    if all(s == "SKIP" for s in top) or (subs and all(s == "SKIP" for s, _ in subs)):
        return "SKIP", _skip_reason(output)
    if entry.subtests and not any(s == "PASS" for s, _ in subs):
        return "FAIL", "no subtest matched the pattern"
    passed = [name for s, name in subs if s == "PASS"]
    skipped = [name for s, name in subs if s == "SKIP"]
    return "PASS", (f"{len(passed)} subtest(s) passed" if subs else "passed") + (
        f", skipped: {', '.join(skipped)}" if skipped else "")


def _first_error(output: str) -> str:
    m = re.search(r"^\s+\w+_test\.go:\d+: (?!deleting|FAILED TESTING|.*completed in)(.+)$", output, re.M)
    return f": {m.group(1)[:200]}" if m else ""


def _skip_reason(output: str) -> str:
    m = re.search(r"^\s+\w+_test\.go:\d+: (.+)$\n\s*--- SKIP", output, re.M)
    return m.group(1)[:200] if m else "skipped"

