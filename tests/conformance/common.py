"""What the suites share: the cache, the allowlists, the findings file, the groupd they run
against, and the result of one test."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.process import GroupdProcess

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("GROUPD_CONFORMANCE_CACHE", "~/.cache/groupd-conformance")).expanduser()
LOGS_ROOT = CACHE / "logs"
KEEP_RUNS = 5
FINDINGS = HERE / "FINDINGS.md"
STATUSES = ("PASS", "FAIL", "SKIP")
TIERS = ("ci", "full")

# The server the suites talk to: the records plane on, auto-create with 4 partitions (the suites'
# default scenario), a short initial-rebalance delay and session timeouts as low as the tests use
# (librdkafka's go down to 5000 ms, kafka-python's test_group to 3000 ms).
GROUPD_SETTINGS = (
    "records.plane=memory",
    "num.partitions=4",
    "auto.create.topics.enable=true",
    "group.initial.rebalance.delay.ms=300",
    "group.min.session.timeout.ms=1000",
    "log.level=info",
)


@dataclasses.dataclass(frozen=True)
class Entry:
    suite: str  # "librdkafka", "librdkafka-consumer" (its KIP-848 run), "librdkafka-share", "kafka-python",
               # "franz-go", "sarama", "java-verifiable", "kafka-streams"
    id: str
    target: str  # librdkafka: the TESTS value; kafka-python: the pytest node id; franz-go: the Go test
    subtests: str | None  # librdkafka: the SUBTESTS value; franz-go: the subtest part of -test.run
    tier: str  # "ci": run in CI; "full": only in `make conformance-full`
    expect: str  # PASS, FAIL or SKIP
    timeout: int  # seconds


@dataclasses.dataclass
class Result:
    entry: Entry
    status: str
    seconds: float
    detail: str = ""
    log: str = ""

    @property
    def as_expected(self) -> bool:
        return self.status == self.entry.expect


_run_logs: Path | None = None


def logs_dir(suite: str) -> Path:
    """This process's log directory for `suite`: one directory per run (runs may overlap), the
    oldest beyond KEEP_RUNS removed unless their process still runs (its tests still write there)."""
    global _run_logs
    if _run_logs is None:
        LOGS_ROOT.mkdir(parents=True, exist_ok=True)
        runs = sorted(p for p in LOGS_ROOT.iterdir() if p.is_dir())
        for old in runs[:-KEEP_RUNS]:
            if not _running(old.name.rsplit("-", 1)[-1]):
                shutil.rmtree(old, ignore_errors=True)
        _run_logs = LOGS_ROOT / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    path = _run_logs / suite
    path.mkdir(parents=True, exist_ok=True)
    return path


def _running(pid: str) -> bool:
    """Whether the process that named a run directory `<time>-<pid>` is alive."""
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_allowlist(suite: str) -> list[Entry]:
    """`tests/conformance/<suite>.allowlist`: one test per line,
    `id  target  subtests|-  tier  expect  [timeout]`; `#` starts a comment."""
    entries = []
    path = HERE / f"{suite}.allowlist"
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) not in (5, 6) or parts[3] not in TIERS or parts[4] not in STATUSES:
            raise ValueError(f"{path.name}:{n}: expected `id target subtests|- ci|full PASS|FAIL|SKIP [timeout]`")
        entries.append(Entry(suite, parts[0], parts[1], None if parts[2] == "-" else parts[2], parts[3],
                             parts[4], int(parts[5]) if len(parts) == 6 else 300))
    ids = [e.id for e in entries]
    duplicated = {i for i in ids if ids.count(i) > 1}
    if duplicated:
        raise ValueError(f"{path.name}: duplicated ids {sorted(duplicated)}")
    return entries


def select(entries: list[Entry], tier: str, only: list[str] | None = None) -> list[Entry]:
    keep = ("ci",) if tier == "ci" else TIERS
    return [e for e in entries if e.tier in keep and (not only or any(o in e.id for o in only))]


_FINDING = re.compile(r"^### (?P<suite>librdkafka-consumer|librdkafka-share|librdkafka|kafka-python|franz-go|"
                      r"sarama|java-verifiable|kafka-streams) (?P<ids>.+?)\s*$")


def read_findings() -> dict[tuple[str, str], dict[str, str]]:
    """`### <suite> <id>[, <id>...]` headings in FINDINGS.md, each followed by `- **Kind**:` and
    `- **Reason**:` lines (one entry may explain several tests)."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    current = None
    for line in FINDINGS.read_text().splitlines():
        m = _FINDING.match(line)
        if m:
            current = {}
            for test_id in re.split(r"[,\s]+", m["ids"].replace("`", "")):
                if test_id:
                    out[(m["suite"], test_id)] = current
            continue
        if line.startswith("## "):
            current = None
        if current is not None:
            f = re.match(r"^- \*\*(\w+)\*\*:\s*(.+)$", line)
            if f:
                current[f.group(1).lower()] = f.group(2).strip()
    return out


KINDS = ("groupd gap", "not copied", "coordinator bug", "suite limitation")


def finding_problem(entry: Entry, findings: dict) -> str | None:
    """Why the findings file does not explain a test expected to FAIL or SKIP, or None."""
    if entry.expect == "PASS":
        return None
    f = findings.get((entry.suite, entry.id))
    if f is None:
        return f"no `### {entry.suite} {entry.id}` entry in FINDINGS.md"
    if f.get("kind") not in KINDS:
        return f"FINDINGS.md {entry.suite} {entry.id}: `- **Kind**:` must be one of {', '.join(KINDS)}"
    if len(f.get("reason", "")) < 30:
        return f"FINDINGS.md {entry.suite} {entry.id}: `- **Reason**:` must say what Kafka does and what groupd does"
    return None


def install_once(script: str, product: Path, env: dict[str, str], say, what: str) -> None:
    """Run `.ci/<script>` (with `env` added) unless `product` is there: the suites' installs cache what
    they build, so only a first run pays for it."""
    if product.exists():
        return
    say(what)
    out = subprocess.run([str(HERE.parent.parent / ".ci" / script)], env={**os.environ, **env},
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0 or not product.exists():
        raise RuntimeError(f"{script} failed ({out.returncode}):\n{out.stderr[-4000:]}")


def start_groupd(extra: tuple[str, ...] = (), port: int | None = None) -> tuple[GroupdProcess, str]:
    data_dir = tempfile.mkdtemp(prefix="groupd-conformance-")
    server = GroupdProcess(data_dir, *GROUPD_SETTINGS, *extra, port=port)
    server.start()
    return server, data_dir


def stop_groupd(server: GroupdProcess, data_dir: str, keep_log: Path | None = None) -> None:
    server.stop()
    if keep_log is not None:
        keep_log.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(server.log_path, keep_log)
    shutil.rmtree(data_dir, ignore_errors=True)


def run_bounded(args: list[str], *, cwd: str | Path, env: dict, timeout: float, log_path: Path) -> tuple[int | None, float]:
    """Run a command in its own process group with output to `log_path`; kill the whole group at
    `timeout`. (return code or None on timeout, seconds)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, time.monotonic() - started


def tail(path: Path | str, n: int = 3000) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    return data[-n:].decode(errors="replace")


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)
