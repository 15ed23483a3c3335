"""Fuzzing a real groupd process with mutated captures of real requests (issue 10): after every
burst the process is alive, answers a fresh client, holds bounded memory, and never logged a
traceback. The long run is `make fuzz` (bench/fuzz.py)."""

from __future__ import annotations

import pytest

from tests.support.fuzz_frames import Mutator, corpus, fresh_client_seconds, rss_mb, send_burst
from tests.support.process import GroupdProcess

SEED = 20261123
BURSTS = 10
FRAMES_PER_BURST = 4000
RSS_BOUND_MB = 300


@pytest.fixture
def fuzzed(tmp_path):
    server = GroupdProcess(str(tmp_path), "topics=golden-a:2,golden-existing:1",
                           "group.initial.rebalance.delay.ms=0").start()
    yield server
    server.stop()


def test_mutated_requests_never_kill_stall_or_bloat_the_server(fuzzed):
    mutator = Mutator(SEED, corpus())
    sent = 0
    for burst in range(BURSTS):
        stats = send_burst(fuzzed.port, mutator, FRAMES_PER_BURST, per_connection=8)
        sent += stats.frames
        assert fuzzed.alive(), f"groupd died in burst {burst}:\n{fuzzed.log()[-3000:]}"
        assert fresh_client_seconds(fuzzed.bootstrap) < 3, f"burst {burst}"  # generous: a hang check
        assert rss_mb(fuzzed.proc.pid) < RSS_BOUND_MB, f"burst {burst}"
    assert sent == BURSTS * FRAMES_PER_BURST
    assert "Traceback" not in fuzzed.log()
