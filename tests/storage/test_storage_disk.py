"""A full disk under the offsets log (design "What bad input gets", spec §7.4 and §10.3): the real
server on a small tmpfs mounted for the test.

* commits whose write fails get NOT_COORDINATOR (KAFKA_STORAGE_ERROR as a coordinator maps it);
* the server keeps answering everything that does not write (ApiVersions, Metadata, Heartbeat,
  OffsetFetch);
* once space is freed, commits succeed again;
* after a restart every acknowledged commit is there and no failed one is, not even as a record
  in the log (`groupd log dump`), and `groupd log verify` finds every batch intact.

Needs root (or CAP_SYS_ADMIN) for `mount -t tmpfs`; without it the test fails and says so.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time

import pytest

from groupd.coordinator.core.partitioning import partition_for
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.process import ROOT, GroupdProcess, WireClient, join_and_sync

E = ErrorCode
GROUP, MEMBER_GROUP = "disk-full", "disk-full-members"
TMPFS_SIZE = "2m"


@pytest.fixture
def tmpfs(tmp_path):
    mountpoint = tmp_path / "tmpfs"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mountpoint)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"the full-disk test needs to mount a tmpfs (root or CAP_SYS_ADMIN): `mount -t tmpfs` exited "
                    f"{mounted.returncode}: {mounted.stderr.strip()}")
    try:
        yield str(mountpoint)
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def start(data_dir: str, log_path: str, port: int | None = None) -> GroupdProcess:
    server = GroupdProcess(data_dir, "topics=t:4", "group.initial.rebalance.delay.ms=0", port=port)
    server.log_path = log_path  # the server's own log must not live on the full disk
    since = len(server.log()) if os.path.exists(log_path) else 0
    server.start()
    deadline = time.monotonic() + 30
    while "offsets log loaded" not in server.log()[since:]:
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.02)
    return server


def commit(c: WireClient, group: str, partition: int, offset: int, metadata: str = "") -> ErrorCode:
    reply = c.request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": partition, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": metadata}]}]})
    return reply.topics[0].partitions[0].error_code


def fetch(c: WireClient, group: str) -> dict[int, int]:
    reply = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                               "require_stable": False})
    assert reply.groups[0].error_code is E.none, reply
    return {p.partition_index: p.committed_offset for t in reply.groups[0].topics for p in t.partitions}


def fill(path: str) -> None:
    """Write `path` until the file system has no byte left."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1 << 8, 1):
            while True:
                try:
                    if f.write(b"\0" * chunk) < chunk:
                        break
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break


def dump_offsets(data_dir: str, group: str) -> list[int]:
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", "dump", "--data-dir", data_dir,
                          "--partition", str(partition_for(group, 50))],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line["offset"] for line in map(json.loads, out.stdout.splitlines())
            if line.get("group") == group and line["type"] == "offset_commit" and not line["tombstone"]]


def api_versions_ok(c: WireClient) -> bool:
    return c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "disk-test",
                                              "client_software_version": "1"}).error_code is E.none


def metadata_ok(c: WireClient) -> bool:
    reply = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "t", "topic_id": None}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
    return [(t.name, t.error_code, len(t.partitions)) for t in reply.topics] == [("t", E.none, 4)]


@pytest.mark.parametrize("metadata_size", [0, 3000])
def test_full_disk_fails_commits_cleanly_and_recovers_when_space_is_freed(tmpfs, tmp_path, metadata_size):
    data_dir = os.path.join(tmpfs, "data")
    log_path = str(tmp_path / "groupd.log")
    assert partition_for(GROUP, 50) != partition_for(MEMBER_GROUP, 50)
    server = start(data_dir, log_path)
    acked: dict[int, int] = {}  # partition → last acknowledged offset
    failed: list[int] = []
    offsets = iter(range(1, 1 << 30))
    metadata = "m" * metadata_size
    try:
        with WireClient(server.bootstrap) as c:
            member_id, generation = join_and_sync(c, MEMBER_GROUP)
            for p in range(4):
                offset = next(offsets)
                assert commit(c, GROUP, p, offset, metadata) is E.none
                acked[p] = offset

            filler = os.path.join(tmpfs, "filler")
            fill(filler)
            errors = []
            for attempt in range(2000):  # the segment's last page fills up, then writes fail
                p, offset = attempt % 4, next(offsets)
                error = commit(c, GROUP, p, offset, metadata)
                if error is E.none:
                    acked[p] = offset
                else:
                    errors.append(error)
                    failed.append(offset)
                    if len(failed) >= 12:
                        break
            assert failed, "no commit failed on a full disk"
            assert set(errors) == {E.not_coordinator}, errors
            assert "write failed partition=" in server.log()

            # nothing that does not write is affected
            assert api_versions_ok(c)
            assert metadata_ok(c)
            assert c.request(ApiKey.HEARTBEAT, 4, {"group_id": MEMBER_GROUP, "generation_id": generation,
                                                   "member_id": member_id, "group_instance_id": None}
                             ).error_code is E.none
            assert fetch(c, GROUP) == acked  # failed commits changed nothing in memory

            os.remove(filler)
            for p in range(4):
                offset = next(offsets)
                assert commit(c, GROUP, p, offset, metadata) is E.none, "commits succeed once space is free"
                acked[p] = offset
            assert fetch(c, GROUP) == acked
    finally:
        assert server.stop() == 0, server.log()

    verify = subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", "verify", "--data-dir", data_dir],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout
    in_log = dump_offsets(data_dir, GROUP)
    assert not set(in_log) & set(failed), f"failed commits were written to the log: {sorted(set(in_log) & set(failed))}"
    assert in_log == sorted(in_log), "log offsets and commit order agree"

    server = start(data_dir, log_path, port=server.port)
    try:
        with WireClient(server.bootstrap) as c:
            assert fetch(c, GROUP) == acked
    finally:
        server.stop()
