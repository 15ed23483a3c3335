"""Cluster mode: the nodes and the ownership of every offsets partition, kept in etcd under each node's
lease, and this node's `ClusterView` of them; it tells the runtime what to `gain` and `lose`.

Keys (under `/groupd/`): `nodes/<id>` the node's advertised listeners, `owners/<p>` the owner's
node id and `compactions/<p>` (whose revisions stamp compactions' output), all bound to the node's
lease; `manifests/<p>` the stamps whose segments count
(storage/owned_log.py `Ownership`), `cluster.id`, and the shared documents (`topics`, `acls.json`,
`scram-credentials.json`, `group_configs.json`: coordinator/etcd_catalog.py, coordinator/etcd_files.py),
without a lease.
README "Cluster mode" says what this guarantees and why.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import math
import time
import uuid
from collections.abc import Sequence

from storage.owned_log import Ownership

from .cluster import Broker, ClusterError, ClusterView
from .etcd_catalog import CATALOG_KEY, EtcdCatalog
from .etcd_files import EtcdDocument, EtcdFile
from .runtime import PartitionState

log = logging.getLogger("groupd")

PREFIX = "/groupd/"


def rendezvous(partition: int, nodes: Sequence[int]) -> int | None:
    """The node that should own `partition` among live `nodes` (highest random weight): a node that
    joins or leaves moves only the partitions it wins or held."""
    def weight(node: int) -> bytes:
        return hashlib.blake2b(f"{partition}/{node}".encode(), digest_size=8).digest()
    return max(nodes, key=weight, default=None)


def _key(*parts: object) -> bytes:
    return (PREFIX + "/".join(map(str, parts))).encode()


class EtcdCluster(ClusterView):
    """This node's registration, lease and claims in etcd, polled every `tick` (a sixth of the lease):
    renew the lease, read the live nodes and the owners, release what another node should own,
    claim what this one should own and nobody holds."""

    def __init__(self, settings, client_factory=None) -> None:
        self.settings = settings
        self.node_id = settings.node_id
        self.lease_s = settings.cluster_lease_ms / 1000
        self.tick = self.lease_s / 6
        self.endpoints = list(settings.cluster_etcd_endpoints)
        self._client_factory = client_factory
        self.client = None
        self.lease = None
        self.renewed = -math.inf  # monotonic s when the last successful keep-alive was *sent*
        self.cluster_id: str | None = None
        self.live: dict[int, Broker] = {}
        self.owners: dict[int, int] = {}  # partition → owner node id, as etcd last said
        self.claims: dict[int, int] = {}  # partition → the revision of its owner's claim, as etcd last said
        self.mine: dict[int, int] = {}  # partition → the stamp (revision) of this node's claim
        self._moving: set[int] = set()  # claims and releases under way
        self.coordinator_runtime = None
        self._addresses: dict[str, tuple[str, int]] = {}
        self._task: asyncio.Task | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task] = set()
        self._stale_lease = None  # the lease of before a fence, revoked once etcd answers again
        self._followed: dict[str, object] = {}  # etcd key → follow(value, revision): shared documents

    # -- the view ---------------------------------------------------------------------------------

    def brokers(self) -> Sequence[Broker]:
        return [self.live[n] for n in sorted(self.live)]

    def controller_id(self) -> int:
        return min(self.live, default=self.node_id)

    def coordinator(self, partition: int) -> int | None:
        if partition in self.mine:
            return self.node_id
        owner = self.owners.get(partition)
        return owner if owner is not None and owner != self.node_id and owner in self.live else None

    def owns(self, partition: int) -> bool:
        return partition in self.mine

    def keeps_shared_state(self) -> bool:
        return True

    def topic_catalog(self, data_dir: str) -> EtcdCatalog:
        """The cluster's catalog, in etcd; other nodes' changes arrive with every poll."""
        catalog = EtcdCatalog(self._document(CATALOG_KEY), data_dir)
        self._followed[CATALOG_KEY] = catalog.follow
        return catalog

    def shared_file(self, file, on_change) -> EtcdFile:
        shared = EtcdFile(file, self._document(PREFIX + file.name), on_change)
        self._followed[shared.document.key] = shared.follow
        return shared

    def _document(self, key: str) -> EtcdDocument:
        """A shared document: read at start-up over HTTP, changed while serving through this client."""
        return EtcdDocument(self.endpoints, key, max(self.lease_s / 4, 0.5), lambda: self.client)

    # -- etcd -------------------------------------------------------------------------------------

    def _new_client(self, endpoint: str):
        if self._client_factory is not None:
            return self._client_factory(endpoint)
        try:
            import aetcd  # the `cluster` extra: only cluster mode needs it
        except ImportError:
            raise ClusterError("cluster.etcd.endpoints is set but the etcd client is missing: "
                               "pip install 'groupd[cluster]'") from None

        host, _, port = endpoint.rpartition(":")
        return aetcd.Client(host or "127.0.0.1", int(port), timeout=max(self.lease_s / 4, 0.5))

    async def connect(self) -> None:
        """Reach etcd (the first endpoint that answers) and agree on the cluster id."""
        errors = []
        for endpoint in self.endpoints * 2:
            client = self._new_client(endpoint)
            try:
                await client.connect()
                await client.transaction(compare=[client.transactions.create(_key("cluster.id")) == 0],
                                         success=[client.transactions.put(_key("cluster.id"), _new_cluster_id())],
                                         failure=[])
                self.cluster_id = (await client.get(_key("cluster.id"))).value.decode()
            except Exception as e:
                errors.append(f"{endpoint}: {e}")
                await client.close()
                continue
            self.client = client
            return
        raise ClusterError(f"cannot reach etcd at cluster.etcd.endpoints={','.join(self.endpoints)}: "
                           f"{'; '.join(errors[-len(self.endpoints):])}")

    async def start(self, coordinator, addresses: dict[str, tuple[str, int]]) -> None:
        """Register with this node's advertised `addresses` (listener name → host, port) and keep
        the runtime's partitions in line with etcd from now on."""
        self.coordinator_runtime = coordinator
        self._addresses = addresses
        try:
            await self._register()
            await self._poll()
        except Exception as e:
            raise ClusterError(f"cannot register node.id={self.node_id} in etcd: {e!r}") from None
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._arm_watchdog()

    async def _register(self) -> None:
        client = self.client
        self.lease = await client.lease(math.ceil(self.lease_s))
        self.renewed = time.monotonic()
        value = json.dumps({"listeners": {n: list(a) for n, a in self._addresses.items()}}).encode()
        await client.put(_key("nodes", self.node_id), value, lease=self.lease)
        log.info("cluster node registered node.id=%d lease=%x lease_ms=%d", self.node_id, self.lease.id,
                 self.settings.cluster_lease_ms)

    async def _run(self) -> None:
        failures = 0
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self._poll()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                if failures == 1 or failures % 20 == 0:
                    log.warning("etcd unreachable failures=%d: %r", failures, e)

    async def _poll(self) -> None:
        if self.lease is None:  # fenced: a new lease, registered again (the old one's keys go with it)
            if self._stale_lease is not None:
                try:
                    await self._stale_lease.revoke()  # this node's old claims end now, not at its expiry
                except Exception:
                    pass  # expired already, or etcd still away (then registering fails too)
            await self._register()
            self._stale_lease = None
        sent = time.monotonic()
        reply = await self.lease.refresh()
        if reply.TTL <= 0:
            log.warning("cluster lease expired lease=%x: registering again", self.lease.id)
            self.fence("lease expired")
            return
        self.renewed = sent
        nodes = await self.client.get_prefix(_key("nodes", ""))
        live = {}
        for kv in nodes:
            node = int(kv.key.decode().rsplit("/", 1)[1])
            listeners = json.loads(kv.value)["listeners"]
            live[node] = Broker(node, {n: (a[0], a[1]) for n, a in listeners.items()})
        self.live = live
        owners = await self.client.get_prefix(_key("owners", ""))
        self.owners = {int(kv.key.decode().rsplit("/", 1)[1]): int(kv.value) for kv in owners}
        self.claims = {int(kv.key.decode().rsplit("/", 1)[1]): kv.create_revision for kv in owners}
        for key, follow in self._followed.items():
            found = await self.client.get(key.encode())
            if found is not None:
                follow(found.value, found.mod_revision)
        self._reconcile()

    def _reconcile(self) -> None:
        live = sorted(self.live)
        for p in range(self.coordinator_runtime.partitions):
            if p in self._moving:
                continue
            should = rendezvous(p, live)
            if p not in self.mine and self.owners.get(p) == self.node_id:  # a claim this node gave up
                self._spawn(p, self._delete_owner(p, self.claims[p]))  # (a failed release, a fence)
            elif p in self.mine and should != self.node_id and should is not None:
                self._spawn(p, self._release(p))
            elif p not in self.mine and should == self.node_id and p not in self.owners:
                self._spawn(p, self._claim(p))

    def _spawn(self, p: int, work) -> None:
        self._moving.add(p)
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)

        def done(t: asyncio.Task) -> None:
            self._background.discard(t)
            self._moving.discard(p)
            if not t.cancelled() and t.exception() is not None:
                log.warning("partition move failed partition=%d: %r", p, t.exception())
        task.add_done_callback(done)

    # -- claims and releases ------------------------------------------------------------------------

    async def _claim(self, p: int) -> None:
        """Create `owners/<p>` under this node's lease if nobody holds it; its revision is the stamp
        of this ownership's segments. Load while LOAD_IN_PROGRESS, then record in the manifest."""
        client, tx = self.client, self.client.transactions
        ok, responses = await client.transaction(
            compare=[tx.create(_key("owners", p)) == 0],
            success=[tx.put(_key("owners", p), str(self.node_id).encode(), lease=self.lease),
                     tx.get(_key("manifests", p))], failure=[])
        if not ok:
            return
        stamp = responses[0].response_put.header.revision
        manifest = [tuple(e) for e in json.loads(responses[1][0][0])] if responses[1] else [(0, None)]
        self.mine[p] = stamp
        self.owners[p] = self.node_id
        log.info("partition claimed partition=%d stamp=%d", p, stamp)
        state = await self.coordinator_runtime.gain(p, _Claim(self, p, stamp, manifest))
        if state is not PartitionState.ACTIVE and self.mine.get(p) == stamp:
            del self.mine[p]  # a failed load gives the partition up (another node, or this one later, retries)
            await self._delete_owner(p, stamp)

    async def _confirm(self, p: int, stamp: int, manifest: list, next_offset: int) -> list | None:
        """The manifest now ends the deposed owner's stamp at `next_offset` and counts this one's;
        only while this node still holds `owners/<p>` with this claim. The new manifest, or None."""
        closed = [list(e) for e in manifest]
        if closed and closed[-1][1] is None:
            closed[-1][1] = next_offset
        confirmed = closed + [[stamp, None]]
        tx = self.client.transactions
        ok, _ = await self.client.transaction(
            compare=[tx.create(_key("owners", p)) == stamp],
            success=[tx.put(_key("manifests", p), json.dumps(confirmed).encode())], failure=[])
        return confirmed if ok else None

    async def _compaction_stamp(self, p: int, stamp: int) -> int | None:
        """A revision of etcd's for a compaction's output, while this claim holds (None if not)."""
        tx = self.client.transactions
        ok, responses = await self.client.transaction(
            compare=[tx.create(_key("owners", p)) == stamp],
            success=[tx.put(_key("compactions", p), str(stamp).encode(), lease=self.lease)], failure=[])
        return responses[0].response_put.header.revision if ok else None

    async def _swap(self, p: int, stamp: int, manifest: list, compacted: list) -> tuple[bool, list | None]:
        """The manifest becomes `compacted` if it is still `manifest` and this claim holds: (True,
        compacted). Else (False, the manifest as etcd has it if this claim still holds, else None):
        a swap whose answer was lost may have taken effect."""
        tx = self.client.transactions
        ok, responses = await self.client.transaction(
            compare=[tx.create(_key("owners", p)) == stamp,
                     tx.value(_key("manifests", p)) == json.dumps(manifest).encode()],
            success=[tx.put(_key("manifests", p), json.dumps(compacted).encode())],
            failure=[tx.get(_key("owners", p)), tx.get(_key("manifests", p))])
        if ok:
            return True, compacted
        owner, current = responses
        held = bool(owner) and owner[0][1].create_revision == stamp and bool(current)
        return False, json.loads(current[0][0]) if held else None

    async def _release(self, p: int) -> None:
        """Hand `p` over: stop serving it (in-flight writes finish), end this stamp in the manifest
        at the log's next offset, delete `owners/<p>` (one transaction, only while it is ours)."""
        stamp = self.mine.pop(p)
        end = await self.coordinator_runtime.lose(p)
        log.info("partition released partition=%d stamp=%d next_offset=%s", p, stamp, end)
        tx = self.client.transactions
        success = [tx.delete(_key("owners", p))]
        if end is not None:
            current = await self.client.get(_key("manifests", p))
            entries = json.loads(current.value) if current is not None else []
            if entries and entries[-1] == [stamp, None]:
                entries[-1][1] = end
                success.append(tx.put(_key("manifests", p), json.dumps(entries).encode()))
        await self.client.transaction(compare=[tx.create(_key("owners", p)) == stamp], success=success, failure=[])
        self.owners.pop(p, None)

    async def _delete_owner(self, p: int, stamp: int) -> None:
        tx = self.client.transactions
        await self.client.transaction(compare=[tx.create(_key("owners", p)) == stamp],
                                      success=[tx.delete(_key("owners", p))], failure=[])

    # -- fencing ----------------------------------------------------------------------------------

    def _arm_watchdog(self) -> None:
        """Every tick, on this node's monotonic clock: half a lease without a renewal and this node
        stops serving, before etcd can let the lease expire and another node load its partitions."""
        if self.mine and time.monotonic() - self.renewed > self.lease_s / 2:
            self.fence(f"no lease renewal for {time.monotonic() - self.renewed:.1f} s")
        self._watchdog = asyncio.get_running_loop().call_later(self.tick / 2, self._arm_watchdog)

    def fence(self, why: str) -> None:
        """Lose every partition at once (writes in flight answer NOT_COORDINATOR), forget the lease;
        the next successful poll registers with a new one and claims again."""
        lost = sorted(self.mine)
        log.warning("cluster fenced node.id=%d partitions=%d: %s", self.node_id, len(lost), why)
        self.mine.clear()
        self._stale_lease, self.lease = self.lease or self._stale_lease, None
        for p in lost:
            self._spawn(p, self.coordinator_runtime.lose(p, fenced=True))

    async def stop(self) -> None:
        """Shutdown: hand every partition over and leave (the lease is revoked)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._task is not None:
            self._task.cancel()
        for task in list(self._background):
            await asyncio.gather(task, return_exceptions=True)
        try:
            for p in sorted(self.mine):
                await self._release(p)
            if self.lease is not None:
                await self.lease.revoke()
        except Exception as e:
            log.warning("cluster leave incomplete (the lease expires instead): %r", e)
        if self.client is not None:
            await self.client.close()


class _Claim:
    """What `GroupCoordinator.gain` asks a cluster claim: the segments to load, and whether the
    load may become the partition's state (the manifest updated while the claim still holds)."""

    def __init__(self, cluster: EtcdCluster, p: int, stamp: int, manifest: list) -> None:
        self.cluster, self.p, self.stamp, self.manifest = cluster, p, stamp, manifest

    async def ownership(self) -> Ownership:
        # the deposed owner's stamp still open: it did not hand over (a crash, a lost lease), and this
        # node cannot know when it last renewed; it stopped writing by then (its watchdog)
        if self.manifest and self.manifest[-1][1] is None and self.manifest[-1][0] != 0:
            await asyncio.sleep(self.cluster.lease_s)
        return Ownership(self.stamp, tuple((s, e) for s, e in self.manifest))

    async def confirm(self, next_offset: int) -> bool:
        if self.cluster.mine.get(self.p) != self.stamp:
            return False
        confirmed = await self.cluster._confirm(self.p, self.stamp, self.manifest, next_offset)
        if confirmed is not None:
            self.manifest = confirmed
        return confirmed is not None

    def counted(self) -> tuple[tuple[int, int | None], ...]:
        return tuple((s, e) for s, e in self.manifest)

    async def compaction_stamp(self) -> int | None:
        if self.cluster.mine.get(self.p) != self.stamp:
            return None
        return await self.cluster._compaction_stamp(self.p, self.stamp)

    async def swap(self, counted: tuple, stamp: int, end: int) -> bool:
        if self.cluster.mine.get(self.p) != self.stamp:
            return False
        ok, current = await self.cluster._swap(self.p, self.stamp, [list(e) for e in counted],
                                               [[stamp, end], [self.stamp, None]])
        if current is not None and current[-1] == [self.stamp, None]:
            self.manifest = current  # after a swap whose answer was lost, the next one starts from etcd's
        return ok


def _new_cluster_id() -> bytes:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes)[:22]  # as storage/catalog.py makes a lone node's
