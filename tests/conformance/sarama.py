"""Sarama's functional tests: the `functional_*_test.go` files of github.com/IBM/sarama@v1.61.1
(shipped in the Go module zip, build tag `functional`) compiled once into a test binary by
`.ci/install-sarama`, then run one test per invocation against a fresh groupd.

How they take a broker (sarama's functional_test.go): without TOXIPROXY_ADDR their TestMain starts
a five-broker Kafka under docker compose; with it, they take an existing cluster, ask that toxiproxy
for proxies `kafka1`..`kafka5` and talk to 127.0.0.1:29091..29095 (fixed addresses), and
KAFKA_VERSION says which broker features to expect. Here TOXIPROXY_ADDR names a stand-in for
toxiproxy's HTTP API (toxiproxy_standin.py) and groupd itself listens on 127.0.0.1:29091..29095
(five listeners of one broker), so one run at a time. Before any test, TestMain deletes and creates its topics (test.1, test.4, test.64,
…) with replication factor 3: groupd allows that with `default.replication.factor=3`, and the
topics keep one replica. Tests that disable a proxy, add a toxic or restart a broker fail at that
call (the stand-in refuses it), and those that need five brokers, a Java client inside the docker
containers or ZooKeeper cannot run here: the allowlist says which.
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

from . import franz_go
from .common import Entry, Result, install_once, logs_dir, run_bounded, safe_name, start_groupd, stop_groupd
from .toxiproxy_standin import FIRST_PORT, PROXIES, ToxiproxyStandIn

_TESTIFY = re.compile(r"^\s+Error:\s+(.+(?:\n\s{10,}\S.*)*)", re.M)


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as groupd binds: TIME_WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listener(i: int) -> str:
    return "PLAINTEXT" if i == 0 else f"SARAMA{i + 1}"


VERSION = "v1.61.1"
CLIENTS = Path(os.environ.get("KAFKA_TEST_CLIENTS", "~/.cache/groupd-clients")).expanduser()
KAFKA_VERSION = "4.3.1"  # the Kafka groupd follows; sarama's checkKafkaVersion skips tests for newer ones
# groupd listens on all five of sarama's addresses (one listener each, all plaintext): its clients pick
# a random seed, and the setup's metadata check asks the least loaded broker, a bare seed at first
SETTINGS = (
    "listeners=" + ",".join(f"{_listener(i)}://127.0.0.1:{FIRST_PORT + i}" for i in range(PROXIES)),
    "listener.security.protocol.map=" + ",".join(f"{_listener(i)}:PLAINTEXT" for i in range(PROXIES)),
    "default.replication.factor=3",
    # as sarama's docker-compose.yml sets its brokers (TestFuncClientMetadata expects unknown topics)
    "auto.create.topics.enable=false",
    "group.initial.rebalance.delay.ms=0",
)


def binary() -> Path:
    return CLIENTS / "go" / f"sarama-{VERSION}" / "sarama.test"


def ensure_built(say=print) -> tuple[Path, float]:
    """The functional test binary, built by .ci/install-sarama on first use (cached afterwards)."""
    started = time.monotonic()
    install_once("install-sarama", binary(), {"SARAMA_VERSION": VERSION, "KAFKA_TEST_CLIENTS": str(CLIENTS)},
                 say, f"sarama: building the functional tests {VERSION} into {binary().parent}")
    return binary(), time.monotonic() - started


def run_entry(entry: Entry, run_dir: Path | None = None) -> Result:
    run_dir = run_dir or logs_dir(entry.suite)
    log = run_dir / f"{safe_name(entry.id)}.log"
    busy = [p for p in range(FIRST_PORT, FIRST_PORT + PROXIES) if not _free(p)]
    if busy:  # another sarama run (or anything else) holds sarama's fixed addresses
        return Result(entry, "FAIL", 0.0, f"127.0.0.1 ports {busy} are in use: sarama's addresses are fixed", str(log))
    server, data_dir = start_groupd(SETTINGS, port=FIRST_PORT)
    try:
        with ToxiproxyStandIn() as toxiproxy:
            env = {**os.environ, "TOXIPROXY_ADDR": toxiproxy.address, "KAFKA_VERSION": KAFKA_VERSION}
            env.pop("DEBUG", None)
            args = [str(binary()), "-test.v", "-test.count=1", "-test.run", franz_go.run_pattern(entry),
                    "-test.timeout", f"{max(entry.timeout - 10, 10)}s"]
            rc, seconds = run_bounded(args, cwd=data_dir, env=env, timeout=entry.timeout, log_path=log)
            refused = list(toxiproxy.refused)
    finally:
        stop_groupd(server, data_dir, keep_log=run_dir / f"{safe_name(entry.id)}.groupd.log")
    # the Go test output reads as franz-go's does (`--- PASS: Name (1.2s)`)
    output = log.read_text(errors="replace")
    status, detail = franz_go.verdict(output, rc, entry)
    if status == "FAIL" and (m := _TESTIFY.search(output)):  # testify prints its message lines below
        detail += f": {' '.join(m.group(1).split())[:200]}"
    if refused and status != "PASS":
        detail += f"; toxiproxy stand-in refused: {', '.join(sorted(set(refused)))}"
    return Result(entry, status, seconds, detail, str(log))
