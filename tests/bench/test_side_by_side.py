"""bench/side_by_side.py end to end at toy sizes against the echo server only (seconds; Apache Kafka and
groupd legs run in the benchmark itself, not here): it exits 0, and every measure the echo server takes
has a number in the table, while the ones it cannot take (formation, fetch) show "-"."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "side_by_side.py")


def test_echo_only_run_prints_the_table(tmp_path):
    out = subprocess.run([sys.executable, SCRIPT, "--targets", "echo", "--repeat", "1", "--members", "8",
                          "--groups", "2", "--form-sizes", "5", "--seconds", "0.2", "--warmup", "0.1",
                          "--commit-connections", "2", "--produce-mb", "0.2", "--pin", "",
                          "--json", str(tmp_path / "runs.json")], check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.stdout.split("min-max")[0].splitlines() if line.startswith("| ")}
    assert rows["classic heartbeats/s, 8 members in 2 groups"][0] != "-"
    assert rows["durable commits/s, 1 partition, 2 connections"][0] != "-"
    assert rows["start-up to ready, s"][0] != "-"
    assert rows["group formation, 5 members, ms"] == ["-"]
    assert rows["fetch MB/s (1 connection)"] == ["-"]
    saved = json.loads((tmp_path / "runs.json").read_text())
    assert saved["failures"] == [] and saved["values"]["hb_s"]["echo"][0] > 0
