"""The state gauges, computed when Prometheus scrapes: groups by type and state, members, offsets,
the offsets partitions' logs, the per-group series and the lag. Registered by `serve` (never at
import), so a process that only imports groupd registers nothing."""

from __future__ import annotations

import os
import weakref

from groupd.coordinator.system_clock import wall_ms
from groupd.storage.records_plane import plane_for

from .lag import RecordsView, lag_families
from .metrics import REQUESTS
from .prometheus import REGISTRY, GaugeMetricFamily
from .time_lag import TimeLag


class CoordinatorCollector:
    """State gauges, computed when Prometheus scrapes, over every coordinator handed to `watch`
    (registered once per process, so two coordinators can live in one).

    Per-group series (members, state, lag, and the opt-in generation and offsets) cover at most
    `max_groups` groups, the first by group id, so the series stay put from scrape to scrape; the
    aggregates (`groupd_groups`, `groupd_members`, the lag over all groups) always count every group.
    A scrape costs one pass over the groups and their committed offsets, in memory."""

    def __init__(self) -> None:
        self._watched: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # coordinator → _Watch

    def watch(self, groups, generations: bool, offsets: bool, max_groups: int = 1000,
              records: RecordsView | None = None) -> None:
        """`groups` offers `shards`, `states` and `writers` per offsets partition (the runtime's
        GroupCoordinator); `records` answers log ends and record timestamps when the records
        plane is on (the lag series)."""
        self._watched[groups] = (generations, offsets, max_groups, records, TimeLag())

    def collect(self):
        for groups, watch in list(self._watched.items()):
            yield from self._collect(groups, *watch)
            yield from self._collect_groups(groups, *watch)

    def _collect(self, groups, generations: bool, per_offset: bool, max_groups: int, records, time_lag):
        by_state = GaugeMetricFamily("groupd_groups", "Groups, by type, state and protocol type",
                                     labels=["type", "state", "protocol_type"])
        members = GaugeMetricFamily("groupd_members", "Members of groups of every type")
        unreconciled = GaugeMetricFamily("groupd_consumer_members_unreconciled",
                                         "Consumer-group members whose current assignment differs from their target")
        tasks = GaugeMetricFamily("groupd_streams_tasks_assigned", "Tasks streams-group members hold now, by kind "
                                  "(active, standby, warmup)", labels=["kind"])
        offsets = GaugeMetricFamily("groupd_offsets", "Committed offsets stored")
        partition_state = GaugeMetricFamily("groupd_partition_state", "1 for the state each offsets partition is in",
                                            labels=["offsets_partition", "state"])
        log_bytes = GaugeMetricFamily("groupd_log_bytes", "Bytes of each offsets partition's log",
                                      labels=["offsets_partition"])
        log_segments = GaugeMetricFamily("groupd_log_segments", "Segments of each offsets partition's log",
                                         labels=["offsets_partition"])
        counts: dict[tuple[str, str, str], int] = {}
        n_members = n_offsets = n_unreconciled = 0
        n_tasks = {"active": 0, "standby": 0, "warmup": 0}
        for p, shard in enumerate(groups.shards):
            state = groups.states[p].value
            if state == "unowned":  # another node's (a worker's): it reports the partition, and merged
                continue            # scrapes add the workers' series up
            for s in ("loading", "active", "failed"):
                partition_state.add_metric([str(p), s], 1.0 if s == state else 0.0)
            writer = groups.writers[p]
            if writer is not None:
                sizes = [os.path.getsize(path) for _, path in writer.plog.segments if os.path.exists(path)]
                log_bytes.add_metric([str(p)], sum(sizes))
                log_segments.add_metric([str(p)], len(sizes))
            if state != "active":
                continue
            for group in list(shard.groups.values()):
                key = (group.type, group.state_name, group.protocol_type or "")
                counts[key] = counts.get(key, 0) + 1
                n_members += len(group.members)
                n_unreconciled += group.unreconciled()
                if group.type == "streams":
                    for kind, n in group.tasks_assigned().items():
                        n_tasks[kind] += n
            n_offsets += sum(len(values) for values in list(shard.offsets.values()))
        for (group_type, state, protocol_type), n in counts.items():
            by_state.add_metric([group_type, state, protocol_type], n)
        members.add_metric([], n_members)
        unreconciled.add_metric([], n_unreconciled)
        offsets.add_metric([], n_offsets)
        for kind, n in n_tasks.items():
            tasks.add_metric([kind], n)
        yield from (by_state, members, unreconciled, tasks, offsets, partition_state, log_bytes, log_segments)

    def _collect_groups(self, groups, generations: bool, per_offset: bool, max_groups: int,
                        records: RecordsView | None, time_lag: TimeLag):
        """The per-group series, capped at `max_groups` groups, and the lag over all groups."""
        active = [shard for p, shard in enumerate(groups.shards) if groups.states[p].value == "active"]
        ids = {group_id for shard in active for group_id in (*shard.groups, *shard.offsets)}
        exported = ids if len(ids) <= max_groups else set(sorted(ids)[:max_groups])
        omitted = GaugeMetricFamily("groupd_metrics_groups_omitted", "Groups left out of the per-group series by "
                                    "metrics.group.max.groups (the aggregates still count them)")
        omitted.add_metric([], len(ids) - len(exported))
        yield omitted
        group_members = GaugeMetricFamily("groupd_group_members", "Members of each group", labels=["group", "type"])
        group_state = GaugeMetricFamily("groupd_group_state", "1 for each group, labelled with its state",
                                        labels=["group", "type", "state", "protocol_type"])
        generation = GaugeMetricFamily("groupd_group_generation", "Generation of each group (opt-in)", labels=["group"])
        epochs = GaugeMetricFamily("groupd_consumer_group_epoch", "Group and assignment epoch of each consumer group "
                                   "(opt-in with metrics.group.generation.enabled)", labels=["group", "epoch"])
        for shard in active:
            for group in list(shard.groups.values()):
                if group.group_id not in exported:
                    continue
                group_members.add_metric([group.group_id, group.type], len(group.members))
                group_state.add_metric([group.group_id, group.type, group.state_name, group.protocol_type or ""], 1)
                if not generations:
                    continue
                for name, value in group.epochs().items():  # a generation, or a group's epochs
                    if name == "generation":
                        generation.add_metric([group.group_id], value)
                    else:
                        epochs.add_metric([group.group_id, name], value)
        yield from (group_members, group_state)
        if generations:
            yield from (generation, epochs)
        if per_offset:
            yield from self._offsets(active, exported)
        if records is not None:
            yield from lag_families(active, exported, records, time_lag, wall_ms())

    @staticmethod
    def _offsets(active, exported):
        committed = GaugeMetricFamily("groupd_group_committed_offset", "Committed offset (opt-in)",
                                      labels=["group", "topic", "partition"])
        age = GaugeMetricFamily("groupd_group_commit_age_seconds", "Seconds since the commit (opt-in)",
                                labels=["group", "topic", "partition"])
        now = wall_ms()
        for shard in active:
            for group_id, values in list(shard.offsets.items()):
                if group_id not in exported:
                    continue
                for (topic, partition), value in list(values.items()):
                    committed.add_metric([group_id, topic, str(partition)], value.offset)
                    age.add_metric([group_id, topic, str(partition)], max(now - value.commit_timestamp, 0) / 1000)
        yield from (committed, age)


