"""Crash safety with the real server process: commits run continuously while groupd is killed
with SIGKILL at random moments and restarted; after every restart each acknowledged commit is
fetched back (the offset is >= the last acknowledged one, is an offset that was sent, and carries
the metadata sent with it), and no partition fails to load.

With records, producers also write to a data topic with acks=-1 during the storm, and after every
restart each data partition is fetched from offset 0: every acknowledged record is at its offset
with its value, the offsets have no gaps, no value is at two offsets and nothing read earlier changed.

The loop itself lives in bench/crash_loop.py (`python bench/crash_loop.py --cycles 300 [--records]`,
`make crash-loop` is the long version); these are the CI versions: a few cycles, each under a few
seconds.
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


def test_every_acknowledged_record_survives_kill_9(tmp_path):
    crash_loop = _crash_loop()
    stats = crash_loop.run(str(tmp_path / "data"), cycles=6, seed=None, records=True)  # raises on a lost record
    assert stats.cycles == 6
    assert stats.records_acked > 0 and stats.commits_acked > 0
    assert stats.records_checked >= stats.records_acked  # the final check read every one back


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


def test_the_records_checker_notices_a_lost_moved_duplicated_or_invented_record():
    """verify_records accepts a partition holding what was acknowledged (plus an unacknowledged batch
    that landed) and refuses each way a broken server could differ."""
    crash_loop = _crash_loop()

    def state(stored=None):
        s = crash_loop.RecordsState(sent={b"a": 0, b"b": 0, b"c": 0, b"z": 1},
                                    acked={(0, 0): b"a", (0, 1): b"b"})
        s.stored = dict(stored or {})
        return s

    def check(s, partition0, partition1=()) -> None:
        fetched = {0: list(enumerate(partition0)), 1: list(enumerate(partition1)),
                   **{p: [] for p in range(2, crash_loop.DATA_PARTITIONS)}}
        crash_loop.verify_records(s, fetched, crash_loop.Stats(), 1)

    check(state(), [b"a", b"b", b"c"])  # c was not acknowledged but landed: allowed
    cases = [
        (state(), [b"a"], (), "lost"),
        (state(), [b"b", b"a"], (), "acknowledged with"),
        (state(), [b"a", b"b", b"a"], (), "and at"),
        (state(), [b"a", b"b", b"q"], (), "never sent"),
        (state(), [b"a", b"b"], [b"c"], "never sent to that partition"),
        (state({0: [b"a", b"b", b"c"]}), [b"a", b"b"], (), "now gone"),
    ]
    for s, p0, p1, why in cases:
        try:
            check(s, p0, p1)
        except AssertionError as e:
            assert why in str(e), (why, str(e))
        else:
            raise AssertionError(f"verify_records accepted {p0} / {p1}")
    # a gap in the offsets
    gap = {0: [(0, b"a"), (2, b"b")], **{p: [] for p in range(1, crash_loop.DATA_PARTITIONS)}}
    try:
        crash_loop.verify_records(state(), gap, crash_loop.Stats(), 1)
    except AssertionError as e:
        assert "not 0..1" in str(e)
    else:
        raise AssertionError("verify_records accepted a gap")
