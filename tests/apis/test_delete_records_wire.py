"""DeleteRecords (21) on the raw wire against the real server, on both records planes: the log start moves
to the offset asked (-1: the high watermark) and is answered as the low watermark; past the high
watermark is OFFSET_OUT_OF_RANGE; at or below the log start changes nothing; Fetch below the new start is
OFFSET_OUT_OF_RANGE, ListOffsets earliest and the log-start gauge answer it; unknown partitions,
`__consumer_offsets`, compacted topics, a topic without DELETE and another worker's partition get Kafka's
errors; on disk the new start is saved before the answer and survives SIGTERM and kill -9, and the closed
segments wholly below it are deleted."""

from __future__ import annotations

import datetime
import os
import signal
import urllib.request
import uuid

import pytest

from groupd.coordinator.apis import SUPPORTED_VERSIONS
from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from tests.storage.test_records_plane import NOW, batch, batches_of, fetch, list_offset, produce
from tests.support.authz import ANONYMOUS, DELETE, TOPIC, acl, create_acls, start_secured
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, free_port, free_ports

MS = datetime.timedelta(milliseconds=1)
EARLIEST, LATEST = -2, -1


def delete_records(c: WireClient, parts: dict[str, list[tuple[int, int]]], version: int = 2):
    """{topic: [(partition, offset)]} → {(topic, partition): (error, low watermark)}."""
    r = c.request(ApiKey.DELETE_RECORDS, version, {"timeout": 5000 * MS, "topics": [
        {"name": t, "partitions": [{"partition_index": p, "offset": o} for p, o in ps]} for t, ps in parts.items()]})
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in r.topics for p in t.partitions}


def delete_one(c: WireClient, topic: str, offset: int, partition: int = 0, version: int = 2):
    return delete_records(c, {topic: [(partition, offset)]}, version)[(topic, partition)]


def create_topic(c: WireClient, configs: dict[str, str] | None = None, partitions: int = 1) -> str:
    name = f"dr-{uuid.uuid4().hex[:10]}"
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout": 5000 * MS, "validate_only": False})
    assert r.topics[0].error_code is E.none, r.topics[0].error_message
    return name


def six_records(c: WireClient, topic: str) -> None:
    """Offsets 0–5 in three batches of two (bases 0, 2, 4), stamped 1000 ms apart per batch."""
    for i in range(3):
        assert produce(c, topic, 0, batch(2, ts=NOW + 1000 * i)).error_code is E.none


def bounds(c: WireClient, topic: str, partition: int = 0) -> tuple[int, int]:
    return (list_offset(c, topic, partition, EARLIEST).offset, list_offset(c, topic, partition, LATEST).offset)


@pytest.fixture(scope="module", params=["disk", "memory"])
def server(request, tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp(f"dr-{request.param}")), f"records.plane={request.param}").start()
    yield s
    assert s.stop() == 0, s.log()


