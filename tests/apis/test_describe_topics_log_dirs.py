"""DescribeTopicPartitions (75) and DescribeLogDirs (35) on the real server, past what the differential
tools test compares with Kafka: pagination over many topics and partitions, the ACL paths, and the
log sizes following what was produced, across a restart (the disk plane) and under `--workers`."""

from __future__ import annotations

import pytest

from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from tests.storage.test_records_plane import batch, produce
from tests.support.authz import ALLOW, ANONYMOUS, DESCRIBE, TOPIC, acl, create_acls, start_secured
from tests.support.process import GroupdProcess, WireClient, groupd_fixture

server = groupd_fixture("topics=p-a:3,p-b:2,p-c:1", "offsets.topic.num.partitions=3")


def pages(c: WireClient, names: list[str], limit: int) -> list[tuple[str, list[int]]]:
    """Every (topic, partitions) answered, following next_cursor page by page."""
    out, cursor = [], None
    while True:
        r = c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": n} for n in names],
                                                              "response_partition_limit": limit, "cursor": cursor})
        out += [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics]
        if r.next_cursor is None:
            return out
        cursor = {"topic_name": r.next_cursor.topic_name, "partition_index": r.next_cursor.partition_index}


def test_pages_cover_every_partition_once_in_name_order(server):
    with WireClient(server.bootstrap) as c:
        got = pages(c, [], 2)
    merged: dict[str, list[int]] = {}
    for name, parts in got:
        merged.setdefault(name, []).extend(parts)
    assert merged == {"__consumer_offsets": [0, 1, 2], "p-a": [0, 1, 2], "p-b": [0, 1], "p-c": [0]}
    assert [n for n, _ in got] == sorted(n for n, _ in got)
    assert all(len(parts) <= 2 for _, parts in got)


def test_a_limit_below_one_answers_one_partition_a_page_and_a_huge_one_is_capped(server):
    with WireClient(server.bootstrap) as c:
        for limit in (0, -7):
            assert pages(c, ["p-a"], limit) == [("p-a", [0]), ("p-a", [1]), ("p-a", [2])]
        assert pages(c, [], 2**31 - 1) == [("__consumer_offsets", [0, 1, 2]), ("p-a", [0, 1, 2]), ("p-b", [0, 1]),
                                            ("p-c", [0])]


def test_named_topics_unknown_and_illegal_names_and_a_bad_cursor(server):
    with WireClient(server.bootstrap) as c:
        assert pages(c, ["p-c", "p-a"], 10) == [("p-a", [0, 1, 2]), ("p-c", [0])]
        r = c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "nope"}, {"name": "bad name"}],
                                                              "response_partition_limit": 10, "cursor": None})
        assert {(t.name, t.error_code, t.topic_id) for t in r.topics} == {  # the zero id reads as None
            ("nope", E.unknown_topic_or_partition, None), ("bad name", E.invalid_topic_exception, None)}
        for cursor in ({"topic_name": "p-b", "partition_index": 0}, {"topic_name": "p-a", "partition_index": -1}):
            r = c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "p-a"}],
                                                                  "response_partition_limit": 10, "cursor": cursor})
            assert [(t.name, t.error_code) for t in r.topics] == [("p-a", E.invalid_request)]


def log_dirs(c: WireClient, topics=None) -> dict[str, dict[int, int]]:
    r = c.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": topics})
    assert r.error_code is E.none
    (d,) = r.results
    assert d.error_code is E.none and d.total_bytes >= d.usable_bytes > 0
    return {t.name: {p.partition_index: p.partition_size for p in t.partitions} for t in d.topics}


@pytest.mark.parametrize("plane", ["disk", "memory"])
def test_log_dir_sizes_follow_the_records_and_survive_a_restart(tmp_path, plane):
    s = GroupdProcess(str(tmp_path), f"records.plane={plane}", "topics=s:2", "offsets.topic.num.partitions=2").start()
    try:
        with WireClient(s.bootstrap) as c:
            assert log_dirs(c)["s"] == {0: 0, 1: 0}
            assert produce(c, "s", 1, batch(3)).error_code is E.none
            sizes = log_dirs(c)
            assert sizes["s"][0] == 0 and sizes["s"][1] > 0
            assert set(sizes["__consumer_offsets"]) == {0, 1}
            assert log_dirs(c, [{"topic": "s", "partitions": [1, 7]}, {"topic": "nope", "partitions": [0]}]) == {
                "s": {1: sizes["s"][1]}}
        s.stop()
        s.start()
        with WireClient(s.bootstrap) as c:
            # the memory plane starts each partition empty after a restart; the disk plane keeps its bytes
            assert log_dirs(c)["s"] == ({0: 0, 1: sizes["s"][1]} if plane == "disk" else {0: 0, 1: 0})
    finally:
        assert s.stop() == 0, s.log()


def test_acls_hide_log_dirs_and_undescribable_topics(tmp_path):
    """DESCRIBE on the cluster for the log dirs; DESCRIBE on a topic to see it in DescribeTopicPartitions
    (left out silently when all topics are asked for, TOPIC_AUTHORIZATION_FAILED when named)."""
    data_dir = str(tmp_path)
    seed = start_secured(data_dir, "topics=open:1,closed:1", super_users=(ANONYMOUS,))
    try:
        assert create_acls(seed.bootstrap, acl(TOPIC, "open", DESCRIBE, ALLOW)) == [E.none]
    finally:
        assert seed.stop() == 0, seed.log()
    s = start_secured(data_dir, port=seed.port)
    try:
        with WireClient(s.bootstrap) as c:
            r = c.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
            assert (r.error_code, r.results) == (E.cluster_authorization_failed, ())
            assert pages(c, [], 100) == [("open", [0])]
            r = c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "closed"}, {"name": "open"}],
                                                                  "response_partition_limit": 10, "cursor": None})
            assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [
                ("open", E.none, 1), ("closed", E.topic_authorization_failed, 0)]
    finally:
        assert s.stop() == 0, s.log()
