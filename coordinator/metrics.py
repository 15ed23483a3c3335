"""groupd's Prometheus series, served on `metrics.listener` (which also answers `/healthz` and
`/ready`, coordinator/readiness.py).

Cost stays off the hot path: label children are bound once (here, or lazily the first time a label
value is seen); a request is counted in plain integers on the loop (`RequestStats`: prometheus_client
takes a lock per `inc()` and `observe()`, a tenth of a heartbeat) and exposed at scrape time; everything
that counts state (groups by state, members, offsets, log bytes, per-group series) is computed at
scrape time by `CoordinatorCollector`, never maintained per request.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import (CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, disable_created_metrics,
                               generate_latest)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from protocol.apis import ApiKey
from storage.topic_data import plane_for

from . import readiness
from .listen import Listener, default_port_taken
from .system_clock import wall_ms

disable_created_metrics()  # `_created` series double the exposition and no dashboard uses them

# -- connections ---------------------------------------------------------------------------------
CONNECTIONS_OPENED = Counter("groupd_connections_opened_total", "Client connections accepted")
CONNECTIONS_CLOSED = Counter("groupd_connections_closed_total", "Client connections closed")
CONNECTIONS_OPEN = Gauge("groupd_connections_open", "Client connections open now")
_BAD_FRAMES = Counter("groupd_bad_frames_total", "Requests that closed their connection, by reason", ["reason"])
BAD_FRAME = {reason: _BAD_FRAMES.labels(reason) for reason in
             ("oversized", "malformed", "unknown_api", "unsupported_version", "handler_error", "slow_frame",
              "sasl_unauthenticated_request", "sasl_unsupported_version")}
ACCEPT_FAILED = Counter("groupd_accept_failed_total",
                        "Accepts that failed for lack of file descriptors or memory (retried)")
IDLE_CLOSED = Counter("groupd_connections_idle_closed_total",
                      "Connections closed after connections.max.idle.ms without traffic")
_AUTHENTICATIONS = Counter("groupd_authentications_total",
                           "TLS handshakes and SASL exchanges, by listener, mechanism (TLS for a handshake) and "
                           "result: success, reauthenticated, or why it failed", ["listener", "mechanism", "result"])
_authentication_children: dict[tuple[str, str, str], Counter] = {}
EXPIRED_CLOSED = Counter("groupd_connections_expired_closed_total",
                         "Connections closed because their SASL session expired (connections.max.reauth.ms)")


def authentication(listener: str, mechanism: str, result: str) -> None:
    key = (listener, mechanism, result)
    child = _authentication_children.get(key)
    if child is None:
        child = _authentication_children[key] = _AUTHENTICATIONS.labels(*key)
    child.inc()


# -- requests ------------------------------------------------------------------------------------
_LATENCY_BUCKETS = (.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300)
_API_NAMES = {int(k): k.name.lower() for k in ApiKey}


class RequestStats:
    """groupd_requests_total (by API and top-level error code), groupd_request_duration_seconds
    (by API) and groupd_requests_in_flight, counted on the loop in plain integers and exposed when
    Prometheus scrapes."""

    def __init__(self) -> None:
        self.in_flight = 0  # requests whose reply is parked
        self.answered: dict[tuple[int, Any], int] = {}  # (api key, top-level error code or None) → requests
        # per API: a count per bucket (the last one: over the largest bound), and the sum of seconds
        self.buckets = {k: [0] * (len(_LATENCY_BUCKETS) + 1) for k in _API_NAMES}
        self.seconds = dict.fromkeys(_API_NAMES, 0.0)

    def done(self, api_key: int, response, seconds: float) -> None:
        key = (api_key, getattr(response, "error_code", None))  # named at scrape time: Enum.name is slow
        answered = self.answered
        answered[key] = answered.get(key, 0) + 1
        self.buckets[api_key][bisect.bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        self.seconds[api_key] += seconds

    def collect(self):
        yield GaugeMetricFamily("groupd_requests_in_flight",
                                "Requests whose reply is parked (held fetches, joins, syncs, writes)", value=self.in_flight)
        requests = CounterMetricFamily("groupd_requests", "Requests answered, by API and top-level error code",
                                       labels=["api", "error"])
        by_label: dict[tuple[str, str], int] = {}
        for (api_key, error), n in dict(self.answered).items():  # a copy: the loop counts on meanwhile
            label = (_API_NAMES[api_key], "none" if error is None else error.name)
            by_label[label] = by_label.get(label, 0) + n
        for label, n in sorted(by_label.items()):
            requests.add_metric(list(label), n)
        yield requests
        latency = HistogramMetricFamily("groupd_request_duration_seconds",
                                        "From a request's arrival to its reply being queued, by API", labels=["api"])
        for api_key, name in _API_NAMES.items():
            counts, total, cumulative = list(self.buckets[api_key]), self.seconds[api_key], 0
            bounds = []
            for bound, n in zip((*map(floatToGoString, _LATENCY_BUCKETS), "+Inf"), counts):
                cumulative += n
                bounds.append((bound, cumulative))
            latency.add_metric([name], bounds, total)
        yield latency


REQUESTS = RequestStats()
REGISTRY.register(REQUESTS)
request_done = REQUESTS.done


# -- authorization -------------------------------------------------------------------------------
_AUTHORIZATION_DENIED = Counter("groupd_authorization_denied_total",
                                "Authorization checks denied (one per resource checked), by API and resource type",
                                ["api", "resource_type"])
_denied_children: dict[tuple[int, str], Counter] = {}


def authorization_denied(api_key: int, resource_type: str) -> None:
    child = _denied_children.get((api_key, resource_type))
    if child is None:
        child = _denied_children[(api_key, resource_type)] = _AUTHORIZATION_DENIED.labels(_API_NAMES[api_key],
                                                                                          resource_type)
    child.inc()


# -- groups (the core's events, counted by coordinator/observe.py) --------------------------------------------------------
REBALANCES_STARTED = Counter("groupd_rebalances_started_total", "Rebalances started, by reason", ["reason"])
REBALANCES_COMPLETED = Counter("groupd_rebalances_completed_total",
                                "Rebalances completed, by the state they ended in (Stable, or Empty)", ["state"])
REBALANCE_SECONDS = Histogram("groupd_rebalance_duration_seconds",
                               "From PreparingRebalance to Stable (or Empty)",
                               buckets=(.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600))
CONVERSIONS = Counter("groupd_group_conversions_total", "Live groups converted between the protocols, by "
                      "direction (upgrade: classic to consumer)", ["direction"])
MEMBERS_EXPIRED = Counter("groupd_members_expired_total", "Members removed by a timer", ["reason"])
STATIC_REPLACED = Counter("groupd_static_member_replacements_total", "Static members replaced by a new member id")
STATIC_FENCED = Counter("groupd_static_member_fencings_total", "Requests answered FENCED_INSTANCE_ID")
OFFSETS_REMOVED = Counter("groupd_offsets_removed_total", "Committed offsets removed, by reason", ["reason"])
CONSUMER_EPOCH_BUMPS = Counter("groupd_consumer_group_epoch_bumps_total",
                               "Consumer group (KIP-848) epoch bumps, by reason", ["reason"])
TARGET_ASSIGNMENT_SECONDS = Histogram("groupd_consumer_target_assignment_seconds",
                                      "Time to compute a consumer group's target assignment",
                                      buckets=(.00001, .00005, .0001, .0005, .001, .005, .01, .05, .1, .5, 1))
CHAOS_ARMED = Counter("groupd_chaos_faults_armed_total", "Faults armed through the admin endpoint, by kind",
                      ["kind"])
CHAOS_INJECTED = Counter("groupd_chaos_injected_total", "Requests an armed fault answered or held back, and "
                         "forced operations, by kind and API", ["kind", "api"])
GROUPS_REMOVED = Counter("groupd_groups_removed_total", "Groups removed, by reason", ["reason"])


# -- the offsets log -------------------------------------------------------------------------------
_BATCH_RECORDS = Histogram("groupd_log_append_batch_records", "Records per appended batch (group commit)",
                           buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000))
_APPEND_SECONDS = Histogram("groupd_log_append_duration_seconds",
                            "Write of one batch, including its fsync when fsync runs per batch",
                            buckets=(.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5))
APPEND_BYTES = Counter("groupd_log_appended_bytes_total", "Bytes appended to the offsets log")
COMPACTIONS = Counter("groupd_log_compactions_total", "Compaction runs")
COMPACTION_RECLAIMED = Counter("groupd_log_compaction_reclaimed_bytes_total", "Bytes reclaimed by compaction")
# `offsets_partition`, not `partition`: these are partitions of the offsets log, never a topic's
LOAD_SECONDS = Gauge("groupd_partition_load_seconds", "How long each offsets partition took to load",
                     ["offsets_partition"])
CORRUPT_BYTES = Counter("groupd_log_corrupt_bytes_total",
                        "Corrupt bytes skipped while loading the offsets log (a torn tail is not counted)",
                        ["offsets_partition"])
CORRUPT_BATCHES = Counter("groupd_log_corrupt_batches_total",
                          "Batches found corrupt and skipped while loading the offsets log", ["offsets_partition"])
_WRITE_ERRORS = Counter("groupd_log_write_errors_total", "Offsets-log writes that failed (the requests behind them "
                        "were answered with an error) or outlasted offsets.commit.timeout.ms", ["offsets_partition",
                                                                                              "reason"])


def batch_written(records: int, size: int, seconds: float) -> None:
    _BATCH_RECORDS.observe(records)
    _APPEND_SECONDS.observe(seconds)
    APPEND_BYTES.inc(size)


def write_failed(partition: int, reason: str) -> None:
    """`reason`: failed (a storage error) or timed_out (slower than offsets.commit.timeout.ms)."""
    _WRITE_ERRORS.labels(str(partition), reason).inc()


LogEnd = Callable[[str, int], "int | None"]  # (topic, partition) → log-end offset, None for no such partition


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
              log_end: LogEnd | None = None) -> None:
        """`groups` offers `shards`, `states` and `writers` per offsets partition (the runtime's
        GroupCoordinator); `log_end` answers log-end offsets when the records plane is on."""
        self._watched[groups] = (generations, offsets, max_groups, log_end)

    def collect(self):
        for groups, watch in list(self._watched.items()):
            yield from self._collect(groups, *watch)
            yield from self._collect_groups(groups, *watch)

    def _collect(self, groups, generations: bool, per_offset: bool, max_groups: int, log_end: LogEnd | None):
        by_state = GaugeMetricFamily("groupd_groups", "Groups, by type, state and protocol type",
                                     labels=["type", "state", "protocol_type"])
        members = GaugeMetricFamily("groupd_members", "Members of groups of every type")
        unreconciled = GaugeMetricFamily("groupd_consumer_members_unreconciled",
                                         "Consumer-group members whose current assignment differs from their target")
        offsets = GaugeMetricFamily("groupd_offsets", "Committed offsets stored")
        partition_state = GaugeMetricFamily("groupd_partition_state", "1 for the state each offsets partition is in",
                                            labels=["offsets_partition", "state"])
        log_bytes = GaugeMetricFamily("groupd_log_bytes", "Bytes of each offsets partition's log",
                                      labels=["offsets_partition"])
        log_segments = GaugeMetricFamily("groupd_log_segments", "Segments of each offsets partition's log",
                                         labels=["offsets_partition"])
        counts: dict[tuple[str, str, str], int] = {}
        n_members = n_offsets = n_unreconciled = 0
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
                if group.type == "consumer":
                    n_unreconciled += group.unreconciled()
            n_offsets += sum(len(values) for values in list(shard.offsets.values()))
        for (group_type, state, protocol_type), n in counts.items():
            by_state.add_metric([group_type, state, protocol_type], n)
        members.add_metric([], n_members)
        unreconciled.add_metric([], n_unreconciled)
        offsets.add_metric([], n_offsets)
        yield from (by_state, members, unreconciled, offsets, partition_state, log_bytes, log_segments)

    def _collect_groups(self, groups, generations: bool, per_offset: bool, max_groups: int,
                        log_end: LogEnd | None):
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
                if group.type == "consumer":
                    epochs.add_metric([group.group_id, "group"], group.group_epoch)
                    epochs.add_metric([group.group_id, "assignment"], group.assignment_epoch)
                else:
                    generation.add_metric([group.group_id], group.generation)
        yield from (group_members, group_state)
        if generations:
            yield from (generation, epochs)
        if per_offset:
            yield from self._offsets(active, exported)
        if log_end is not None:
            yield from self._lag(active, exported, log_end)

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

    @staticmethod
    def _lag(active, exported, log_end: LogEnd):
        """kafka-lag-exporter's series (`kafka_consumergroup_group_*`, `kafka_partition_latest_offset`)
        under groupd's prefix. Lag = log-end offset − committed offset, 0 when the commit is ahead
        (as after a restart, which empties the records plane)."""
        offset = GaugeMetricFamily("groupd_consumergroup_group_offset", "Committed offset of each partition a "
                                   "group committed (records plane on)", labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("groupd_consumergroup_group_lag", "Log-end offset minus committed offset, "
                                "per group and partition", labels=["group", "topic", "partition"])
        max_lag = GaugeMetricFamily("groupd_consumergroup_group_max_lag", "Largest partition lag of each group",
                                    labels=["group"])
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
                group_sum = group_max = 0
                for tp, value in list(values.items()):
                    if tp not in ends:
                        ends[tp] = end = log_end(*tp)
                        if end is not None:
                            latest.add_metric([tp[0], str(tp[1])], end)
                    end = ends[tp]
                    if end is None:
                        continue  # the topic is gone, or the partition never existed: no lag to speak of
                    behind = max(end - value.offset, 0)
                    group_sum += behind
                    group_max = max(group_max, behind)
                    if per_group:
                        labels = [group_id, tp[0], str(tp[1])]
                        offset.add_metric(labels, value.offset)
                        lag.add_metric(labels, behind)
                total += group_sum
                largest = max(largest, group_max)
                if per_group:
                    max_lag.add_metric([group_id], group_max)
                    sum_lag.add_metric([group_id], group_sum)
        all_max.add_metric([], largest)
        all_sum.add_metric([], total)
        yield from (offset, lag, max_lag, sum_lag, latest, all_max, all_sum)


def records_log_end(node) -> LogEnd | None:
    """Log-end offsets from the node's records plane, or None when `records.plane` is none."""
    plane = plane_for(node)
    if plane is None:
        return None

    def log_end(topic: str, partition: int) -> int | None:
        known = node.catalog.get(topic)
        if known is None or not 0 <= partition < known.partitions:
            return None
        if not node.cluster.leads(topic, partition):  # another worker's: as it last told (supervisor_link.py)
            return node.log_ends_elsewhere.get((known.topic_id, partition), 0)
        log = plane.peek((known.topic_id, partition))
        return 0 if log is None else log.high_watermark

    return log_end


