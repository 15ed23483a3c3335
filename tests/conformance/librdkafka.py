"""librdkafka's own test suite (`tests/test-runner`), built from the librdkafka source that the
npm package @confluentinc/kafka-javascript ships (conformance.md §1.1, §1.6), run one test or one
SUBTESTS filter per invocation against a fresh groupd (§1.2: `-p1 -E -L`, never `-Q`).

The build (≈ 2 min on 2 cores) is cached under ~/.cache/groupd-conformance/<version key>/; a
build is published there only once complete, under a lock, so a killed build is simply redone.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .common import CACHE, Entry, Result, logs_dir, run_bounded, safe_name, start_groupd, stop_groupd, tail

KJS_PACKAGE = "@confluentinc/kafka-javascript"
KJS_VERSION = "1.10.1"  # bundles librdkafka 2.15.1
LIBRDKAFKA_VERSION = "2.15.1"
KEY = f"librdkafka-{LIBRDKAFKA_VERSION}-kjs{KJS_VERSION}"
# TEST_KAFKA_VERSION: feature gates only; ≥ 2.4 enables every classic test, the share-consumer tests
# (0170-0185) need ≥ 4.2, Kafka's first release with share groups on by default (groupd serves them
# whatever group.coordinator.rebalance.protocols says, as Kafka 4.2+ with share.version=1)
BROKER_VERSION = {"librdkafka": "3.9.0", "librdkafka-consumer": "3.9.0", "librdkafka-share": "4.2.0"}
# The same test-runner serves three allowlists: its classic-protocol run, its KIP-848 run, where
# every consumer it creates gets group.protocol=consumer and the tests take their consumer branches,
# and its share-consumer tests (KIP-932; they make no plain consumer, so the protocol is moot there).
GROUP_PROTOCOL = {"librdkafka": "classic", "librdkafka-consumer": "consumer", "librdkafka-share": "classic"}
# The consumer-protocol run's server heartbeats members every second, as a test cluster is set up
# (Kafka's 5 s default, with its fixed 10 s between two regex resolutions of a group, leaves the
# regex tests' 30 s budgets a few seconds; librdkafka's own mock-cluster tests use 0.1-1 s).
PROTOCOL_SETTINGS = {"classic": (), "consumer": ("group.consumer.min.heartbeat.interval.ms=1000",
                                                 "group.consumer.heartbeat.interval.ms=1000")}
# The broker settings librdkafka's own CI gives Kafka ≥ 4.2 for the share tests (tests/cluster_testing.py):
# they set share.record.lock.duration.ms on their groups down to 1 s. And share-group members heartbeat
# every second, as the consumer-protocol run's: a new group's partitions are assigned once their share
# state is initialized, at the next heartbeat (as Kafka's), and at the default 5 s tests that make a new
# group per subtest (0175, 0178) outrun their 30-60 s budgets.
SUITE_SETTINGS = {"librdkafka": (), "librdkafka-consumer": (),
                  "librdkafka-share": ("group.share.min.record.lock.duration.ms=1000",
                                       "group.share.min.heartbeat.interval.ms=1000",
                                       "group.share.heartbeat.interval.ms=1000")}

_TEST_LINE = re.compile(r"Test (\S+) (PASSED|FAILED|SKIPPED)")
_SUBTEST_LINE = re.compile(r"\[ (.+?): (PASS|FAIL|SKIP)\b")
_SUBTEST_START = re.compile(r"^\[ ([^\]]+?) \]$", re.M)  # some subtests never print their PASS
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CLASSIC_JOIN = re.compile(r"join phase completed group=\S+")  # groupd's log line for a classic JoinGroup round


def tree() -> Path:
    return CACHE / KEY / "librdkafka"


def built() -> bool:
    return (CACHE / KEY / ".complete").exists() and (tree() / "tests" / "test-runner").exists()


def ensure_built(say=print) -> tuple[Path, float]:
    """The built librdkafka tree and how long this call took (0-ish when cached)."""
    started = time.monotonic()
    if built():
        return tree(), time.monotonic() - started
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{KEY}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same key
        if built():
            return tree(), time.monotonic() - started
        for stale in CACHE.glob(f"{KEY}.build-*"):  # left by a build that was killed (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f"{KEY}.build-", dir=CACHE))
        log = work / "build.log"
        try:
            say(f"librdkafka: npm pack {KJS_PACKAGE}@{KJS_VERSION} and build (about 2 minutes), log {log}")
            _step(["npm", "pack", "--silent", f"{KJS_PACKAGE}@{KJS_VERSION}"], work, log)
            (tgz,) = work.glob("*.tgz")
            _step(["tar", "xzf", tgz.name], work, log)
            src = work / "package" / "deps" / "librdkafka"
            jobs = str(max(os.cpu_count() or 2, 2))
            _step(["./configure", "--no-download"], src, log)  # never --install-deps: it downloads
            _step(["make", f"-j{jobs}", "libs"], src, log)
            _step(["make", "-C", "tests", f"-j{jobs}", "test-runner"], src, log)
            for obj in src.rglob("*.o"):
                obj.unlink()
            final = CACHE / KEY
            if final.exists():
                shutil.rmtree(final)
            final.mkdir()
            src.rename(final / "librdkafka")
            shutil.copy(log, final / "build.log")
            (final / ".complete").write_text(f"{KJS_PACKAGE}@{KJS_VERSION} librdkafka {LIBRDKAFKA_VERSION}\n")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tree(), time.monotonic() - started


def _step(args: list[str], cwd: Path, log: Path) -> None:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(args)}  (in {cwd})\n".encode())
        out.flush()
        rc = subprocess.run(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    if rc != 0:
        raise RuntimeError(f"librdkafka build step failed ({rc}): {' '.join(args)}\n{tail(log, 4000)}")


def run_entry(entry: Entry, run_dir: Path | None = None) -> Result:
    """One test-runner invocation against a fresh groupd, in the group protocol of the entry's
    allowlist."""
    run_dir = run_dir or logs_dir(entry.suite)
    log = run_dir / f"{safe_name(entry.id)}.log"
    server, data_dir = start_groupd(PROTOCOL_SETTINGS[GROUP_PROTOCOL[entry.suite]] + SUITE_SETTINGS[entry.suite])
    try:
        conf = Path(data_dir) / "test.conf"
        conf.write_text(f"bootstrap.servers={server.bootstrap}\ntest.topic.random=true\n")
        env = {**os.environ, "RDKAFKA_TEST_CONF": str(conf), "LD_LIBRARY_PATH": "../src:../src-cpp",
               "TEST_KAFKA_VERSION": BROKER_VERSION[entry.suite], "TESTS": entry.target,
               "TEST_CONSUMER_GROUP_PROTOCOL": GROUP_PROTOCOL[entry.suite]}
        env.pop("SUBTESTS", None)
        if entry.subtests:
            env["SUBTESTS"] = entry.subtests
        rc, seconds = run_bounded(["./test-runner", "-p1", "-E", "-L"], cwd=tree() / "tests", env=env,
                                  timeout=entry.timeout, log_path=log)
    finally:
        stop_groupd(server, data_dir, keep_log=run_dir / f"{safe_name(entry.id)}.groupd.log")
    status, detail = verdict(log.read_text(errors="replace"), rc, entry)
    if status == "PASS" and GROUP_PROTOCOL[entry.suite] == "consumer":
        # a runner that ignored TEST_CONSUMER_GROUP_PROTOCOL would pass here on classic groups
        classic = _CLASSIC_JOIN.search((run_dir / f"{safe_name(entry.id)}.groupd.log").read_text(errors="replace"))
        if classic:
            status, detail = "FAIL", f"a classic group joined in a consumer-protocol run: {classic.group(0)}"
    return Result(entry, status, seconds, detail, str(log))


def _strip_prefix(text: str) -> str:
    """Lines without the runner's `[<test name> / <elapsed>] ` prefix."""
    return re.sub(r"^\[[^\]]*/\s*[0-9.]+s\] ", "", text, flags=re.M)


