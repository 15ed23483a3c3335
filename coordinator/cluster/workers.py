"""Worker i of N on one host (`groupd serve --workers N`): its settings (node.id + i, every listener's
port + i) and its view of the cluster: every worker a broker, offsets partition p and data partition p
served by worker p mod N, worker 0 the controller. Static: only liveness changes, as the supervisor
reports workers down and up (coordinator/server/supervisor.py, through coordinator/server/supervisor_link.py)."""

from __future__ import annotations

import dataclasses
from typing import Sequence
from urllib.parse import urlsplit

from groupd.coordinator.settings import Listener, Settings

from .view import Broker, ClusterView


def shifted(listeners: Sequence[Listener], by: int) -> tuple[Listener, ...]:
    return tuple(dataclasses.replace(l, port=l.port + by) for l in listeners)


def worker_settings(settings: Settings, index: int) -> Settings:
    """What worker `index` serves with: its node id and ports; its metrics go to the supervisor, which
    serves the merged scrape on `metrics.listener` (a worker's own port is private, on loopback)."""
    return dataclasses.replace(
        settings, node_id=settings.node_id + index, listeners=shifted(settings.listeners, index),
        advertised_listeners=shifted(settings.advertised_listeners, index),
        metrics_listener="http://127.0.0.1:0/metrics" if settings.metrics_listener else "",
        admin_listener=_shifted_url(settings.admin_listener, index))


def _shifted_url(url: str, by: int) -> str:
    if not url:
        return url
    parts = urlsplit(url)
    return parts._replace(netloc=f"{parts.hostname}:{parts.port + by}").geturl()


def producer_id_block(index: int, count: int, now_ms: int) -> tuple[int, int]:
    """(first, step) of worker `index`'s producer ids: a residue of its own mod `count`, so no two workers
    hand out the same id, from a base that moves 4096 ids per millisecond of the start time, so a
    restarted worker does not hand out again the ids its previous run gave to producers still writing
    to the other workers' partitions (Kafka persists id blocks; its memory plane here has no disk)."""
    return (now_ms << 12) * count + index, count


class WorkerView(ClusterView):
    """The cluster as worker `index` of `count` sees it. A worker the supervisor reported down is not
    listed in Metadata and coordinates nothing meanwhile (FindCoordinator: COORDINATOR_NOT_AVAILABLE)."""

    def __init__(self, settings: Settings, index: int, count: int) -> None:
        self.base = settings.node_id  # worker 0's node id: the controller
        self.count = count
        self.node_id = settings.node_id + index
        advertised = [settings.advertised_for(l.name) for l in settings.listeners]
        self._all = tuple(Broker(self.base + i, {a.name: (a.host, a.port + i) for a in advertised})
                          for i in range(count))
        self._down: set[int] = set()
        self._brokers = self._all

    def brokers(self) -> Sequence[Broker]:
        return self._brokers

    def controller_id(self) -> int:
        return self.base

    def coordinator(self, partition: int) -> int | None:
        node = self.base + partition % self.count
        return None if node in self._down else node

    def leader(self, topic: str, partition: int) -> int | None:
        node = self.base + partition % self.count
        return None if node in self._down else node

    def owns(self, partition: int) -> bool:
        return self.base + partition % self.count == self.node_id

    def set_down(self, node_ids: set[int]) -> None:
        """The workers the supervisor has reported not serving (crashed, restarting)."""
        self._down = set(node_ids) - {self.node_id}
        self._brokers = tuple(b for b in self._all if b.node_id not in self._down)