def test_the_log_start_moves_to_the_offset_and_is_answered_as_the_low_watermark(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        six_records(c, topic)
        assert delete_one(c, topic, 3) == (E.none, 3)
        assert bounds(c, topic) == (3, 6)
        below = fetch(c, topic, 0, 2)
        assert below.error_code is E.offset_out_of_range
        at = fetch(c, topic, 0, 3)
        assert (at.error_code, at.log_start_offset, at.high_watermark) == (E.none, 3, 6)
        assert [b.base_offset for b in batches_of(at.records)] == [2, 4]  # the batch holding 3 stays whole


def test_minus_one_means_the_high_watermark(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        six_records(c, topic)
        assert delete_one(c, topic, -1) == (E.none, 6)
        assert bounds(c, topic) == (6, 6)
        empty = fetch(c, topic, 0, 6)
        assert (empty.error_code, empty.records or b"") == (E.none, b"")
        assert produce(c, topic, 0, batch(1)).base_offset == 6  # the log goes on from its end
        assert bounds(c, topic) == (6, 7)


def test_an_offset_at_or_below_the_log_start_changes_nothing(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        six_records(c, topic)
        assert delete_one(c, topic, 4) == (E.none, 4)
        assert delete_one(c, topic, 1) == (E.none, 4)
        assert delete_one(c, topic, 4) == (E.none, 4)
        assert bounds(c, topic) == (4, 6)
        fresh = create_topic(c)  # nothing produced: the high watermark is 0
        assert delete_one(c, fresh, 0) == (E.none, 0)
        assert delete_one(c, fresh, -1) == (E.none, 0)


@pytest.mark.parametrize("offset", [7, 1 << 40, -2])
def test_an_offset_past_the_high_watermark_or_below_minus_one_is_out_of_range(server, offset):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        six_records(c, topic)
        assert delete_one(c, topic, offset) == (E.offset_out_of_range, -1)
        assert bounds(c, topic) == (0, 6)
        assert [b.base_offset for b in batches_of(fetch(c, topic, 0, 0).records)] == [0, 2, 4]


def test_unknown_partitions_internal_and_compacted_topics_are_refused(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        compacted = create_topic(c, {"cleanup.policy": "compact"})
        both = create_topic(c, {"cleanup.policy": "compact,delete"})
        for t in (compacted, both):
            assert produce(c, t, 0, batch(2)).error_code is E.none
        got = delete_records(c, {topic: [(0, 0), (1, 0)], "dr-none": [(0, 0)], "__consumer_offsets": [(0, 0), (999, 0)],
                                 compacted: [(0, 1)], both: [(0, 1)]})
    assert got == {(topic, 0): (E.none, 0), (topic, 1): (E.unknown_topic_or_partition, -1),
                   ("dr-none", 0): (E.unknown_topic_or_partition, -1),
                   ("__consumer_offsets", 0): (E.invalid_topic_exception, -1),
                   ("__consumer_offsets", 999): (E.unknown_topic_or_partition, -1),
                   (compacted, 0): (E.policy_violation, -1), (both, 0): (E.none, 1)}


def test_every_version_answers_and_api_versions_advertises_them(server):
    assert SUPPORTED_VERSIONS[ApiKey.DELETE_RECORDS] == (0, 2)
    with WireClient(server.bootstrap) as c:
        advertised = {k.api_key: (k.min_version, k.max_version)
                      for k in c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                                  "client_software_version": "1"}).api_keys}
        assert advertised[ApiKey.DELETE_RECORDS] == (0, 2)
        topic = create_topic(c)
        six_records(c, topic)
        for version in (0, 1, 2):
            assert delete_one(c, topic, version + 1, version=version) == (E.none, version + 1), version


def test_list_offsets_by_time_answers_from_the_log_start(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c)
        six_records(c, topic)
        assert delete_one(c, topic, 3) == (E.none, 3)
        found = list_offset(c, topic, 0, 0)  # every record is newer: the first one kept
        assert (found.offset, found.timestamp) == (3, NOW + 1_001)
        found = list_offset(c, topic, 0, NOW + 2_000)
        assert (found.offset, found.timestamp) == (4, NOW + 2_000)


def test_partitions_of_one_request_are_answered_each(server):
    with WireClient(server.bootstrap) as c:
        topic = create_topic(c, partitions=2)
        for p in (0, 1):
            for _ in range(2):
                assert produce(c, topic, p, batch(2)).error_code is E.none
        got = delete_records(c, {topic: [(0, 2), (1, 5)]})
        assert got == {(topic, 0): (E.none, 2), (topic, 1): (E.offset_out_of_range, -1)}
        assert bounds(c, topic, 0) == (2, 4) and bounds(c, topic, 1) == (0, 4)


# ---------------------------------------------------------------------------------------------
# Authorization, workers


def test_deleting_records_needs_delete_on_the_topic(tmp_path):
    seed = start_secured(str(tmp_path), "records.plane=disk", "topics=allowed:1,denied:1", super_users=(ANONYMOUS,))
    try:
        assert create_acls(seed.bootstrap, acl(TOPIC, "allowed", DELETE)) == [E.none]
        with WireClient(seed.bootstrap) as c:
            for topic in ("allowed", "denied"):
                assert produce(c, topic, 0, batch(2)).error_code is E.none
    finally:
        assert seed.stop() == 0, seed.log()
    s = start_secured(str(tmp_path), "records.plane=disk", port=seed.port)  # ANONYMOUS: its ACLs only
    try:
        with WireClient(s.bootstrap) as c:
            got = delete_records(c, {"allowed": [(0, 1)], "denied": [(0, 1)], "unknown": [(0, 0)]})
        assert got == {("allowed", 0): (E.none, 1), ("denied", 0): (E.topic_authorization_failed, -1),
                       ("unknown", 0): (E.topic_authorization_failed, -1)}
    finally:
        assert s.stop() == 0, s.log()


def test_a_partition_another_worker_leads_is_not_led_here(tmp_path):
    s = GroupdProcess(str(tmp_path), "workers=2", "topics=t:2", port=free_ports(2), ready="workers ready").start(60)
    try:
        with WireClient(f"127.0.0.1:{s.port}") as c:  # worker 0 leads partition 0 (p mod 2)
            assert produce(c, "t", 0, batch(2)).error_code is E.none
            assert delete_records(c, {"t": [(0, 1), (1, 0)]}) == {
                ("t", 0): (E.none, 1), ("t", 1): (E.not_leader_or_follower, -1)}
    finally:
        assert s.stop() == 0, s.log()


# ---------------------------------------------------------------------------------------------
# Durability


def log_start_gauge(metrics: str, topic: str) -> float | None:
    text = urllib.request.urlopen(metrics, timeout=5).read().decode()
    wanted = f'groupd_records_log_start_offset{{partition="0",topic="{topic}"}}'
    for line in text.splitlines():
        if line.startswith(wanted):
            return float(line.rsplit(" ", 1)[1])
    return None


def segment_files(data_dir: str, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(data_dir, f"{topic}-0")) if n.endswith(".log"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_on_disk_the_new_log_start_survives_a_restart_and_older_segments_go(tmp_path, sig):
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    topic = "durable"
    s = GroupdProcess(str(tmp_path), "records.plane=disk", f"topics={topic}:1", "log.segment.bytes=1048576",
                      f"metrics.listener={metrics}").start()
    try:
        with WireClient(s.bootstrap) as c:
            for _ in range(12):  # 12 batches of 200 KiB: five segments of about 1 MiB
                assert produce(c, topic, 0, batch(1, value=b"x" * (200 << 10))).error_code is E.none
            before = segment_files(str(tmp_path), topic)
            assert len(before) >= 3, before
            assert delete_one(c, topic, 9) == (E.none, 9)
            # every closed segment below offset 9 is gone at once; the one holding 9 stays
            after = segment_files(str(tmp_path), topic)
            assert after == [n for n in before if int(n[:20]) >= max(int(b[:20]) for b in before if int(b[:20]) <= 9)]
        wait_until(lambda: log_start_gauge(metrics, topic) == 9, timeout=20, what="the log-start gauge at 9")
        s.stop(sig)
        s.start()
        with WireClient(s.bootstrap) as c:
            assert bounds(c, topic) == (9, 12)
            assert fetch(c, topic, 0, 8).error_code is E.offset_out_of_range
            assert [b.base_offset for b in batches_of(fetch(c, topic, 0, 9).records)][:1] == [9]
            assert delete_one(c, topic, 5) == (E.none, 9)
        assert log_start_gauge(metrics, topic) == 9
    finally:
        s.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_in_memory_the_log_start_never_goes_back_after_a_restart(tmp_path, sig):
    """The memory plane resumes each partition, empty, at its log end (or past it after kill -9)."""
    s = GroupdProcess(str(tmp_path), "records.plane=memory", "topics=mem:1").start()
    try:
        with WireClient(s.bootstrap) as c:
            six_records(c, "mem")
            assert delete_one(c, "mem", 4) == (E.none, 4)
        s.stop(sig)
        s.start()
        with WireClient(s.bootstrap) as c:
            start, end = bounds(c, "mem")
            assert 6 <= start == end
            assert fetch(c, "mem", 0, 3).error_code is E.offset_out_of_range
    finally:
        s.stop()