EXPOSITION_IDLE_S = 10.0  # a scrape connection that sends no complete request in this long is closed
EXPOSITION_MAX_CONNECTIONS = 32  # beyond this, the oldest connection makes room for the new one


class _Exposition(asyncio.Protocol):
    """A minimal HTTP/1.1 endpoint on the event loop: collecting on the loop that owns the groups
    means no collector ever sees a dict that another thread is changing. One request per connection;
    idle connections are closed and their number is bounded."""

    def __init__(self, routes: dict, open_: dict[_Exposition, None]) -> None:
        self.routes = routes  # request path → () → (status, body, content type)
        self.buf = b""
        self.open = open_  # every open exposition connection, oldest first

    def connection_made(self, transport) -> None:
        self.transport = transport
        while len(self.open) >= EXPOSITION_MAX_CONNECTIONS:
            oldest = next(iter(self.open))
            del self.open[oldest]
            oldest.transport.close()
        self.open[self] = None
        self.timer = asyncio.get_running_loop().call_later(EXPOSITION_IDLE_S, transport.close)

    def connection_lost(self, exc) -> None:
        self.open.pop(self, None)
        self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return  # answered already: whatever follows is ignored
        self.buf += data
        if b"\r\n\r\n" not in self.buf and len(self.buf) < 8192:
            return
        request_line = self.buf.split(b"\r\n", 1)[0].decode("latin-1").split()
        target = request_line[1] if len(request_line) > 1 else ""
        route = self.routes.get(target.split("?", 1)[0])
        if route is not None:
            status, body, kind = route()
        else:
            status, body, kind = "404 Not Found", b"not found\n", "text/plain"
        self.transport.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                             "Connection: close\r\n\r\n".encode() + body)
        self.transport.close()


