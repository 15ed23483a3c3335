"""Which node coordinates which transactional ids, and where a transaction's markers go, sans-IO.

`__transaction_state` partition t rides on `__consumer_offsets` partition t mod (offsets partitions):
its owner (worker t mod N, or the node holding that partition's etcd claim) coordinates the
transactional ids hashed to t, and the claim's stamp is the coordinator epoch its markers carry
(Kafka: the transaction log partition's leader epoch). One ownership machinery, not two: whatever moves
an offsets partition (a worker restart, a failover, a rebalance of claims) moves its transaction
partitions with it, under the same fencing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

OFFSETS_TOPIC = "__consumer_offsets"


def home_partition(txn_partition: int, offsets_partitions: int) -> int:
    """The offsets partition whose owner coordinates `__transaction_state` partition `txn_partition`."""
    return txn_partition % offsets_partitions


def marker_batches(partitions: Iterable[tuple[str, int]], leader_of: Callable[[str, int], int | None]
                   ) -> tuple[dict[int, list[tuple[str, int]]], list[tuple[str, int]]]:
    """A transaction's partitions grouped by the broker that leads each now (one WriteTxnMarkers per
    broker, as Kafka's TransactionMarkerChannelManager batches them), and those without a leader (to
    look up again on the next round)."""
    by_broker: dict[int, list[tuple[str, int]]] = {}
    leaderless: list[tuple[str, int]] = []
    for topic, p in partitions:
        leader = leader_of(topic, p)
        if leader is None:
            leaderless.append((topic, p))
        else:
            by_broker.setdefault(leader, []).append((topic, p))
    return by_broker, leaderless
