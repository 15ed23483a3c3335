"""The lag series, computed at scrape time: kafka-lag-exporter's (`kafka_consumergroup_group_*`,
`kafka_partition_latest_offset`) under groupd's prefix, with its labels.

Per partition a group committed: `group, topic, partition, member_host, consumer_id, client_id`,
the last three naming the member that holds the partition now (kafka-lag-exporter passes along
DescribeConsumerGroups' `host`, `consumerId` = member id and `clientId`): classic groups of the
consumer protocol from the assignment each member was sent, consumer groups (KIP-848) from each
member's current assignment. A partition no member holds (an Empty group, a standalone consumer's
commits, a rebalance in progress) gets "unknown" in all three, as kafka-lag-exporter labels the
partitions of a group without members. Lag = log-end offset − committed offset, 0 when the commit
is ahead (as after a restart, which empties the records plane); lag in seconds: `time_lag.py`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from .prometheus import GaugeMetricFamily
from .time_lag import RecordTime, TimeLag

UNKNOWN = "unknown"
NO_OWNER = (UNKNOWN, UNKNOWN, UNKNOWN)
PARTITION_LABELS = ["group", "topic", "partition", "member_host", "consumer_id", "client_id"]


@dataclasses.dataclass(frozen=True)
class RecordsView:
    """What the lag reads of the records: log ends, record timestamps, topic names by id."""

    log_end: Callable[[str, int], "int | None"]  # (topic, partition) → log end, None: no such partition
    record_time: RecordTime | None = None  # (topic, partition, offset) → timestamp, None: not held here
    topic_name: Callable[[uuid.UUID], "str | None"] = lambda topic_id: None


def owners(group, topic_name: Callable[[uuid.UUID], "str | None"]) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(topic, partition) → (member_host, consumer_id, client_id) of the members holding them."""
    out = {}
    for topic, partition, member_id, client_id, host in group.partition_owners():
        name = topic_name(topic) if isinstance(topic, uuid.UUID) else topic
        if name is not None:
            out[(name, partition)] = (host, member_id, client_id)
    return out


def lag_families(active, exported: set[str], records: RecordsView, time_lag: TimeLag, now_ms: int):
    """The lag families over the active offsets partitions (`exported`: the groups that get
    per-group series; the totals count every group)."""
    offset = GaugeMetricFamily("groupd_consumergroup_group_offset", "Committed offset of each partition a "
                               "group committed (records plane on)", labels=PARTITION_LABELS)
    lag = GaugeMetricFamily("groupd_consumergroup_group_lag", "Log-end offset minus committed offset, "
                            "per group and partition", labels=PARTITION_LABELS)
    lag_seconds = GaugeMetricFamily("groupd_consumergroup_group_lag_seconds", "Seconds the record at the "
                                    "committed offset has waited (0: caught up; NaN: no estimate yet)",
                                    labels=PARTITION_LABELS)
    max_lag = GaugeMetricFamily("groupd_consumergroup_group_max_lag", "Largest partition lag of each group",
                                labels=["group"])
    max_lag_seconds = GaugeMetricFamily("groupd_consumergroup_group_max_lag_seconds", "Largest partition lag "
                                        "in seconds of each group", labels=["group"])
    sum_lag = GaugeMetricFamily("groupd_consumergroup_group_sum_lag", "Lag of each group over its partitions",
                                labels=["group"])
    latest = GaugeMetricFamily("groupd_partition_latest_offset", "Log-end offset of each topic partition "
                               "that a group committed (records plane on)", labels=["topic", "partition"])
    all_max = GaugeMetricFamily("groupd_consumergroups_max_lag", "Largest partition lag of any group")
    all_sum = GaugeMetricFamily("groupd_consumergroups_sum_lag", "Lag summed over every group and partition")
    ends: dict[tuple[str, int], int | None] = {}
    total = largest = 0
    for shard in active:
        for group_id, values in list(shard.offsets.items()):
            per_group = group_id in exported
            group = shard.groups.get(group_id) if per_group else None
            held = owners(group, records.topic_name) if group is not None else {}
            group_sum = group_max = 0
            group_max_seconds = None
            for tp, value in list(values.items()):
                if tp not in ends:
                    ends[tp] = end = records.log_end(*tp)
                    if end is not None:
                        latest.add_metric([tp[0], str(tp[1])], end)
                        time_lag.observe_end(tp, end, now_ms)
                end = ends[tp]
                if end is None:
                    continue  # the topic is gone, or the partition never existed: no lag to speak of
                behind = max(end - value.offset, 0)
                group_sum += behind
                group_max = max(group_max, behind)
                if per_group:
                    labels = [group_id, tp[0], str(tp[1]), *held.get(tp, NO_OWNER)]
                    offset.add_metric(labels, value.offset)
                    lag.add_metric(labels, behind)
                    seconds = time_lag.seconds(tp, value.offset, end, now_ms, records.record_time)
                    lag_seconds.add_metric(labels, seconds)
                    if seconds == seconds:  # not NaN
                        group_max_seconds = max(group_max_seconds or 0.0, seconds)
            total += group_sum
            largest = max(largest, group_max)
            if per_group:
                max_lag.add_metric([group_id], group_max)
                sum_lag.add_metric([group_id], group_sum)
                if group_max_seconds is not None:
                    max_lag_seconds.add_metric([group_id], group_max_seconds)
    time_lag.end_scrape()
    all_max.add_metric([], largest)
    all_sum.add_metric([], total)
    return (offset, lag, lag_seconds, max_lag, max_lag_seconds, sum_lag, latest, all_max, all_sum)
