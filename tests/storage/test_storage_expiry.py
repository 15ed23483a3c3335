"""Offset retention on the real server (spec §11): an offset committed with an explicit retention
(OffsetCommit v2 `retention_time`) is tombstoned by the periodic expiry task once it has expired,
and the simple group it belonged to is deleted with it; an offset without one is kept. The
tombstones are in the log (`groupd log dump`) and survive a restart.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time

from groupd.coordinator.core.partitioning import partition_for
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.process import ROOT, GroupdProcess, WireClient

E = ErrorCode
SHORT, KEPT = "expiry-short", "expiry-kept"


def commit_v2(c: WireClient, group: str, offset: int, retention_ms: int) -> ErrorCode:
    reply = c.request(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "retention_time": datetime.timedelta(milliseconds=retention_ms),
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                 "committed_metadata": "m"}]}]})
    return reply.topics[0].partitions[0].error_code


def fetched_offset(c: WireClient, group: str) -> int:
    reply = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
        {"name": "t", "partition_indexes": [0]}]}], "require_stable": False})
    (g,) = reply.groups
    assert g.error_code is E.none
    return g.topics[0].partitions[0].committed_offset


def listed(c: WireClient) -> set[str]:
    reply = c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert reply.error_code is E.none
    return {g.group_id for g in reply.groups}


def dump(data_dir: str, group: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", "dump", "--data-dir", data_dir,
                          "--partition", str(partition_for(group, 50))],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line for line in map(json.loads, out.stdout.splitlines()) if line.get("group") == group]


def wait_loaded(c: WireClient) -> None:
    """ListGroups answers COORDINATOR_LOAD_IN_PROGRESS until every partition is loaded."""
    deadline = time.monotonic() + 30
    while c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []}).error_code is E.coordinator_load_in_progress:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_offset_with_explicit_retention_is_tombstoned_and_its_simple_group_deleted(tmp_path):
    data_dir = str(tmp_path / "data")
    server = GroupdProcess(data_dir, "topics=t:1", "offsets.retention.check.interval.ms=500").start()
    try:
        with WireClient(server.bootstrap) as c:
            wait_loaded(c)
            assert commit_v2(c, SHORT, 42, retention_ms=1000) is E.none
            assert commit_v2(c, KEPT, 7, retention_ms=-1) is E.none  # the broker's retention: 7 days
            assert fetched_offset(c, SHORT) == 42
            assert listed(c) >= {SHORT, KEPT}

            # ListGroups reads the group's latest state, OffsetFetch the offsets at the last durable
            # write: the group leaves the listing up to one flush before its offset's tombstone is read
            deadline = time.monotonic() + 30
            while SHORT in listed(c) or fetched_offset(c, SHORT) != -1:
                assert time.monotonic() < deadline, server.log()
                time.sleep(0.1)
            assert SHORT not in listed(c)
            assert fetched_offset(c, KEPT) == 7
            assert KEPT in listed(c)
        p = partition_for(SHORT, 50)
        assert f"expired partition={p} offsets=1 groups=1" in server.log()
    finally:
        assert server.stop() == 0, server.log()

    records = dump(data_dir, SHORT)
    assert [(r["type"], r["tombstone"]) for r in records] == [
        ("offset_commit", False), ("offset_commit", True), ("group_metadata", True)]
    first = records[0]
    assert (first["offset"], first["expire_timestamp"] - first["commit_timestamp"]) == (42, 1000)
    assert records[1]["timestamp"] >= first["expire_timestamp"], "tombstoned no earlier than it expired"
    assert [(r["type"], r["tombstone"]) for r in dump(data_dir, KEPT)] == [("offset_commit", False)]

    server = GroupdProcess(data_dir, "topics=t:1", port=server.port).start()
    try:
        with WireClient(server.bootstrap) as c:
            wait_loaded(c)
            assert fetched_offset(c, SHORT) == -1
            assert listed(c) == {KEPT}
    finally:
        server.stop()
