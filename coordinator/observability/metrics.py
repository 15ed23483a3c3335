"""groupd's Prometheus series (served by coordinator/server/metrics_http.py on `metrics.listener`;
the state gauges are computed at scrape time by coordinator/observability/collector.py).

Cost stays off the hot path: label children are bound once (here, or lazily the first time a label
value is seen); a request is counted in plain integers on the loop (`RequestStats`: prometheus_client
takes a lock per `inc()` and `observe()`, a tenth of a heartbeat) and exposed at scrape time; everything
that counts state (groups by state, members, offsets, log bytes, per-group series) is computed at
scrape time by `CoordinatorCollector`, never maintained per request.
"""

from __future__ import annotations

import bisect
from typing import Any

from groupd.protocol.apis import ApiKey

from .prometheus import (
    Counter,
    CounterMetricFamily,
    Gauge,
    GaugeMetricFamily,
    Histogram,
    HistogramMetricFamily,
    disable_created_metrics,
    floatToGoString,
)

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
LATENCY_BUCKETS = (.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300)
_API_NAMES = {int(k): k.name.lower() for k in ApiKey}


class RequestStats:
    """groupd_requests_total (by API and top-level error code), groupd_request_duration_seconds
    (by API) and groupd_requests_in_flight, counted on the loop in plain integers and exposed when
    Prometheus scrapes."""

    def __init__(self) -> None:
        self.in_flight = 0  # requests whose reply is parked
        self.answered: dict[tuple[int, Any], int] = {}  # (api key, top-level error code or None) → requests
        # per API: a count per bucket (the last one: over the largest bound), and the sum of seconds
        self.buckets = {k: [0] * (len(LATENCY_BUCKETS) + 1) for k in _API_NAMES}
        self.seconds = dict.fromkeys(_API_NAMES, 0.0)

    def done(self, api_key: int, response, seconds: float) -> None:
        key = (api_key, getattr(response, "error_code", None))  # named at scrape time: Enum.name is slow
        answered = self.answered
        answered[key] = answered.get(key, 0) + 1
        self.buckets[api_key][bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
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
            for bound, n in zip((*map(floatToGoString, LATENCY_BUCKETS), "+Inf"), counts):
                cumulative += n
                bounds.append((bound, cumulative))
            latency.add_metric([name], bounds, total)
        yield latency


REQUESTS = RequestStats()  # registered with the state collector by `collector.register`
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


# -- groups (the core's events, counted by coordinator/observability/observe.py) -------------------
REBALANCES_STARTED = Counter("groupd_rebalances_started_total", "Rebalances started, by reason", ["reason"])
REBALANCES_COMPLETED = Counter("groupd_rebalances_completed_total",
                                "Rebalances completed, by the state they ended in (Stable, or Empty)", ["state"])
REBALANCE_SECONDS = Histogram("groupd_rebalance_duration_seconds",
                               "From PreparingRebalance to Stable (or Empty)",
                               buckets=(.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600))
CONVERSIONS = Counter("groupd_group_conversions_total", "Live groups converted between the protocols, by "
                      "direction (upgrade: classic to consumer)", ["direction"])
SHARE_ACQUIRED = Counter("groupd_share_records_acquired_total",
                         "Share-group records acquired by a member (redeliveries included)")
SHARE_ACKNOWLEDGED = Counter("groupd_share_records_acknowledged_total",
                             "Share-group records acknowledged, by type (accept, release, reject, gap, renew)",
                             ["type"])
SHARE_REDELIVERED = Counter("groupd_share_records_redelivered_total",
                            "Share-group records acquired again (delivery count above 1)")
SHARE_LOCK_TIMEOUTS = Counter("groupd_share_record_lock_timeouts_total",
                              "Share-group records whose acquisition lock ran out before an acknowledgement")
SHARE_DELIVERY_LIMIT = Counter("groupd_share_records_archived_at_delivery_limit_total",
                               "Share-group records archived at the delivery-count limit, never delivered again")
MEMBERS_EXPIRED = Counter("groupd_members_expired_total", "Members removed by a timer", ["reason"])
STATIC_REPLACED = Counter("groupd_static_member_replacements_total", "Static members replaced by a new member id")
STATIC_FENCED = Counter("groupd_static_member_fencings_total", "Requests answered FENCED_INSTANCE_ID")
OFFSETS_REMOVED = Counter("groupd_offsets_removed_total", "Committed offsets removed, by reason", ["reason"])
CONSUMER_EPOCH_BUMPS = Counter("groupd_consumer_group_epoch_bumps_total",
                               "Consumer group (KIP-848) epoch bumps, by reason", ["reason"])
# Kafka's streams-group-rebalance-count: its sensor records every streams group epoch bump
STREAMS_REBALANCES = Counter("groupd_streams_group_rebalances_total",
                             "Streams group (KIP-1071) epoch bumps, by reason", ["reason"])
TARGET_ASSIGNMENT_SECONDS = Histogram("groupd_consumer_target_assignment_seconds",
                                      "Time to compute a consumer group's target assignment",
                                      buckets=(.00001, .00005, .0001, .0005, .001, .005, .01, .05, .1, .5, 1))
# the transaction coordinator (coordinator/runtime/transactions.py)
TRANSACTIONS_COMPLETED = Counter("groupd_transactions_completed_total",
                                 "Transactions completed (every marker written), by result", ["result"])
TRANSACTIONS_TIMED_OUT = Counter("groupd_transactions_timed_out_total",
                                 "Transactions aborted because they outlived their timeout")
TRANSACTIONS_FENCED = Counter("groupd_transactions_fenced_total",
                              "Open transactions aborted by an InitProducerId of their transactional id")
TRANSACTION_MARKER_RETRIES = Counter("groupd_transaction_marker_retries_total",
                                     "Transaction markers written again after a retriable error")
TRANSACTIONS_OPEN = Gauge("groupd_transactions_open", "Transactions Ongoing or being completed now")
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