COLLECTOR = CoordinatorCollector()
REGISTRY.register(COLLECTOR)


async def serve(settings, node) -> str | None:
    """Hand the node's coordinator (and records plane) to the state collector and serve the
    exposition on `metrics.listener`."""
    COLLECTOR.watch(node.coordinator, settings.metrics_group_generation_enabled, settings.metrics_group_offsets_enabled,
                    settings.metrics_group_max_groups, records_log_end(node))
    if not settings.metrics_listener:
        return None
    url = urlsplit(settings.metrics_url)
    exposition = lambda: ("200 OK", generate_latest(REGISTRY), CONTENT_TYPE_LATEST)  # noqa: E731
    routes = {url.path or "/metrics": exposition, "/": exposition, "/healthz": readiness.alive,
              "/ready": lambda: readiness.ready(node.coordinator)}
    open_: dict[_Exposition, None] = {}
    try:
        listener = Listener("metrics", url.hostname or "0.0.0.0", url.port, lambda: _Exposition(routes, open_),
                            backlog=128, setting="metrics.listener")
    except OSError as e:
        warning = default_port_taken(e, settings, "metrics.listener")
        if warning is None:
            raise
        logging.getLogger("groupd").warning("%s", warning)
        return None
    return url._replace(netloc=f"{url.hostname}:{listener.address[1]}").geturl()  # port 0: the one bound
