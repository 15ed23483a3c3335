"""The server's lifecycle: start the listeners, serve until SIGTERM/SIGINT, shut down cleanly
(stop accepting, answer what is in flight, close connections, close the log)."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import TYPE_CHECKING

from groupd.coordinator.chaos.faults import Chaos
from groupd.coordinator.cluster.broker_channel import BrokerChannel
from groupd.coordinator.cluster.shared_files import CHECK_INTERVAL_S, SharedFiles
from groupd.coordinator.cluster.workers import producer_id_block
from groupd.coordinator.observability import readiness
from groupd.coordinator.runtime.transactions import TransactionCoordinator
from groupd.coordinator.security.authorizer import tick_denial_logs
from groupd.coordinator.security.listeners import Endpoint, authentication_failed, endpoints, failure_log, oauth_jwks
from groupd.coordinator.security.sasl import Users
from groupd.coordinator.security.tls_transport import TlsTransport
from groupd.coordinator.settings import Settings
from groupd.coordinator.system_clock import wall_ms
from groupd.storage.records_plane import (
    plane_for,
    producer_ids_for,
    register_producer_ids,
    residue_ids_floor,
    save_log_ends,
)

from . import metrics_http
from .admin_http import AdminEndpoint
from .connection import Connection, RequestMemory, bad_frame_log
from .listen import Listener, ListenError, accept_log  # noqa: F401 (ListenError: the CLI's)
from .node import Node
from .supervisor_link import SupervisorLink

if TYPE_CHECKING:
    from groupd.coordinator.cluster.etcd.cluster import EtcdCluster

log = logging.getLogger("groupd")

SHUTDOWN_GRACE_S = 5.0
LOG_LIMIT_TICK_S = 5.0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed, the standard loop otherwise: the one place that chooses."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Server:
    def __init__(self, settings: Settings, worker: SupervisorLink | None = None) -> None:
        self.settings = settings
        self.worker = worker  # worker i of N under a supervisor (coordinator/cluster/workers.py), else None
        self.node: Node | None = None
        self.cluster: EtcdCluster | None = None
        self.connections: set[Connection] = set()
        self.request_memory = RequestMemory(settings.queued_max_request_bytes)
        self.jwks = oauth_jwks(settings)  # before the loop runs: a JWKS that cannot be read stops start-up
        self.endpoints = endpoints(settings, self.jwks)  # ... as does a keystore that fails
        self._listeners: list[Listener] = []
        self._stop = asyncio.Event()
        self._log_timer: asyncio.TimerHandle | None = None
        self._retention_timer: asyncio.TimerHandle | None = None
        self._admin: AdminEndpoint | None = None
        self._shared_timer: asyncio.TimerHandle | None = None
        self.producer_ids = None  # cluster mode's (EtcdProducerIds)

    async def startup(self) -> None:
        started = time.monotonic()
        # one Users for every SASL listener and the SCRAM admin APIs (coordinator/security.endpoints)
        users = next((e.users for e in self.endpoints if e.users is not None), None)
        if self.settings.cluster_etcd_endpoints:  # cluster mode: etcd says who owns what
            from groupd.coordinator.cluster.etcd.cluster import EtcdCluster  # its client only where it is used

            self.cluster = EtcdCluster(self.settings)
            await self.cluster.connect()
            self.node = Node(self.settings, users, self.cluster)
            await self._cluster_producer_ids()
        elif self.worker is None:
            self.node = Node(self.settings, users)
        else:
            self.node = Node(self.settings, users, self.worker.view, shares_data_dir=True)
            self.node.producer_id_block = producer_id_block(self.worker.index, self.worker.view.count, wall_ms())
        metrics_url = await metrics_http.serve(self.settings, self.node)
        if self.worker is not None:
            await self._start_worker()
        # the transaction coordinator of the `__transaction_state` partitions riding on this node's offsets
        # partitions; markers and verifications for other workers or nodes go over the wire
        channel = None if self.cluster is None and self.worker is None else BrokerChannel(self.settings,
                                                                                          self.node.cluster)
        self.node.broker_channel = channel  # also the share-state requests to data partitions' leaders
        self.node.transactions = TransactionCoordinator(self.settings, self.node,
                                                        producer_ids_for(self.node).allocate, channel)
        await self.node.transactions.start()  # loaded before the node serves (small: one record per id)
        # told what it owns (Kafka's onElection); partitions load off the loop, LOAD_IN_PROGRESS until then
        groups, view = self.node.coordinator, self.node.cluster
        groups.start(p for p in range(groups.partitions) if view.owns(p))
        plane = plane_for(self.node)
        if getattr(plane, "DISK", False):  # the data partitions are recovered before the node serves
            await plane.preload()
        for listener, endpoint in zip(self.settings.listeners, self.endpoints):
            self._listen(listener.host, listener.port, endpoint)
        if self.cluster is not None:  # registered with the bound ports: claims start from here
            await self.cluster.start(self.node.coordinator,
                                     {e.name: (e.advertised.host, e.advertised.port) for e in self.endpoints})
        admin_url = await self._start_admin()
        self._tick_log_limits()
        if self.jwks is not None:
            self.jwks.start()
        if plane_for(self.node) is not None:
            self._check_records_retention()
        if self.worker is not None:
            self.worker.serving(self.node, metrics_url)
        bound = ", ".join(f"{l.name}://{l.address[0]}:{l.address[1]}" for l in self._listeners)
        advertised = ", ".join(f"{e.name}://{e.advertised.host}:{e.advertised.port} ({e.protocol})"
                               for e in self.endpoints)
        log.info("groupd ready listeners=%s advertised=%s node.id=%d cluster.id=%s data.dir=%s "
                 "topics=%d metrics=%s admin=%s startup_ms=%d", bound, advertised, self.settings.node_id,
                 self.node.cluster_id, self.settings.data_dir, len(self.node.catalog), metrics_url or "off",
                 admin_url or "off", (time.monotonic() - started) * 1000)

    async def _cluster_producer_ids(self) -> None:
        """Cluster mode: producer ids from blocks granted through etcd (coordinator/cluster/etcd/
        producer_ids.py), the first one before the node serves; a fresh counter starts above the ids
        that nodes handed out as residues of their node id before it existed."""
        from groupd.coordinator.cluster.etcd.producer_ids import EtcdProducerIds

        floor = await asyncio.get_running_loop().run_in_executor(None, residue_ids_floor, self.settings.data_dir)
        self.producer_ids = EtcdProducerIds(self.cluster, floor)
        await self.producer_ids.start()
        register_producer_ids(self.node, self.producer_ids)

    async def _start_admin(self) -> str | None:
        """The admin HTTP endpoint (fault injection), when `admin.listener` is set."""
        if not self.settings.admin_listener:
            return None
        coordinator = self.node.coordinator
        users = Users(self.settings.sasl_users, ["PLAIN"]) if self.settings.sasl_users else None
        self._admin = AdminEndpoint(Chaos(self.node, self.connections), lambda: readiness.is_ready(coordinator),
                                    users, frozenset(self.settings.super_users))
        return await self._admin.start(self.settings.admin_listener)

    async def _start_worker(self) -> None:
        """Connect to the supervisor; a worker that is not the controller follows the controller's files
        and hands it its writes and auto-creates."""
        worker = self.worker
        await worker.start(self.node, lambda: self.request_stop("supervisor-gone"))
        if not self.node.is_controller:
            self.node.controller = worker
            worker.shared = SharedFiles(self.node)
            self._follow_shared_files(worker.shared)

    def _follow_shared_files(self, shared: SharedFiles) -> None:
        shared.check()
        self._shared_timer = asyncio.get_running_loop().call_later(CHECK_INTERVAL_S, self._follow_shared_files,
                                                                   shared)

    def _listen(self, host: str, port: int, endpoint: Endpoint) -> None:
        def connection() -> Connection:
            return Connection(self.node, self.connections, self.request_memory, bound[0])

        def handshake_failed(peer: str, error: Exception) -> None:
            authentication_failed(endpoint, "TLS", peer, "tls_handshake", str(error) or type(error).__name__)

        bound: list[Endpoint] = []  # the endpoint with its bound port, known once the socket is bound
        factory = connection
        if endpoint.ssl is not None:
            factory = lambda: TlsTransport(endpoint.ssl, connection, handshake_failed)  # noqa: E731
        listener = Listener(endpoint.name, host, port, factory)
        bound.append(endpoint.bound(listener.address[1]))
        self.endpoints[self.endpoints.index(endpoint)] = bound[0]
        self._listeners.append(listener)

    def _tick_log_limits(self) -> None:
        """Report suppressed log lines once their window ends, even if nothing else is logged."""
        bad_frame_log.tick()
        accept_log.tick()
        failure_log.tick()
        tick_denial_logs()
        self._log_timer = asyncio.get_running_loop().call_later(LOG_LIMIT_TICK_S, self._tick_log_limits)

    def _check_records_retention(self) -> None:
        """The records plane's retention by time, every log.retention.check.interval.ms (Kafka's
        check; the first one runs at start-up, when the plane is still empty)."""
        try:
            plane_for(self.node).enforce_retention(wall_ms())
        finally:
            self._retention_timer = asyncio.get_running_loop().call_later(
                self.settings.log_retention_check_interval_ms / 1000, self._check_records_retention)

    def request_stop(self, signame: str = "") -> None:
        if not self._stop.is_set():
            log.info("shutdown requested signal=%s", signame or "-")
            self._stop.set()

    async def shutdown(self) -> None:
        for timer in (self._log_timer, self._retention_timer, self._shared_timer):
            if timer is not None:
                timer.cancel()
        if self.jwks is not None:
            self.jwks.close()
        for listener in self._listeners:
            listener.close()
        if self._admin is not None:
            self._admin.close()
        if self.node is not None:
            self.node.release_all()  # held fetches answer now
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        if self.producer_ids is not None:
            self.producer_ids.stop()
        if self.cluster is not None:
            await self.cluster.stop()  # partitions handed over, lease revoked
        if self.node is not None:
            if self.node.transactions is not None:
                await self.node.transactions.close()
                if self.node.transactions.channel is not None:
                    self.node.transactions.channel.close()
            await self.node.coordinator.close()  # in-flight writes finish, every log is fsynced and closed
            await self._close_records()
            self.node.close()  # releases the data dir's lock
        if self.worker is not None:
            self.worker.close()
        log.info("groupd stopped")

    async def _close_records(self) -> None:
        """The disk plane: writes finish, logs fsynced and closed; the memory plane: its exact log ends
        stored, where each partition resumes."""
        plane = plane_for(self.node)
        try:
            if getattr(plane, "DISK", False):
                await plane.close()
            elif plane is not None:
                save_log_ends(self.node)
        except OSError as e:
            log.error("records plane not closed cleanly: %s", e)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.getsignal(sig)
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        try:
            await self.startup()
            await self._stop.wait()
            await self.shutdown()
        finally:
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)


def run(settings: Settings, worker: SupervisorLink | None = None) -> None:
    run_loop(Server(settings, worker).serve())


def run_loop(main):
    """Run the coroutine `main` on a new loop (new_event_loop) and return its result. What it leaves
    pending, such as a worker's link to its supervisor when start-up fails, is cancelled and let
    finish before the loop closes (as asyncio.run does): no "Task was destroyed but it is pending!"
    after the one-line error."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:  # (gather of nothing would make its future on another loop)
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            loop.close()
