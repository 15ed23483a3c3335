"""kafka-python's integration tests (conformance.md §2): the `test/` folder of the PyPI sdist
kafka-python==3.0.12, plus the two files the sdist leaves out (`test/__init__.py`, and a minimal
`test/service.py` of our own), run in a venv of their own against a groupd started here.

Pointing: KAFKA_URI=tcp://host:port (external fixture), KAFKA_VERSION (without it every
integration test skips), KAFKA_ROOT=<any directory> (the fixture insists on one even when
external). groupd runs with node.id=0: the suite's CreatePartitions test assigns replicas to
broker 0. The venv and the sdist are cached under ~/.cache/groupd-conformance/.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .common import CACHE, Entry, Result, logs_dir, run_bounded, start_groupd, stop_groupd, tail

VERSION = "3.0.12"
KEY = f"kafka-python-{VERSION}"
KAFKA_VERSION = "4.0.0"  # what the suite gates tests and client api_version on
REQUIREMENTS = [f"kafka-python=={VERSION}", "pytest>=8", "pytest-mock", "pytest-timeout"]

SERVICE_SHIM = '''\
"""Missing from the kafka-python sdist; groupd's stand-in: only the external-broker path is used."""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def dump_logs(self):
        pass

    def stop(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("groupd's conformance run sets KAFKA_URI: no broker is spawned")
'''


def home() -> Path:
    return CACHE / KEY


def ready() -> bool:
    return (home() / ".complete").exists()


def ensure_env(say=print) -> tuple[Path, float]:
    started = time.monotonic()
    if ready():
        return home(), time.monotonic() - started
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{KEY}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return home(), time.monotonic() - started
        say(f"kafka-python: venv and sdist {VERSION} into {home()}")
        final = home()  # built in place (a venv's scripts carry its path); complete once marked
        if final.exists():
            shutil.rmtree(final)
        final.mkdir()
        log = final / "setup.log"
        _step([sys.executable, "-m", "venv", str(final / "venv")], log)
        pip = [str(final / "venv" / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
        _step(pip + ["install", *REQUIREMENTS], log)
        for stale in CACHE.glob(f"{KEY}.sdist-*"):  # left by a setup that was killed (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        sdist = Path(tempfile.mkdtemp(prefix=f"{KEY}.sdist-", dir=CACHE))
        try:
            _step(pip + ["download", "--no-deps", "--no-binary", ":all:", f"kafka-python=={VERSION}",
                         "-d", str(sdist)], log)
            (archive,) = sdist.glob("kafka_python-*.tar.gz")
            with tarfile.open(archive) as tar:
                try:
                    tar.extractall(sdist, filter="data")
                except TypeError:  # Python < 3.11.4 has no extraction filters
                    tar.extractall(sdist)
            src = sdist / f"kafka_python-{VERSION}"
            run = final / "run"
            run.mkdir()
            shutil.copytree(src / "test", run / "test")
            shutil.copy(src / "pyproject.toml", run / "pyproject.toml")  # pytest addopts: --timeout=300
        finally:
            shutil.rmtree(sdist, ignore_errors=True)
        (run / "test" / "__init__.py").touch()  # else the stdlib's `test` package shadows it
        (run / "test" / "service.py").write_text(SERVICE_SHIM)
        (run / "kafka-root").mkdir()
        (final / ".complete").write_text(f"kafka-python {VERSION}\n")
    return home(), time.monotonic() - started


def _step(args: list[str], log: Path) -> None:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(args)}\n".encode())
        out.flush()
        rc = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    if rc != 0:
        raise RuntimeError(f"kafka-python setup step failed ({rc}): {' '.join(args)}\n{tail(log, 4000)}")


def run_entries(entries: list[Entry], run_dir: Path | None = None) -> list[Result]:
    """One pytest run of the suite for all `entries` against one fresh groupd; a result each."""
    if not entries:
        return []
    run_dir = run_dir or logs_dir("kafka-python")
    run_dir.mkdir(parents=True, exist_ok=True)
    log, xml = run_dir / "pytest.log", run_dir / "junit.xml"
    xml.unlink(missing_ok=True)
    # the authorizer settings of the suite's own broker (test/integration/fixtures.py, Kafka 4.x)
    server, data_dir = start_groupd(("node.id=0", "authorizer.class.name=org.apache.kafka.metadata.authorizer."
                                     "StandardAuthorizer", "allow.everyone.if.no.acl.found=true"))
    try:
        env = {**os.environ, "KAFKA_URI": f"tcp://{server.bootstrap}", "KAFKA_VERSION": KAFKA_VERSION,
               "KAFKA_ROOT": str(home() / "run" / "kafka-root")}
        for var in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS"):
            env.pop(var, None)
        args = [str(home() / "venv" / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider",
                "-W", "ignore::DeprecationWarning", "-q", "-rfEs", f"--junitxml={xml}"]
        args += [f"test/integration/{e.target}" for e in entries]
        budget = sum(e.timeout for e in entries)
        rc, seconds = run_bounded(args, cwd=home() / "run", env=env, timeout=budget, log_path=log)
    finally:
        stop_groupd(server, data_dir, keep_log=run_dir / "groupd.log")
    outcomes = _junit(xml)
    results = []
    for e in entries:
        status, secs, detail = outcomes.get(e.target.split("::")[-1], ("FAIL", 0.0, "no result (pytest rc "
                                                                        f"{rc}, see {log})"))
        results.append(Result(e, status, secs, detail, str(log)))
    return results


def _junit(path: Path) -> dict[str, tuple[str, float, str]]:
    if not path.exists():
        return {}
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        seconds = float(case.get("time", 0) or 0)
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            out[name] = ("FAIL", seconds, (failure.get("message") or "")[:300])
        elif skipped is not None:
            out[name] = ("SKIP", seconds, (skipped.get("message") or "")[:300])
        else:
            out[name] = ("PASS", seconds, "")
    return out
