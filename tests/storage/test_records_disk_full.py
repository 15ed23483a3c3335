"""A full disk under the disk records plane (issue 22 "Bounded everything"): the real server on a
small tmpfs. A Produce whose write fails gets KAFKA_STORAGE_ERROR for that partition, with one log
line, and changes nothing: the offsets it would have taken are given to the next batch, nothing of
it is ever read back; the server keeps serving reads of every partition; once space is freed the
same partition takes writes again, and after a restart exactly the acknowledged batches are there.

Needs root (or CAP_SYS_ADMIN) for `mount -t tmpfs` (the fixture of test_storage_disk.py)."""

from __future__ import annotations

import os

from groupd.protocol import ErrorCode as E
from tests.storage.test_records_plane import batch, batches_of, fetch, list_offset, produce
from tests.storage.test_storage_disk import fill, tmpfs  # noqa: F401 (the fixture)
from tests.support.process import GroupdProcess, WireClient


def start(data_dir: str, log_path: str, port: int | None = None) -> GroupdProcess:
    s = GroupdProcess(data_dir, "records.plane=disk", "topics=d:2", port=port)
    s.log_path = log_path  # the server's own log must not live on the full disk
    return s.start()


def test_a_full_disk_fails_that_produce_alone_and_changes_nothing(tmpfs, tmp_path):  # noqa: F811
    log_path = str(tmp_path / "groupd.log")
    s = start(tmpfs, log_path)
    try:
        with WireClient(s.bootstrap) as c:
            for p in (0, 1):
                assert produce(c, "d", p, batch(2)).error_code is E.none
            fill(os.path.join(tmpfs, "filler"))
            big = batch(50, value=b"x" * 1000)
            failed = produce(c, "d", 0, big)
            assert failed.error_code is E.kafka_storage_error, failed
            assert s.log().count("write failed partition=d-0") == 1
            # reads of every partition keep being served, and see nothing of the failed batch
            for p in (0, 1):
                f = fetch(c, "d", p, 0)
                assert (f.error_code, f.high_watermark) == (E.none, 2)
                assert [b.base_offset for b in batches_of(f.records)] == [0]
            assert list_offset(c, "d", 0, -1).offset == 2
            os.remove(os.path.join(tmpfs, "filler"))
            again = produce(c, "d", 0, batch(3))
            assert (again.error_code, again.base_offset) == (E.none, 2)  # the failed batch took no offsets
        assert s.stop() == 0, s.log()
        s = start(tmpfs, log_path, s.port)
        with WireClient(s.bootstrap) as c:
            f = fetch(c, "d", 0, 0)
            assert [(b.base_offset, b.next_offset) for b in batches_of(f.records)] == [(0, 2), (2, 5)]
            assert fetch(c, "d", 1, 0).high_watermark == 2
    finally:
        s.stop()