def records_view(node) -> RecordsView | None:
    """Log ends, record timestamps and topic names from the node's records plane, or None when
    `records.plane` is none."""
    plane = plane_for(node)
    if plane is None:
        return None

    def known(topic: str, partition: int):
        topic = node.catalog.get(topic)
        return topic if topic is not None and 0 <= partition < topic.partitions else None

    def log_end(topic: str, partition: int) -> int | None:
        found = known(topic, partition)
        if found is None:
            return None
        if not node.cluster.leads(topic, partition):  # another worker's: as it last told (supervisor_link.py)
            return node.log_ends_elsewhere.get((found.topic_id, partition), 0)
        log = plane.peek((found.topic_id, partition))
        return 0 if log is None else log.high_watermark

    def record_time(topic: str, partition: int, offset: int) -> int | None:
        found = known(topic, partition)
        if found is None or not node.cluster.leads(topic, partition):
            return None  # the records are another worker's: time_lag.py estimates
        log = plane.peek((found.topic_id, partition))
        # the memory plane reads the record's batch; the disk plane's partitions are estimated (time_lag.py)
        timestamp_at = getattr(log, "timestamp_at", None)
        return None if timestamp_at is None else timestamp_at(offset)

    def topic_name(topic_id) -> str | None:
        found = node.catalog.by_id(topic_id)
        return None if found is None else found.name

    return RecordsView(log_end, record_time, topic_name)


COLLECTOR = CoordinatorCollector()
_registered = False


def register() -> CoordinatorCollector:
    """Register the request counts and the state collector with the process's registry, once."""
    global _registered
    if not _registered:
        REGISTRY.register(REQUESTS)
        REGISTRY.register(COLLECTOR)
        _registered = True
    return COLLECTOR
