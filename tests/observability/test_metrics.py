"""Prometheus metrics: the exposition on `metrics.listener`, and a real Prometheus server scraping
groupd while a consumer group rebalances."""

from __future__ import annotations

import time
import urllib.request

import pytest

from groupd.protocol.apis import ApiKey
from tests.support.harness import ClientProcess
from tests.support.process import WireClient, commit_offsets, free_port
from tests.support.prometheus import Prometheus

pytestmark = pytest.mark.clients


def scrape(url: str) -> dict[str, float]:
    """Samples of the exposition as {'name{labels}': value}."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def start_metered(start_groupd, *settings: str):
    port = free_port()
    server = start_groupd("topics=t6:6", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
                          f"metrics.listener=http://127.0.0.1:{port}/metrics", "metrics.group.offsets.enabled=true",
                          "metrics.group.generation.enabled=true", *settings)
    server.metrics_url = f"http://127.0.0.1:{port}/metrics"
    server.metrics_port = port
    return server


@pytest.fixture
def metered(start_groupd):
    return start_metered(start_groupd)


def test_exposition_counts_requests_groups_offsets_and_log_batches(metered):
    with WireClient(metered.bootstrap) as w:
        for _ in range(3):
            w.request(ApiKey.API_VERSIONS, 2, {})
        w.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "metered", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t6", "partitions": [{"partition_index": 2, "committed_offset": 11,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    m = scrape(metered.metrics_url)
    assert m['groupd_requests_total{api="api_versions",error="none"}'] == 3
    assert m['groupd_request_duration_seconds_count{api="offset_commit"}'] == 1
    assert m['groupd_groups{protocol_type="",state="Empty",type="classic"}'] == 1
    assert m["groupd_offsets"] == 1
    assert m['groupd_group_committed_offset{group="metered",partition="2",topic="t6"}'] == 11
    assert m["groupd_log_append_batch_records_count"] >= 1
    assert m["groupd_connections_opened_total"] >= 1
    assert sum(v for k, v in m.items() if k.startswith("groupd_partition_state{") and 'state="active"' in k) == 50
    assert not any(k.endswith("_created") or "_created{" in k for k in m)


def test_bad_frames_are_counted_by_reason(metered):
    with WireClient(metered.bootstrap) as w:
        w.send_raw((12).to_bytes(4, "big") + b"\x03\xe7\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00")
        assert w.closed_by_server()
    assert scrape(metered.metrics_url)['groupd_bad_frames_total{reason="unknown_api"}'] == 1


def test_prometheus_scrapes_a_rebalance(metered, tmp_path):
    prom = Prometheus(tmp_path, f"127.0.0.1:{metered.metrics_port}")
    eventually = prom.eventually
    members = []
    try:
        opts = {"topic": "t6", "group": "scraped", "seconds": 0, "session.ms": 6000, "heartbeat.interval.ms": 500}
        members = [ClientProcess("confluent", "subscribe", metered.bootstrap, opts) for _ in range(2)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(m.assignment() for m in members):
            time.sleep(0.2)
        assert members[1].close() == 0  # a member leaves: the group rebalances onto the other
        value = lambda r: float(r[0]["value"][1])  # noqa: E731
        eventually('groupd_rebalances_started_total{reason="member-left"}', lambda r: value(r) == 1)
        eventually('groupd_rebalances_completed_total{state="Stable"}', lambda r: value(r) >= 2)
        eventually("groupd_members", lambda r: value(r) == 1)
        eventually('groupd_groups{type="classic",state="Stable",protocol_type="consumer"}', lambda r: value(r) == 1)
        eventually('sum(groupd_requests_total{api="join_group",error="none"})', lambda r: value(r) >= 3)
        eventually('groupd_requests_total{api="leave_group",error="none"}', lambda r: value(r) == 1)
        eventually('groupd_group_generation{group="scraped"}', lambda r: value(r) >= 2)
        eventually("groupd_rebalance_duration_seconds_count", lambda r: value(r) >= 2)
        eventually('groupd_group_state{group="scraped",state="Stable"}', lambda r: value(r) == 1)
    finally:
        for m in members:
            m.close(timeout=20)
        prom.stop()


def test_lag_per_group_and_partition_with_the_records_plane_and_the_group_cap(start_groupd):
    from confluent_kafka import Producer

    port = free_port()
    server = start_groupd("topics=lagged:2", "records.plane=memory", "metrics.group.max.groups=1",
                          f"metrics.listener=http://127.0.0.1:{port}/metrics")
    url = f"http://127.0.0.1:{port}/metrics"
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for partition, n in ((0, 10), (1, 4)):
        for i in range(n):
            producer.produce("lagged", value=b"%d" % i, partition=partition)
    assert producer.flush(60) == 0
    commit_offsets(server.bootstrap, "a-lag", "lagged", {0: 3, 1: 4})
    commit_offsets(server.bootstrap, "b-lag", "lagged", {0: 5, 1: 9})  # ahead of the log on 1: lag 0, not -5

    m = scrape(url)
    assert m['groupd_partition_latest_offset{partition="0",topic="lagged"}'] == 10
    assert m['groupd_partition_latest_offset{partition="1",topic="lagged"}'] == 4
    # kafka-lag-exporter's labels: "unknown" where no member holds the partition
    unowned = 'client_id="unknown",consumer_id="unknown",group="a-lag",member_host="unknown"'
    assert m[f'groupd_consumergroup_group_offset{{{unowned},partition="0",topic="lagged"}}'] == 3
    assert m[f'groupd_consumergroup_group_lag{{{unowned},partition="0",topic="lagged"}}'] == 7
    assert m[f'groupd_consumergroup_group_lag{{{unowned},partition="1",topic="lagged"}}'] == 0
    assert m['groupd_consumergroup_group_max_lag{group="a-lag"}'] == 7
    assert m['groupd_consumergroup_group_sum_lag{group="a-lag"}'] == 7
    # the lag in seconds: since the record at the committed offset was produced
    waited = m[f'groupd_consumergroup_group_lag_seconds{{{unowned},partition="0",topic="lagged"}}']
    assert 0 < waited < 120
    assert m['groupd_consumergroup_group_max_lag_seconds{group="a-lag"}'] == waited
    assert m['groupd_group_state{group="a-lag",protocol_type="",state="Empty",type="classic"}'] == 1
    assert m['groupd_group_members{group="a-lag",type="classic"}'] == 0
    # metrics.group.max.groups=1: b-lag has no series of its own, yet the totals count it
    assert not any('group="b-lag"' in k for k in m)
    assert m["groupd_metrics_groups_omitted"] == 1
    assert m["groupd_consumergroups_sum_lag"] == 7 + 5
    assert m["groupd_consumergroups_max_lag"] == 7
    assert m['groupd_groups{protocol_type="",state="Empty",type="classic"}'] == 2
    # the offsets log's partitions are `offsets_partition`, never `partition`
    assert any(k.startswith("groupd_log_bytes{offsets_partition=") for k in m)
    assert not any(k.startswith(("groupd_log_", "groupd_partition_state")) and "{partition=" in k for k in m)


def test_no_lag_series_without_the_records_plane(start_groupd):
    metered = start_metered(start_groupd, "records.plane=none")  # a pure coordinator knows no log ends
    commit_offsets(metered.bootstrap, "no-plane", "t6", {0: 3})
    m = scrape(metered.metrics_url)
    assert m['groupd_group_state{group="no-plane",protocol_type="",state="Empty",type="classic"}'] == 1
    assert not any("lag" in k or k.startswith("groupd_partition_latest_offset") for k in m)


@pytest.mark.parametrize("plane", ["disk", "memory"])
def test_records_partitions_report_their_log_size_start_and_end(start_groupd, plane):
    from tests.storage.test_records_plane import batch, produce
    from tests.support.process import WireClient

    metered = start_metered(start_groupd, f"records.plane={plane}")
    with WireClient(metered.bootstrap) as c:
        assert produce(c, "t6", 2, batch(3)).error_code.value == 0
    samples = scrape(metered.metrics_url)
    at = '{partition="2",topic="t6"}'
    assert samples[f"groupd_records_log_end_offset{at}"] == 3
    assert samples[f"groupd_records_log_start_offset{at}"] == 0
    assert samples[f"groupd_records_log_bytes{at}"] == len(batch(3))
    assert samples["groupd_records_write_errors"] == 0
    if plane == "disk":
        assert samples[f"groupd_records_log_segments{at}"] == 1
        assert samples["groupd_records_compactions_total"] == 0
        assert samples["groupd_records_retention_removed_segments_total"] == 0


@pytest.mark.parametrize("plane", ["disk", "memory"])
def test_records_in_and_out_are_counted_per_topic(start_groupd, plane):
    from tests.storage.test_records_plane import batch, fetch, produce
    from tests.support.process import WireClient

    metered = start_metered(start_groupd, f"records.plane={plane}")
    with WireClient(metered.bootstrap) as c:
        assert produce(c, "t6", 0, batch(3)).error_code.value == 0
        assert produce(c, "t6", 1, batch(2)).error_code.value == 0
        assert produce(c, "nope", 0, batch(2)).error_code.value != 0  # refused: not counted
        fetched = fetch(c, "t6", 0, 0).records
        assert fetch(c, "t6", 1, 2).records in (b"", None)  # nothing past the end
    samples = scrape(metered.metrics_url)
    assert samples['groupd_records_bytes_in_total{topic="t6"}'] == len(batch(3)) + len(batch(2))
    assert samples['groupd_records_in_total{topic="t6"}'] == 5
    assert samples['groupd_records_bytes_out_total{topic="t6"}'] == len(fetched) == len(batch(3))
    assert not any('topic="nope"' in k for k in samples)


def test_a_streams_group_is_counted_by_state_with_its_rebalances_and_tasks(start_groupd):
    """Kafka's streams-group-count (by state) is groupd_groups{type="streams"}, its
    streams-group-rebalance-count groupd_streams_group_rebalances_total (one per group epoch bump); the
    tasks members hold are groupd_streams_tasks_assigned."""
    from tests.apis.test_streams_group_wire import heartbeat, ready_member
    server = start_metered(start_groupd, "topics=words:2", "group.streams.initial.rebalance.delay.ms=0")
    with WireClient(server.bootstrap) as c:
        ready_member(c, "sg-metered", "m-1", "metered")  # joined (epoch 1), internal topics created (epoch 2)
        m = scrape(server.metrics_url)
        assert m['groupd_groups{protocol_type="streams",state="Stable",type="streams"}'] == 1
        assert m['groupd_streams_tasks_assigned{kind="active"}'] == 4  # two subtopologies of two partitions
        assert m['groupd_streams_tasks_assigned{kind="standby"}'] == 0
        bumps = {k: v for k, v in m.items() if k.startswith("groupd_streams_group_rebalances_total{")}
        assert sum(bumps.values()) == 2, bumps
        assert heartbeat(c, "sg-metered", "m-1", -1).member_epoch == -1  # leaves: Empty, no tasks, one more bump
    m = scrape(server.metrics_url)
    assert m['groupd_groups{protocol_type="streams",state="Empty",type="streams"}'] == 1
    assert m['groupd_streams_tasks_assigned{kind="active"}'] == 0
    assert sum(v for k, v in m.items() if k.startswith("groupd_streams_group_rebalances_total{")) == 3


def test_share_records_redelivered_after_a_lock_timeout_and_archived_at_the_delivery_limit(start_groupd):
    """What acknowledgements do not show: a lock that runs out (groupd_share_record_lock_timeouts_total),
    the record acquired again (groupd_share_records_redelivered_total), and, released at the delivery
    limit of 2, archived for good (groupd_share_records_archived_at_delivery_limit_total)."""
    from tests.apis.test_share_fetch_wire import acquired, produce, share_ack, share_fetch, topic_id
    server = start_metered(start_groupd, "topics=one:1", "records.plane=memory", "group.share.delivery.count.limit=2",
                           "group.share.min.record.lock.duration.ms=1000", "group.share.record.lock.duration.ms=1000")
    with WireClient(server.bootstrap, timeout=90) as c:
        tid = topic_id(c, "one")
        share_fetch(c, "sm", "holder", 0, tid)
        share_fetch(c, "sm", "taker", 0, tid)
        produce(server.bootstrap, "one", 1)
        assert acquired(share_fetch(c, "sm", "holder", 1, wait_ms=5000))[0] == [(0, 0, 1)]
        # the holder stays silent: its lock runs out and the taker's waiting fetch gets the record again
        assert acquired(share_fetch(c, "sm", "taker", 1, wait_ms=60000))[0] == [(0, 0, 2)]
        assert share_ack(c, "sm", "taker", 2, tid, [(0, 0, 2)]).error_code == 0  # RELEASE at the limit
    m = scrape(server.metrics_url)
    assert m["groupd_share_records_acquired_total"] == 2
    assert m["groupd_share_records_redelivered_total"] == 1
    assert m["groupd_share_record_lock_timeouts_total"] == 1
    assert m["groupd_share_records_archived_at_delivery_limit_total"] == 1