def verdict(output: str, rc: int | None, entry: Entry) -> tuple[str, str]:
    """PASS only when the runner exited 0, some test ran and passed, none failed, and — with a
    SUBTESTS filter — at least one subtest ran (a filter that matches nothing passes vacuously)."""
    text = _ANSI.sub("", output)
    tests = _TEST_LINE.findall(text)
    subtests = _SUBTEST_LINE.findall(text)
    failed = [name for name, s in tests if s == "FAILED"] + [name for name, s in subtests if s == "FAIL"]
    if rc is None:
        return "FAIL", f"timed out after {entry.timeout}s" + (f"; failed: {failed}" if failed else "")
    if failed:
        return "FAIL", f"failed: {', '.join(failed)} (rc {rc})"
    if rc != 0:
        return "FAIL", f"test-runner exited {rc}"
    ran = [name for name, s in tests if s == "PASSED"]
    if entry.subtests:
        passed = [name for name, s in subtests if s == "PASS"]
        started = [s for s in _SUBTEST_START.findall(_strip_prefix(text))
                   if not re.search(r": (PASS|FAIL|SKIP)\b", s)]
        if not passed and not (ran and started):
            skipped = [name for name, s in subtests if s == "SKIP"]
            return ("SKIP", f"skipped: {skipped}") if skipped else ("FAIL", "no subtest matched the filter")
        return "PASS", f"{max(len(passed), len(started))} subtest(s) passed"
    if not ran:
        skipped = [name for name, s in tests if s == "SKIPPED"]
        return ("SKIP", f"skipped: {skipped}") if skipped else ("FAIL", "no test ran")
    return "PASS", f"{len(ran)} test(s) passed"
