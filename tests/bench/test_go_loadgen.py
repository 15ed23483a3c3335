"""The compiled load generator (bench/loadgen-go) drives real servers: the echo server's replies and
groupd's ApiVersions answers come back in order and are counted, and a wrong error code in a reply
is counted as an error (the check the heartbeat benchmark relies on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.process import GroupdProcess, free_port

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
sys.path.insert(0, BENCH)

import go_loadgen  # noqa: E402
from kafka_requests import REQUESTS, request_type  # noqa: E402


@pytest.fixture
def echo_port():
    port = free_port()
    p = subprocess.Popen([sys.executable, os.path.join(BENCH, "echo_server.py"), "--port", str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"  # printed once it listens
        yield port
    finally:
        p.kill()
        p.wait(10)


def test_closed_loop_against_the_echo_server(echo_port):
    frame = REQUESTS["apiversions"][0](0)
    r = go_loadgen.run([(echo_port, frame)] * 4, depth=2, warmup=0.2, seconds=0.5, check_offset=0)
    assert r["connections"] == 4 and r["errors"] == 0 and r["done"] > 0
    assert r["p50_us"] is not None and r["p99_us"] >= r["p50_us"]


def test_replies_are_checked_against_groupd(tmp_path):
    """ApiVersions v3 answers NONE; a version groupd does not speak answers UNSUPPORTED_VERSION (35),
    which the driver counts as an error per reply."""
    server = GroupdProcess(str(tmp_path)).start()
    try:
        port = int(server.bootstrap.rsplit(":", 1)[1])
        good = go_loadgen.run([(port, REQUESTS["apiversions"][0](0))], depth=1, warmup=0.1, seconds=0.3,
                              check_offset=0)
        bad = go_loadgen.run([(port, request_type(18, 99, b"", flexible=False)(0))], depth=1, warmup=0.1,
                             seconds=0.3, check_offset=0)
    finally:
        assert server.stop() == 0, server.log()
    assert good["errors"] == 0 and good["done"] > 0
    assert bad["done"] > 0 and bad["errors"] >= bad["done"]
