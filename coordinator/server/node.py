"""What one groupd node knows: its settings, its identity and view of the cluster, the topic catalog, and
the requests it holds open (empty fetches wait out their max wait)."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from groupd.coordinator.apis import VERSION_TABLE
from groupd.coordinator.cluster.view import ClusterView, SingleNode
from groupd.coordinator.core.consumer.machine import TopicsImage
from groupd.coordinator.core.topic_configs import broker_defaults
from groupd.coordinator.runtime import offsets_topic
from groupd.coordinator.runtime.coordinator import GroupCoordinator
from groupd.coordinator.runtime.records_disk import DiskPlane
from groupd.coordinator.security.authorizer import Access
from groupd.coordinator.security.sasl import Users
from groupd.coordinator.security.scram_users import ScramUsers
from groupd.coordinator.server import fast_heartbeat
from groupd.coordinator.settings import Settings
from groupd.storage import records_plane
from groupd.storage.acls import AclFile
from groupd.storage.catalog import Topic, load_cluster_id
from groupd.storage.files import LOCK_FILE, DataDirError, DataDirLock, node_lock_file, prepare_data_dir
from groupd.storage.group_configs import GroupConfigsFile, GroupConfigStore
from groupd.storage.scram import ScramFile
from groupd.storage.transaction_log import TOPIC as TRANSACTION_STATE

log = logging.getLogger("groupd")


class Node:
    def __init__(self, settings: Settings, users: Users | None = None, cluster: ClusterView | None = None,
                 shares_data_dir: bool = False) -> None:
        self.settings = settings
        self.node_id = settings.node_id
        self.cluster = cluster or SingleNode(settings.node_id)  # the brokers, and who coordinates what
        prepare_data_dir(settings.data_dir)
        # before anything reads the directory: a second server on it would write the same log.
        # Processes that share one (workers under a supervisor, which holds .lock; cluster-mode nodes,
        # each writing its own segments) each lock their node's file
        shared = shares_data_dir or bool(settings.cluster_etcd_endpoints)
        self.lock = DataDirLock(settings.data_dir, node_lock_file(settings.node_id) if shared
                                else LOCK_FILE).acquire("groupd serve")
        self.cluster_id = self.cluster.cluster_id or load_cluster_id(settings.data_dir, settings.node_id)
        self.catalog = self.cluster.topic_catalog(settings.data_dir)
        self.catalog.use_defaults(broker_defaults(settings))  # topics' configs default to the log.* settings
        # ACL authorization, on when authorizer.class.name is set (coordinator/security/authorizer.py). In cluster
        # mode the ACLs, the SCRAM credentials and the group configs live in etcd (cluster.shared_file)
        self.access = Access(settings, self.cluster.shared_file(
            AclFile(settings.data_dir), lambda rows: self.access.follow(rows))) \
            if settings.authorizer_class_name else None
        # SCRAM credentials of the admin APIs, applied to the Users the SASL listeners share
        self.scram_users = ScramUsers(settings.data_dir, users or Users(settings.sasl_users, ()),
                                      self.cluster.shared_file(ScramFile(settings.data_dir),
                                                               lambda entries: self.scram_users.follow(entries)))
        self.offsets_topic = offsets_topic.topic(settings, self.cluster_id)  # internal: never in the catalog
        # on a shared data dir the controller is the catalog's single writer
        for name, partitions in settings.topics.items() if self.is_controller or not shares_data_dir else ():
            self._declare(name, partitions)
        # per-group overrides (IncrementalAlterConfigs)
        self.group_configs = GroupConfigStore(settings.data_dir, self.cluster.shared_file(
            GroupConfigsFile(settings.data_dir), lambda groups: self.group_configs.follow(groups)))
        # the group coordinator of every offsets partition
        self.coordinator = GroupCoordinator(settings, self.group_configs.overrides)
        # the transaction coordinator (coordinator/runtime/transactions.py) of the `__transaction_state`
        # partitions riding on this node's offsets partitions, set by the server; None before
        self.transactions: Any = None
        # requests to other workers or nodes (coordinator/cluster/broker_channel.py); None for a lone node
        self.broker_channel: Any = None
        if settings.records_plane == records_plane.DISK:  # the memory plane is made on first use
            plane = DiskPlane(settings, self.cluster.leads, lambda: list(self.catalog), self.cluster.data_stamp,
                              lambda topic: self.catalog.topic_config(topic))  # its own configs over log.*
            records_plane.register(self, plane)
            self.coordinator.on_lose.append(plane.release_home)  # cluster mode: data partitions ride on claims
        self.api_versions = VERSION_TABLE  # what ApiVersions advertises (the authenticator is handed it too)
        # while a fault is armed (coordinator/chaos/faults.py): intercept(handler, api_key, request)
        self.intercept: Any = None
        self.fast_heartbeat = fast_heartbeat.build(self)  # the steady classic Heartbeat in C, or None
        self._topics_image: tuple[Any, TopicsImage] | None = None  # (catalog, its image at its version)
        self.producer_id_block = (0, 1)  # InitProducerId's first id and step (workers: each its own)
        # log-end offsets of the data partitions other workers lead, for the lag metrics
        self.log_ends_elsewhere: dict[tuple[Any, int], int] = {}
        # a worker that is not the controller: its link to the controller, which makes the writes of
        # the shared files (coordinator/cluster/controller_writes.py) and auto-creates
        # (coordinator/server/supervisor_link.py)
        self.controller: Any = None
        self._held: dict[asyncio.TimerHandle, tuple[asyncio.Future, Any]] = {}
        self._writes: set[asyncio.Task] = set()  # control-plane writes under way (`spawn`)
        self._creating: dict[str, asyncio.Task] = {}  # auto-creates under way, by topic
        self.closing = False
        # large answers (coordinator/apis.answer_off_loop), one at a time
        self.answers = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupd-answers")

    def topics_image(self) -> TopicsImage:
        """The catalog's topics as the consumer machine sees them, rebuilt only when the catalog changed.
        `__consumer_offsets` is among them: Kafka's metadata image holds its internal topic too, so a
        subscription by name or regex gets its partitions assigned."""
        catalog, cached = self.catalog, self._topics_image
        if cached is None or cached[0] is not catalog or cached[1].version != catalog.version:
            topics = (*catalog, self.offsets_topic)
            cached = self._topics_image = (catalog, TopicsImage.of(catalog.version, topics, catalog.created_version))
        return cached[1]

    def close(self) -> None:
        """Release the data directory (the lock also ends with the process)."""
        self.answers.shutdown(wait=True)
        self.lock.release()

    def _declare(self, name: str, partitions: int) -> None:
        topic = self.catalog.get(name)
        if topic is None:
            self.catalog.create(name, partitions)
            log.info("topic created topic=%s partitions=%d reason=config", name, partitions)
        elif topic.partitions < partitions:
            self.catalog.set_partitions(name, partitions)
            log.info("topic partitions added topic=%s partitions=%d reason=config", name, partitions)
        elif topic.partitions > partitions:
            log.warning("topic %s has %d partitions, more than the %d in the config; partitions "
                        "cannot be removed, keeping %d", name, topic.partitions, partitions, topic.partitions)

    @property
    def is_controller(self) -> bool:
        """Whether this node writes the topic catalog, ACLs, SCRAM users and group configs."""
        return self.cluster.controller_id() == self.node_id

    @property
    def writes_catalog(self) -> bool:
        """Whether this node changes the topic catalog itself: the controller, or any node of a cluster
        that keeps the catalog (etcd); elsewhere CreateTopics and the like answer NOT_CONTROLLER."""
        return self.is_controller or self.cluster.keeps_shared_state()

    def spawn(self, write) -> asyncio.Task:
        """Run a control-plane write (a coroutine) as a task of its own, held until it is done."""
        task = asyncio.get_running_loop().create_task(write)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return task

    def auto_create(self, name: str) -> asyncio.Future | None:
        """A future of the topic, once the catalog holding it is written (None if the write failed:
        logged, and the client's next Metadata tries again); None when the controller is another
        worker: it is asked to create the topic, which the client's next Metadata finds (Kafka's
        brokers forward an auto-create the same way). Requests for one topic share one write."""
        if name == TRANSACTION_STATE:  # internal, never a data topic: its directory is the transaction log's
            return None
        if self.controller is not None:
            self.controller.create_topic(name)
            return None
        creating = self._creating.get(name)
        if creating is None:
            creating = self._creating[name] = self.spawn(self._auto_create(name))
            creating.add_done_callback(lambda _: self._creating.pop(name, None))
        return creating

    async def _auto_create(self, name: str) -> Topic | None:
        try:
            topic = await self.catalog.add(name, self.settings.num_partitions)
        except (OSError, DataDirError) as e:
            log.error("topic not created topic=%s reason=auto-create: cannot write the topic catalog: %s", name,
                      e.strerror if isinstance(e, OSError) and e.strerror else e)
            return None
        if topic is None:  # another request created it first
            return self.catalog.get(name)
        log.info("topic created topic=%s partitions=%d reason=auto-create", name, topic.partitions)
        return topic

    def create_forwarded(self, name: str) -> None:
        """The controller: an auto-create another worker handed over (unless the topic exists by now)."""
        if self.catalog.get(name) is None:
            self.auto_create(name)

    def log_topic_change(self, what: str, name: str, partitions: int, request: Any) -> None:
        log.info("topic %s topic=%s partitions=%d client=%s host=%s", what, name, partitions,
                 request.header.client_id, request.client_host)

    def log_topic_failure(self, what: str, name: str, why: str, request: Any) -> None:
        log.error("topic %s topic=%s: %s client=%s host=%s", what, name, why, request.header.client_id,
                  request.client_host)

    async def set_group_configs(self, group_id: str, configs: dict[str, int]) -> None:
        """The group's overrides become `configs`: stored first (off the loop: the data dir's file; etcd
        in cluster mode, where another node's change may come first), then for the next heartbeat."""
        await self.group_configs.set(group_id, configs)

    def group_configs_altered(self, group_id: str, configs: dict[str, int], request: Any) -> None:
        """The group's overrides are `configs` now (written by the controller: coordinator/cluster/controller_writes.py)."""
        log.info("group configs altered group=%s configs=%s client=%s host=%s", group_id,
                 ",".join(f"{k}={v}" for k, v in sorted(configs.items())) or "(defaults)",
                 request.header.client_id, request.client_host)

    # -----------------------------------------------------------------------------------------
    # Held replies

    def hold(self, seconds: float, reply: Any) -> asyncio.Future:
        """A future that resolves to `reply` after `seconds`, or at once when the node closes."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self.closing:
            fut.set_result(reply)
            return fut
        handle = loop.call_later(seconds, self._release, fut, reply)
        self._held[handle] = (fut, reply)
        fut.add_done_callback(lambda _f, h=handle: self._held.pop(h, None))
        return fut

    @staticmethod
    def _release(fut: asyncio.Future, reply: Any) -> None:
        if not fut.done():
            fut.set_result(reply)

    def release_all(self) -> None:
        """Shutdown: answer every held request now."""
        self.closing = True
        for handle, (fut, reply) in list(self._held.items()):
            handle.cancel()
            self._release(fut, reply)
