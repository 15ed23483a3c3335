"""Crash safety with the real server process: commits run continuously while groupd is killed
with SIGKILL at random moments and restarted; after every restart each acknowledged commit is
fetched back (the offset is >= the last acknowledged one, is an offset that was sent, and carries
the metadata sent with it), and no partition fails to load.

The loop itself lives in bench/crash_loop.py (`python bench/crash_loop.py --cycles 300` is the
long version); this is the CI version: 8 cycles, each under a few seconds.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from tests.support.process import ROOT


def _crash_loop():
    spec = importlib.util.spec_from_file_location("crash_loop", os.path.join(ROOT, "bench", "crash_loop.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_loop"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_acknowledged_commit_survives_kill_9(tmp_path):
    crash_loop = _crash_loop()
    stats = crash_loop.run(str(tmp_path / "data"), cycles=8, seed=None)  # raises on a lost commit
    assert stats.cycles == 8
    assert stats.commits_acked > 0
    # the loop exercised what it claims to: both flush modes (cycles alternate) and compactions
    assert stats.compactions > 0, "small segments and an eager cleaner make compactions run between kills"


def test_the_checker_notices_a_lost_commit():
    """The verification the loop relies on fails when an acknowledged offset is missing, lower, or
    was never sent (so a broken server cannot pass the test above by accident)."""
    crash_loop = _crash_loop()
    key = ("g", "t", 0)
    stats = crash_loop.Stats()

    def state(acked: int, sent: dict[int, str]):
        ks = crash_loop.KeyState(sent=dict(sent), acked=acked)
        return {key: ks}

    crash_loop.verify(state(5, {3: "m3", 5: "m5", 7: "m7"}), {key: (7, "m7")}, stats, 1)  # a later one landed
    for fetched, why in [({}, "nothing is committed"), ({key: (3, "m3")}, "lost"),
                         ({key: (6, "m6")}, "never sent"), ({key: (5, "other")}, "metadata")]:
        try:
            crash_loop.verify(state(5, {3: "m3", 5: "m5"}), fetched, stats, 1)
        except AssertionError as e:
            assert why in str(e)
        else:
            raise AssertionError(f"verify accepted {fetched}")
