"""Class-data sharing for the tests' short-lived JVMs (Kafka's CLI tools, the Java client tool).

A tool's JVM spends most of its start loading, parsing and verifying the same few thousand classes from
the jars; a dynamic CDS archive of them (JDK 13+: -XX:ArchiveClassesAtExit, then -XX:SharedArchiveFile)
maps them ready-made and halves each start's CPU and wall time. The archive is made once per
(java, classpath, JVM options) by a training run whose output is discarded, and cached under
`<cache>/cds/`; jars, JDK or options that change give another key, so another archive. It changes no
behaviour: a class it lacks loads from the jars as before, and an archive the JVM refuses (it checks the
jars' sizes and times itself) is ignored. The JVM's `cds` log lines are switched off, so a tool's
output, which the differential tests compare, is the same with or without one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence

QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
_lock = threading.Lock()
_tried: set[str] = set()  # keys trained (or failed to) in this process: a failed training is not retried


def _key(classpath: str, jvm: Sequence[str]) -> str:
    java = os.path.realpath(shutil.which("java") or "java")
    parts = [java, str(os.path.getmtime(java)) if os.path.exists(java) else "", *jvm]
    for entry in classpath.split(os.pathsep):
        st = os.stat(entry) if os.path.exists(entry) else None
        parts.append(f"{entry}:{st.st_size if st else ''}:{st.st_mtime_ns if st else ''}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def archive(cache: str, classpath: str, jvm: Sequence[str]) -> str:
    return os.path.join(cache, "cds", f"{_key(classpath, jvm)}.jsa")


def flags(cache: str, classpath: str, jvm: Sequence[str]) -> list[str]:
    """The options that map the archive for this classpath and these options, [] while there is none."""
    path = archive(cache, classpath, jvm)
    return [f"-XX:SharedArchiveFile={path}", *QUIET] if os.path.exists(path) else []


def ensure(cache: str, classpath: str, jvm: Sequence[str], training: Sequence[str], timeout: float = 120) -> None:
    """Make the archive unless it exists: run `java <jvm> -cp <classpath> <training...>` (its output does
    not matter: what it loaded is archived when it exits 0), then check that a JVM starts with it. Several test processes may train at
    once: each writes its own file and renames it into place, so a JVM never maps a half-written one."""
    path = archive(cache, classpath, jvm)
    with _lock:
        if os.path.exists(path) or path in _tried or shutil.which("java") is None:
            return
        _tried.add(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            trained = subprocess.run(["java", *jvm, f"-XX:ArchiveClassesAtExit={partial}", *QUIET, "-cp", classpath,
                                      *training], check=False, timeout=timeout, **quiet)
            # a damaged archive crashes the JVM that maps it (SIGBUS): keep only one a JVM started with
            if trained.returncode == 0 and os.path.exists(partial) and subprocess.run(
                    ["java", *jvm, f"-XX:SharedArchiveFile={partial}", *QUIET, "-cp", classpath, "-version"],
                    check=False, timeout=timeout, **quiet).returncode == 0:
                os.replace(partial, path)
        except (OSError, subprocess.SubprocessError):
            pass  # no archive: the JVMs start as they did without one
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
