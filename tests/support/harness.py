"""Real clients as child processes that speak one JSON-lines contract (tests/clients/README.md):
confluent-kafka, kafka-python, aiokafka, the Java client, KafkaJS and @platformatic/kafka."""

from __future__ import annotations

import glob
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

from . import cds
from .process import ROOT, GroupdProcess

CLIENTS_DIR = os.environ.get("KAFKA_TEST_CLIENTS", os.path.expanduser("~/.cache/groupd-clients"))
PYTHON_TOOL = os.path.join(ROOT, "tests", "clients", "python", "client_tool.py")
NODE_TOOL = os.path.join(ROOT, "tests", "clients", "node", "client_tool.mjs")


def _java_command() -> list[str]:
    jars = os.pathsep.join(sorted(glob.glob(os.path.join(CLIENTS_DIR, "java", "lib", "*.jar"))))
    classes = os.path.join(CLIENTS_DIR, "java", "classes")
    return ["java", *_java_archive(jars), "-cp", f"{jars}{os.pathsep}{classes}", "ClientTool"]


def _java_archive(jars: str) -> list[str]:
    """Class-data sharing for the client jars (tests/support/cds.py; the JVM's options stay its defaults).
    The JVM archives no class directory, so the training runs ClientTool.java as a source file, with the
    jars only, as a member that joins a group of a groupd and commits; the tool's own classes then load
    from their directory, after the archived jars."""
    if not jars or (found := cds.flags(CLIENTS_DIR, jars, [])):
        return found if jars else []
    with tempfile.TemporaryDirectory() as tmp:
        server = GroupdProcess(tmp, "topics=t1:1", "group.initial.rebalance.delay.ms=0").start()
        try:
            cds.ensure(CLIENTS_DIR, jars, [], [os.path.join(ROOT, "tests", "clients", "java", "ClientTool.java"),
                                               "subscribe", server.bootstrap, "topic=t1", "group=cds-training",
                                               "seconds=3", "commit=true"])
        finally:
            server.stop()
    return cds.flags(CLIENTS_DIR, jars, [])


STACKS: dict[str, Callable[[], list[str]]] = {
    "confluent": lambda: [sys.executable, PYTHON_TOOL, "confluent"],
    "kafka-python": lambda: [sys.executable, PYTHON_TOOL, "kafka-python"],
    "aiokafka": lambda: [sys.executable, PYTHON_TOOL, "aiokafka"],
    "java": _java_command,
    "kafkajs": lambda: ["node", NODE_TOOL, "kafkajs"],
    "platformatic": lambda: ["node", NODE_TOOL, "platformatic"],
}


def stack_available(stack: str) -> str | None:
    """None when the stack can run here, else why not (the installer was not run)."""
    if stack == "java" and not os.path.isdir(os.path.join(CLIENTS_DIR, "java", "classes")):
        return f"Java client not installed under {CLIENTS_DIR} (run .ci/install-clients)"
    if stack in ("kafkajs", "platformatic") and not os.path.isdir(os.path.join(CLIENTS_DIR, "node", "node_modules")):
        return f"Node clients not installed under {CLIENTS_DIR} (run .ci/install-clients)"
    if stack == "sarama" and not os.path.exists(os.path.join(CLIENTS_DIR, "go", "saramagrp")):
        return f"sarama client not built under {CLIENTS_DIR} (run .ci/install-clients)"
    if stack in ("java",) and shutil.which("java") is None:
        return "java is not on PATH"
    return None


class ClientProcess:
    """One client tool run; its events are read on a thread and can be waited for."""

    def __init__(self, stack: str, mode: str, bootstrap: str, opts: dict[str, Any]) -> None:
        self.stack = stack
        if stack == "sarama":  # saramagrp BOOTSTRAP TOPIC GROUP SECONDS: a group member only
            args = [os.path.join(CLIENTS_DIR, "go", "saramagrp"), bootstrap, opts["topic"], opts["group"],
                    str(opts.get("seconds") or 300)]
        else:
            args = STACKS[stack]() + [mode, bootstrap] + [f"{k}={v}" for k, v in opts.items()]
        self.args = args
        self.events: list[dict] = []
        self._queue: queue.Queue = queue.Queue()
        self.stderr_path = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                        f"client-{stack}-{os.getpid()}-{id(self)}.log")
        self._stderr = open(self.stderr_path, "wb")
        env = {**os.environ, "KAFKA_TEST_CLIENTS": CLIENTS_DIR}
        self.proc = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.events.append(event)
            self._queue.put(event)
        self._queue.put(None)

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = 60.0) -> dict:
        """The first event from now on (or already seen) that satisfies `predicate`."""
        for event in list(self.events):
            if predicate(event):
                return event
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.stack}: no matching event in {timeout}s; events: {self.events}; "
                                   f"stderr tail: {self.stderr_tail()}")
            try:
                event = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if event is None:
                raise RuntimeError(f"{self.stack} exited ({self.proc.wait()}) before the event; "
                                   f"events: {self.events}; stderr tail: {self.stderr_tail()}")
            if predicate(event):
                return event

    def assignment(self) -> list[str] | None:
        """The assignment after the last assignment change seen, or None before the first."""
        current = None
        for e in self.events:
            if e["event"] == "assigned":
                current = sorted(e.get("assignment", e["partitions"]))
            elif e["event"] in ("revoked", "lost") and current is not None:
                current = sorted(set(current) - set(e["partitions"]))
        return current

    def errors(self) -> list[dict]:
        return [e for e in self.events if e["event"] == "error"]

    def stderr_tail(self, n: int = 2000) -> str:
        self._stderr.flush()
        with open(self.stderr_path, "rb") as f:
            return f.read()[-n:].decode(errors="replace")

    def close(self, timeout: float = 60.0) -> int:
        """Ask the client to leave the group cleanly (stdin closed, then SIGTERM) and wait."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                return self.proc.wait(timeout / 2)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout / 2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def wait(self, timeout: float = 120.0) -> int:
        return self.proc.wait(timeout)


def wait_until(check, timeout: float = 60.0, what: str = "condition", explain=None):
    """The first truthy value of `check()`, polled every 100 ms for up to `timeout` seconds. On a
    timeout, `explain()` (if given) says what was seen instead, for the failure message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f": {explain()}" if explain is not None else ""))
