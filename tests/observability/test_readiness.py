"""Liveness and readiness of the real server: `GET /healthz` and `GET /ready` on the metrics
listener, `groupd health --ready` over the Kafka protocol, and the load's closing report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

from tests.support.process import ROOT, GroupdProcess, free_port


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def health(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupd.coordinator", "health", "--bootstrap", bootstrap, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def start(tmp_path, *settings: str, prepare=None) -> tuple[GroupdProcess, str]:
    port = free_port()
    data = tmp_path / "data"
    os.makedirs(data)
    if prepare:
        prepare(data)
    server = GroupdProcess(str(data), *settings, f"metrics.listener=http://127.0.0.1:{port}/metrics")
    return server.start(), f"http://127.0.0.1:{port}"


def test_ready_once_every_offsets_partition_is_loaded(tmp_path):
    server, http = start(tmp_path, "offsets.topic.num.partitions=7")
    try:
        assert get(http + "/healthz") == (200, {"status": "alive"})
        assert get(http + "/ready") == (200, {"status": "ready", "partitions": 7, "loaded": 7, "loading": 0,
                                              "failed": 0})
        r = health(server.bootstrap, "--ready")
        assert r.returncode == 0 and r.stdout.startswith(f"ready: {server.bootstrap}: 7 of 7 offsets partitions "
                                                         "loaded"), r.stdout + r.stderr
        assert "# TYPE groupd_members gauge" in urllib.request.urlopen(http + "/metrics", timeout=10).read().decode()
        log = server.log()
        assert re.search(r"offsets log loaded partitions=7 active=7 failed=0 groups=0 bytes=0 records=0 "
                         r"records_per_s=\d+ ms=\d+", log), log
    finally:
        assert server.stop() == 0


def test_a_partition_that_failed_to_load_keeps_the_server_not_ready(tmp_path):
    # a file where partition 3's directory belongs: that partition cannot load, the others can
    server, http = start(tmp_path, prepare=lambda data: (data / "__consumer_offsets-3").write_text("x"))
    try:
        assert get(http + "/healthz")[0] == 200  # alive and serving the other 49
        status, body = get(http + "/ready")
        assert (status, body["status"], body["loaded"], body["failed"]) == (503, "not ready", 49, 1)
        r = health(server.bootstrap, "--ready")
        assert r.returncode == 1 and r.stdout.strip() == \
            f"not ready: {server.bootstrap}: 49 of 50 offsets partitions loaded", r.stdout + r.stderr
        assert health(server.bootstrap).returncode == 0  # plain health: ApiVersions answers
    finally:
        server.stop()


def test_health_ready_fails_in_one_line_when_nothing_listens():
    r = health(f"127.0.0.1:{free_port()}", "--ready", "--timeout", "2")
    assert r.returncode == 1 and r.stdout.startswith("unhealthy: ") and len(r.stdout.splitlines()) == 1
    assert "Traceback" not in r.stderr
