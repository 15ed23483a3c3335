"""The lag series at scrape time (coordinator/observability/lag.py, time_lag.py), sans-IO: groups
driven through the core's runner with a fake clock, a records plane holding produced batches, and
the collector scraped directly. kafka-lag-exporter's labels name the member holding each partition
(`member_host`, `consumer_id` = member id, `client_id`; "unknown" when none does), and the lag in
seconds is the wait of the record at the committed offset."""

from __future__ import annotations

import math
import time
import uuid

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, TopicsImage
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.observability.collector import CoordinatorCollector
from groupd.coordinator.observability.lag import RecordsView
from groupd.coordinator.observability.time_lag import TimeLag
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.protocol.consumer import encode_assignment
from groupd.storage.catalog import Topic
from groupd.storage.records_plane import MemoryPlane
from tests.core.driver import Driver

FOO = uuid.UUID(int=1)
TOPICS = TopicsImage.of(1, [Topic("foo", 2, FOO)])
NOW = 1_790_000_000_000  # a fixed wall clock for the tables; a scrape reads the real one (now())


def now() -> int:
    """The wall clock at the test's own start: the collector reads it when it scrapes."""
    return int(time.time() * 1000)


def batch(timestamps: list[int]) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=None, value=b"v", headers=[])
    return bytes(b.build())


def plane_with(produced: dict[int, list[list[int]]], at: int = NOW) -> MemoryPlane:
    """foo's partitions → batches of record timestamps, appended at wall clock `at`."""
    plane = MemoryPlane(1 << 30, -1, 1 << 20)
    for partition, batches in produced.items():
        for timestamps in batches:
            assert plane.append((FOO, partition), batch(timestamps), 9, at).error.value == 0
    return plane


def view(plane: MemoryPlane, leads: bool = True) -> RecordsView:
    def log_end(topic, partition):
        log = plane.peek((FOO, partition)) if topic == "foo" else None
        return None if log is None else log.high_watermark

    def record_time(topic, partition, offset):
        log = plane.peek((FOO, partition))
        return log.timestamp_at(offset) if leads and log is not None else None

    return RecordsView(log_end, record_time, lambda topic_id: "foo" if topic_id == FOO else None)


def scrape(d: Driver, records: RecordsView, collector: CoordinatorCollector | None = None) -> dict:
    class Coordinator:  # hashable and weakly referenced, as the collector holds coordinators
        shards, states, writers = [d.shard], [PartitionState.ACTIVE], [None]

    collector = collector or CoordinatorCollector()
    coordinator = Coordinator()
    collector.watch(coordinator, generations=False, offsets=False, records=records)
    scrape.keep = coordinator  # the collector holds it weakly
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in collector.collect()
            for s in family.samples if s.name.startswith("groupd_consumergroup")}


def labels(group, partition, host, member, client) -> tuple:
    return tuple(sorted({"group": group, "topic": "foo", "partition": str(partition), "member_host": host,
                         "consumer_id": member, "client_id": client}.items()))


def test_classic_members_label_the_partitions_they_were_assigned():
    d = Driver(GroupSettings())
    a = d.join("cg", ticket="a", client_id="app-a", client_host="/10.0.0.1")["member_id"]
    d.join("cg", a, ticket="a2", client_id="app-a", client_host="/10.0.0.1")
    d.advance(10_000)  # the initial rebalance delay
    d.sync("cg", a, 1, ticket="s", assignments={a: encode_assignment({"foo": [0]})})
    d.commit("cg", [("foo", 0, 1), ("foo", 1, 0)], generation=1, member_id=a)
    t = now()
    plane = plane_with({0: [[t - 5000, t - 4000, t - 3000]], 1: [[t - 1000]]}, t)
    m = scrape(d, view(plane))
    assert m[("groupd_consumergroup_group_lag", labels("cg", 0, "/10.0.0.1", a, "app-a"))] == 2
    assert m[("groupd_consumergroup_group_offset", labels("cg", 0, "/10.0.0.1", a, "app-a"))] == 1
    # partition 1 is committed but no member holds it
    assert m[("groupd_consumergroup_group_lag", labels("cg", 1, "unknown", "unknown", "unknown"))] == 1


def test_consumer_group_members_label_their_current_assignment_and_the_lag_in_seconds_is_exact():
    d = Driver(GroupSettings())
    d.consumer_heartbeat(ConsumerHeartbeatRequest("g", "m1", 0, rebalance_timeout_ms=300_000,
                                                  subscribed_topic_names=("foo",), topic_partitions=[],
                                                  client_id="kip848", client_host="/10.0.0.2"), TOPICS)
    d.commit("g", [("foo", 0, 1), ("foo", 1, 1)], generation=1, member_id="m1")
    t = now()
    plane = plane_with({0: [[t - 9000], [t - 7000, t - 6500]], 1: [[t - 1000]]}, t)
    m = scrape(d, view(plane))
    owner = labels("g", 0, "/10.0.0.2", "m1", "kip848")
    assert m[("groupd_consumergroup_group_lag", owner)] == 2
    # the record at offset 1 (the second batch's first) was stamped t - 7000: it has waited since
    waited = m[("groupd_consumergroup_group_lag_seconds", owner)]
    assert 7.0 <= waited < 7.0 + 60, waited
    assert m[("groupd_consumergroup_group_lag_seconds", labels("g", 1, "/10.0.0.2", "m1", "kip848"))] == 0
    assert m[("groupd_consumergroup_group_max_lag_seconds", (("group", "g"),))] == waited


def test_time_lag_reads_a_record_inside_a_batch_and_caches_it():
    plane = plane_with({0: [[NOW - 900, NOW - 800, NOW - 700]]})
    log = plane.peek((FOO, 0))
    assert [log.timestamp_at(o) for o in range(4)] == [NOW - 900, NOW - 800, NOW - 700, None]
    reads = []

    def record_time(topic, partition, offset):
        reads.append(offset)
        return log.timestamp_at(offset)

    lag = TimeLag()
    for _ in range(3):
        assert lag.seconds(("foo", 0), 1, 3, NOW, record_time) == 0.8
        lag.end_scrape()
    assert reads == [1], "one batch read while the commit stays put"


def test_time_lag_is_estimated_from_the_log_ends_seen_when_the_records_are_elsewhere():
    lag = TimeLag()
    tp = ("foo", 0)
    lag.observe_end(tp, 100, NOW)
    assert math.isnan(lag.seconds(tp, 50, 100, NOW, None)), "one point: no estimate (kafka-lag-exporter's NaN)"
    lag.observe_end(tp, 100, NOW + 10_000)  # unchanged: the log end reached 100 at NOW
    lag.observe_end(tp, 200, NOW + 20_000)
    lag.observe_end(tp, 300, NOW + 30_000)
    # offset 149 was produced as the end went from 100 (NOW) to 200 (NOW + 20 s): at NOW + 10 s
    assert lag.seconds(tp, 149, 300, NOW + 30_000, None) == 20.0
    # older than the table: extrapolated from its first and last points (NOW - 4.5 s)
    assert lag.seconds(tp, 69, 300, NOW + 30_000, None) == 34.5
    assert lag.seconds(tp, 300, 300, NOW + 30_000, None) == 0.0
