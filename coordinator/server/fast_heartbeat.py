"""The steady classic Heartbeat's and ConsumerGroupHeartbeat's native path (coordinator/server/_native.c),
wired to one node.

`build(node)` hands the C code what it reads and writes: the coordinator (its partitions' states
and shards), the classic group and state objects it compares by identity, the reply bodies the
Python handler encodes (coordinator/apis/heartbeat.py: the same bytes by construction), and the
request counters of coordinator/observability/metrics.py. It answers only what the Python path
would answer the same way; everything else falls through to that path, which stays the reference.

The consumer part (ConsumerGroupHeartbeat v0/v1 with every optional field null, as
ConsumerMachine.steady_heartbeat answers it) is on when the consumer protocol is enabled; its
reply bytes are those of consumer_group_heartbeat._steady (tests/server/test_native_consumer_heartbeat.py).

None (no native path, for either heartbeat) when `native.heartbeat.enable` is false or an authorizer
is configured (a heartbeat's READ check on the group is the Python path's). Connections also skip it on SASL
listeners and while a fault is armed (coordinator/server/connection.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupd.coordinator.apis import ACCEPTED_VERSIONS
from groupd.coordinator.apis import consumer_group_heartbeat as consumer_api
from groupd.coordinator.apis import heartbeat as heartbeat_api
from groupd.coordinator.core.classic.group import EMPTY, PREPARING_REBALANCE, ClassicGroup
from groupd.coordinator.core.consumer.group import ConsumerGroup
from groupd.coordinator.core.consumer.reconciliation import MemberState
from groupd.coordinator.observability import metrics
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

from ._native import HeartbeatPath

if TYPE_CHECKING:
    from .node import Node

ANSWERS = (ErrorCode.none, ErrorCode.rebalance_in_progress)  # what the native path may answer


def build(node: Node) -> HeartbeatPath | None:
    if not node.settings.native_heartbeat_enable or node.access is not None:
        return None
    lo, hi = ACCEPTED_VERSIONS[ApiKey.HEARTBEAT]
    assert lo == 0 and hi <= 4, "_native.c reads Heartbeat v0-v4"
    coordinator = node.coordinator
    stats = metrics.REQUESTS
    consumer = None
    if "consumer" in node.settings.group_coordinator_rebalance_protocols:
        c_lo, c_hi = ACCEPTED_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT]
        assert c_lo == 0 and c_hi <= 1, "_native.c reads ConsumerGroupHeartbeat v0-v1"
        steady = consumer_api._steady(c_hi, "m", 1, 1)  # the metrics key a steady answer counts under
        key = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        consumer = (node, ConsumerGroup, MemberState.STABLE, (key, steady.error_code), stats.buckets[key])
    return HeartbeatPath(
        coordinator=coordinator, partitions=coordinator.partitions, active=PartitionState.ACTIVE,
        group_type=ClassicGroup, empty=EMPTY, preparing=PREPARING_REBALANCE,
        bodies=tuple(tuple(heartbeat_api.error_response(v, None, e).body for e in ANSWERS) for v in range(hi + 1)),
        answered=stats.answered, keys=tuple((int(ApiKey.HEARTBEAT), e) for e in ANSWERS),
        buckets=stats.buckets[ApiKey.HEARTBEAT], seconds=stats.seconds, bounds=metrics.LATENCY_BUCKETS,
        consumer=consumer)
