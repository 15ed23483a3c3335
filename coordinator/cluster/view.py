"""The cluster as this node sees it: the brokers clients are told about (each with its advertised
address per listener), the controller, and which node coordinates each offsets partition.

A lone node is the whole cluster (`SingleNode`). Worker processes on one host and cluster mode
give other answers through the same view; Metadata, FindCoordinator and the runtime (which
partitions to load) ask only this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from groupd.coordinator.settings import Listener
from groupd.storage.catalog import TopicCatalog
from groupd.storage.files import JsonFile


class ClusterError(Exception):
    """Cluster mode cannot start (etcd unreachable, the client missing): one line for the operator."""


@dataclass(frozen=True)
class Broker:
    node_id: int
    # listener name → the address clients of that listener are told; a broker without the
    # listener a request came in on is not shown to that client
    addresses: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    rack: str | None = None


class ClusterView:
    """Who serves what. `coordinator(p)` may change while the node runs (a partition moves): the
    runtime is told through `GroupCoordinator.gain` / `lose`, the APIs read the view per request."""

    node_id: int
    cluster_id: str | None = None  # kept by the cluster (etcd); None: the data dir's meta.properties

    def brokers(self) -> Sequence[Broker]:
        raise NotImplementedError

    def controller_id(self) -> int:
        raise NotImplementedError

    def coordinator(self, partition: int) -> int | None:
        """The node coordinating offsets partition `partition` now; None while nobody does."""
        raise NotImplementedError

    def keeps_shared_state(self) -> bool:
        """Whether the cluster itself keeps the catalog, ACLs, SCRAM users and group configs (etcd, changed
        by compare-and-swap from any node), rather than one writer, the controller, on a shared data dir."""
        return False

    def topic_catalog(self, data_dir: str) -> TopicCatalog:
        """Where the node's topics live: the data dir's topics.json; the cluster's own catalog when
        the cluster keeps one (etcd)."""
        return TopicCatalog(data_dir)

    def shared_file(self, file: JsonFile, on_change) -> JsonFile:
        """Where one of the data dir's JSON files (the ACLs, the SCRAM credentials, the group configs)
        lives: the file itself; in a cluster that keeps them (etcd) its stand-in there, whose other
        nodes' changes come to `on_change(content)`."""
        return file

    def leader(self, topic: str, partition: int) -> int | None:
        """The node serving a data topic's partition (the records plane); None while nobody does."""
        return self.node_id

    def owns(self, partition: int) -> bool:
        return self.coordinator(partition) == self.node_id

    def data_stamp(self, topic: str, partition: int) -> int:
        """The stamp a data partition's segments are written under here (cluster mode: the claim of
        its home offsets partition); 0 (unstamped) elsewhere."""
        return 0

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The data partition's leader epoch as every node reports it (Metadata, OffsetForLeaderEpoch):
        0 where leadership never moves (a lone node, workers: a partition's worker is fixed), as for a
        fresh Kafka topic; cluster mode: the stamp of the leader's claim."""
        return 0

    def coordinator_epoch(self, partition: int) -> int:
        """Offsets partition `partition`'s leader epoch (`__consumer_offsets` in Metadata): as above."""
        return 0

    def leads(self, topic: str, partition: int) -> bool:
        """Whether this node serves the data partition: Produce, Fetch and ListOffsets elsewhere answer
        NOT_LEADER_OR_FOLLOWER, and the client refreshes its metadata, as from Kafka."""
        return self.leader(topic, partition) == self.node_id


class SingleNode(ClusterView):
    """One node: the only broker, the controller, the coordinator of every partition."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._brokers = (Broker(node_id),)  # its own address is always the request's listener's

    def brokers(self) -> Sequence[Broker]:
        return self._brokers

    def controller_id(self) -> int:
        return self.node_id

    def coordinator(self, partition: int) -> int | None:
        return self.node_id

    def owns(self, partition: int) -> bool:
        return True


def address(view: ClusterView, node_id: int, listener: Listener) -> tuple[str, int] | None:
    """Where a client of `listener` reaches `node_id`: this node at the listener's own advertised
    address (its port resolved at bind), another at its registered address for that listener."""
    if node_id == view.node_id:
        return listener.host, listener.port
    for broker in view.brokers():
        if broker.node_id == node_id:
            return broker.addresses.get(listener.name)
    return None


def broker_entries(view: ClusterView, listener: Listener) -> list[dict]:
    """Metadata's broker list for a client of `listener`."""
    entries = []
    for broker in view.brokers():
        at = address(view, broker.node_id, listener)
        if at is not None:
            entries.append({"node_id": broker.node_id, "host": at[0], "port": at[1], "rack": broker.rack})
    return entries
