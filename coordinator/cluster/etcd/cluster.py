"""Cluster mode: the nodes and the ownership of every offsets partition, kept in etcd under each node's
lease, and this node's `ClusterView` of them; it tells the runtime what to `gain` and `lose`.

Keys (under `cluster.etcd.prefix`, `/groupd/` by default): `nodes/<id>` the node's advertised
listeners, `owners/<p>` the owner's node id and `compactions/<p>` (whose revisions stamp
compactions' output), all bound to the node's lease; `manifests/<p>` the stamps whose segments count
(storage/owned_log.py `Ownership`), `cluster.id` and `data.dir.id` (the shared data dir's
`directory.id`, which its meta.properties names with the cluster id: `bind_data_dir`),
`producer.ids` (the next producer id block: producer_ids.py), and the
shared documents (`topics`, `acls.json`, `scram-credentials.json`, `group_configs.json`:
coordinator/cluster/etcd/catalog.py,
coordinator/cluster/etcd/files.py), without a lease.
docs/workers-and-cluster.md says what this guarantees and why. Over 500 lines because the lease,
the claims, the data dir's binding and the fencing are one protocol with etcd, sharing the lease and
the poll; connecting to etcd lives in client.py, the shared documents in files.py and catalog.py.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import json
import logging
import math
import os
import ssl
import time
import uuid
from collections.abc import Sequence

from groupd.coordinator.cluster.view import Broker, ClusterError, ClusterView
from groupd.coordinator.core.partitioning import data_home
from groupd.coordinator.runtime.partitions import PartitionState
from groupd.storage.catalog import CLUSTER_MARK, new_cluster_id, read_meta, write_meta
from groupd.storage.files import DataDirError
from groupd.storage.owned_log import Ownership

from .catalog import EtcdCatalog
from .client import gateway_ssl, new_client, reason, tls_files
from .files import EtcdDocument, EtcdFile

log = logging.getLogger("groupd")

CONVERTED = uuid.UUID("9b1f4a52-2c55-4c0e-8f43-3d1f0c7e2a61")  # directory.id of a lone node's dir made a cluster's


def rendezvous(partition: int, nodes: Sequence[int]) -> int | None:
    """The node that should own `partition` among live `nodes` (highest random weight): a node that
    joins or leaves moves only the partitions it wins or held."""
    def weight(node: int) -> bytes:
        return hashlib.blake2b(f"{partition}/{node}".encode(), digest_size=8).digest()
    return max(nodes, key=weight, default=None)




class EtcdCluster(ClusterView):
    """This node's registration, lease and claims in etcd. Every `tick` (a sixth of the lease) the
    lease is renewed and, separately, a poll reads the live nodes and the owners, releases what another
    node should own and claims what this one should own and nobody holds."""

    def __init__(self, settings, client_factory=None) -> None:
        self.settings = settings
        self.node_id = settings.node_id
        self.lease_s = settings.cluster_lease_ms / 1000
        self.tick = self.lease_s / 6
        self.endpoints = list(settings.cluster_etcd_endpoints)  # URLs: http://host:port, https://host:port
        self.https = any(e.startswith("https://") for e in self.endpoints)  # then cluster.etcd.ssl.* apply
        self.prefix = settings.cluster_etcd_prefix + "/"
        self._client_factory = client_factory
        self.client = None
        self.lease = None
        self.renewed = -math.inf  # monotonic s when the last successful keep-alive was *sent*
        self.cluster_id: str | None = None
        self.live: dict[int, Broker] = {}
        self.owners: dict[int, int] = {}  # partition → owner node id, as etcd last said
        self.claims: dict[int, int] = {}  # partition → the revision of its owner's claim, as etcd last said
        self.mine: dict[int, int] = {}  # partition → the stamp (revision) of this node's claim
        # partition → its claims and releases under way: a fence's release can start while a claim
        # is still in flight, and the partition is not reconciled again until both are over
        self._moving: dict[int, int] = {}
        self.coordinator_runtime = None
        self._addresses: dict[str, tuple[str, int]] = {}
        self._task: asyncio.Task | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task] = set()
        self._stale_lease = None  # the lease of before a fence, revoked once etcd answers again
        self._followed: dict[str, object] = {}  # etcd key → follow(value, revision): shared documents
        # start-up: claims are summed up in one line once this node holds what it wins (or after a while)
        self._settling: dict[int, int] | None = {}
        self._settle_by = math.inf

    def key(self, *parts: object) -> bytes:
        return (self.prefix + "/".join(map(str, parts))).encode()

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

    def leader(self, topic: str, partition: int) -> int | None:
        """A data partition is led by the owner of its home offsets partition (`data_home`): one leader
        per data partition in every node's Metadata, which moves with that partition's etcd claim."""
        return self.coordinator(data_home(topic, partition, self.settings.offsets_topic_num_partitions))

    def data_stamp(self, topic: str, partition: int) -> int:
        """The etcd revision of this node's claim on the data partition's home: its segments' stamp,
        so what a deposed leader writes late is never read (storage/records_plane/segments.py)."""
        return self.mine.get(data_home(topic, partition, self.settings.offsets_topic_num_partitions), 0)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.coordinator_epoch(data_home(topic, partition, self.settings.offsets_topic_num_partitions))

    def coordinator_epoch(self, partition: int) -> int:
        """The create revision of `owners/<p>`: the owner's stamp, known to every node, larger for each
        later claim (0 while nobody holds it)."""
        return self.mine.get(partition) or self.claims.get(partition, 0)

    def keeps_shared_state(self) -> bool:
        return True

    def topic_catalog(self, data_dir: str) -> EtcdCatalog:
        """The cluster's catalog, in etcd; other nodes' changes arrive with every poll."""
        document = self._document(self.prefix + "topics")
        catalog = EtcdCatalog(document, data_dir)
        self._followed[document.key] = catalog.follow
        return catalog

    def shared_file(self, file, on_change) -> EtcdFile:
        shared = EtcdFile(file, self._document(self.prefix + file.name), on_change)
        self._followed[shared.document.key] = shared.follow
        return shared

    def _document(self, key: str) -> EtcdDocument:
        """A shared document: read at start-up over HTTP, changed while serving through this client."""
        return EtcdDocument(self.endpoints, key, max(self.lease_s / 4, 0.5), self._ssl(), lambda: self.client)

    # -- etcd -------------------------------------------------------------------------------------

    def _new_client(self, endpoint: str):
        if self._client_factory is not None:
            return self._client_factory(endpoint)
        return new_client(self.settings, endpoint, max(self.lease_s / 4, 0.5))

    def _ssl(self) -> ssl.SSLContext | None:
        """The TLS context of the JSON gateway's https:// calls (the shared documents)."""
        return gateway_ssl(self.settings) if self.https else None

    async def connect(self) -> None:
        """Reach etcd (the first endpoint that answers), agree on the cluster id and check that
        data.dir is the cluster's (`bind_data_dir`)."""
        if self.https:
            tls_files(self.settings)  # unreadable files: one line now, not one error per endpoint
        errors = []
        for endpoint in self.endpoints * 2:
            client = self._new_client(endpoint)
            try:
                await client.connect()
                await client.get(self.key("cluster.id"))
            except Exception as e:
                errors.append(f"{endpoint}: {reason(e)}")
                await client.close()
                continue
            self.client = client
            break
        else:
            hint = "; check cluster.etcd.ssl.cafile, certfile and keyfile" if self.https else ""
            raise ClusterError(f"cannot reach etcd at cluster.etcd.endpoints={','.join(self.endpoints)}: "
                               f"{'; '.join(errors[-len(self.endpoints):])}{hint}")
        try:
            self.cluster_id = await self.bind_data_dir()
        except (ClusterError, DataDirError):
            await self.client.close()
            raise
        except OSError as e:
            await self.client.close()
            raise DataDirError(f"cannot write {e.filename or self.settings.data_dir}: {e.strerror}") from None
        except Exception as e:
            await self.client.close()
            raise ClusterError(f"etcd failed while checking data.dir against the cluster: {reason(e)}") from None

    async def bind_data_dir(self) -> str:
        """The cluster id, once data.dir and etcd (under the prefix) name each other: the data dir's
        meta.properties holds the cluster id, its `directory.id` and `cluster.etcd.prefix`; etcd holds
        `cluster.id` and `data.dir.id`. A fresh etcd takes the data dir's; a fresh data dir made by
        this node binds a fresh etcd (a data dir is written before etcd, so a node that finds etcd
        bound finds the data dir it names). Any other mismatch is a ClusterError naming both."""
        data_dir, prefix = self.settings.data_dir, self.settings.cluster_etcd_prefix
        where = f"etcd prefix {prefix} at {','.join(self.endpoints)}"
        try:
            os.makedirs(data_dir, exist_ok=True)
        except OSError as e:
            raise DataDirError(f"cannot create data.dir {data_dir}: {e.strerror}") from None
        for _ in range(5):
            cluster_id, dir_id = (await self._get("cluster.id")), (await self._get("data.dir.id"))
            meta = read_meta(data_dir)
            mine = meta is not None and bool(meta.get(CLUSTER_MARK))
            if dir_id is not None:  # etcd names its data dir: this must be it
                if mine and (meta["cluster.id"], meta.get("directory.id")) == (cluster_id, dir_id):
                    return cluster_id
                raise ClusterError(
                    f"data.dir {data_dir} is not cluster {cluster_id}'s data dir: {where} records directory.id "
                    f"{dir_id}, and {data_dir} is {_describe(meta)}; set data.dir to the cluster's shared data dir, "
                    "or cluster.etcd.prefix to another prefix for a cluster of its own")
            if meta is not None and cluster_id is not None and meta["cluster.id"] != cluster_id:
                raise ClusterError(f"data.dir {data_dir} is {_describe(meta)}, but {where} is cluster {cluster_id}'s: "
                                   "set data.dir or cluster.etcd.prefix to the same cluster's")
            if mine and cluster_id is None and _stamped(data_dir):
                raise ClusterError(
                    f"data.dir {data_dir} is {_describe(meta)}, but {where} holds no cluster (etcd's keys lost, or "
                    "another etcd or prefix): its manifests say what the segments count; point "
                    "cluster.etcd.endpoints and cluster.etcd.prefix at that cluster's etcd")
            if meta is None and cluster_id is not None and not _stamped(data_dir) \
                    and await self.client.get_prefix(self.key("manifests", "")):
                raise ClusterError(
                    f"data.dir {data_dir} is new, but {where} holds cluster {cluster_id}'s manifests from an "
                    "earlier run: set data.dir to that cluster's shared data dir, or cluster.etcd.prefix to "
                    "another prefix for a new cluster")
            if not mine:  # a fresh dir, a lone node's (it becomes the cluster's), one of before data.dir.id
                # a lone node's dir keeps its cluster id, and gets the same directory.id at every node
                directory = uuid.uuid4() if meta is None else uuid.uuid5(CONVERTED, meta["cluster.id"])
                props = {"version": "1", "cluster.id": (meta or {}).get("cluster.id") or cluster_id or new_cluster_id(),
                         "directory.id": str(directory), CLUSTER_MARK: prefix}
                if meta is None:
                    if not write_meta(data_dir, props, exclusive=True):
                        continue  # another node made it first: read it
                else:
                    write_meta(data_dir, props)
                log.info("data dir bound to cluster data.dir=%s cluster.id=%s directory.id=%s", data_dir,
                         props["cluster.id"], props["directory.id"])
                meta = props
            tx = self.client.transactions
            await self.client.transaction(
                compare=[tx.create(self.key("data.dir.id")) == 0],
                success=[tx.put(self.key("cluster.id"), meta["cluster.id"].encode()),
                         tx.put(self.key("data.dir.id"), meta["directory.id"].encode())], failure=[])
        raise ClusterError(f"data.dir {data_dir} and {where} kept changing while this node read them")

    async def _get(self, name: str) -> str | None:
        found = await self.client.get(self.key(name))
        return None if found is None else found.value.decode()

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
        await client.put(self.key("nodes", self.node_id), value, lease=self.lease)
        log.info("cluster node registered node.id=%d lease=%x lease_ms=%d", self.node_id, self.lease.id,
                 self.settings.cluster_lease_ms)

    async def _run(self) -> None:
        renewing = asyncio.get_running_loop().create_task(self._keep_alive())
        failures = 0
        try:
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
        finally:
            renewing.cancel()

    async def _keep_alive(self) -> None:
        """Renew the lease every tick, on its own: a poll's reads (nodes, owners, the shared
        documents) take several round trips, and a slow etcd must not delay the renewal the watchdog
        counts on. Failures are the poll's to log; the watchdog fences if renewals stop."""
        while True:
            await asyncio.sleep(self.tick)
            lease = self.lease
            if lease is None:  # fenced: the poll registers a new lease
                continue
            sent = time.monotonic()
            try:
                reply = await lease.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:
                continue
            if lease is not self.lease:  # fenced meanwhile: this renewal was of the old lease
                continue
            if reply.TTL <= 0:
                log.warning("cluster lease expired lease=%x: registering again", lease.id)
                self.fence("lease expired")
            else:
                self.renewed = sent

    async def _poll(self) -> None:
        if self.lease is None:  # fenced: a new lease, registered again (the old one's keys go with it)
            if self._stale_lease is not None:
                try:
                    await self._stale_lease.revoke()  # this node's old claims end now, not at its expiry
                except Exception:
                    pass  # expired already, or etcd still away (then registering fails too)
            await self._register()
            self._stale_lease = None
        nodes = await self.client.get_prefix(self.key("nodes", ""))
        live = {}
        for kv in nodes:
            node = int(kv.key.decode().rsplit("/", 1)[1])
            listeners = json.loads(kv.value)["listeners"]
            live[node] = Broker(node, {n: (a[0], a[1]) for n, a in listeners.items()})
        self.live = live
        owners = await self.client.get_prefix(self.key("owners", ""))
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
        if self._settling is not None:
            self._settle(live)

    def _settle(self, live: list[int]) -> None:
        """Start-up's claims in one line, once this node holds every partition it wins (or after
        three leases, what it holds by then); later claims each log their own."""
        won = [p for p in range(self.coordinator_runtime.partitions) if rendezvous(p, live) == self.node_id]
        if self._settle_by == math.inf:
            self._settle_by = time.monotonic() + 3 * self.lease_s
        if not all(p in self.mine for p in won) and time.monotonic() < self._settle_by:
            return
        claimed, self._settling = self._settling, None
        stamps = sorted(claimed.values())
        log.info("partitions claimed count=%d partitions=%s stamps=%s", len(claimed), _ranges(sorted(claimed)),
                 f"{stamps[0]}..{stamps[-1]}" if stamps else "-")

    def _spawn(self, p: int, work) -> None:
        self._moving[p] = self._moving.get(p, 0) + 1
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)

        def done(t: asyncio.Task) -> None:
            self._background.discard(t)
            left = self._moving.pop(p) - 1
            if left:
                self._moving[p] = left
            if not t.cancelled() and t.exception() is not None:
                log.warning("partition move failed partition=%d: %r", p, t.exception())
        task.add_done_callback(done)

    # -- claims and releases ------------------------------------------------------------------------

    async def _claim(self, p: int) -> None:
        """Create `owners/<p>` under this node's lease if nobody holds it; its revision is the stamp
        of this ownership's segments. Load while LOAD_IN_PROGRESS, then record in the manifest."""
        client, tx = self.client, self.client.transactions
        ok, responses = await client.transaction(
            compare=[tx.create(self.key("owners", p)) == 0],
            success=[tx.put(self.key("owners", p), str(self.node_id).encode(), lease=self.lease),
                     tx.get(self.key("manifests", p))], failure=[])
        if not ok:
            return
        stamp = responses[0].response_put.header.revision
        manifest = [tuple(e) for e in json.loads(responses[1][0][0])] if responses[1] else [(0, None)]
        self.mine[p] = stamp
        self.owners[p] = self.node_id
        if self._settling is not None:
            self._settling[p] = stamp
        else:
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
            compare=[tx.create(self.key("owners", p)) == stamp],
            success=[tx.put(self.key("manifests", p), json.dumps(confirmed).encode())], failure=[])
        return confirmed if ok else None

    async def _compaction_stamp(self, p: int, stamp: int) -> int | None:
        """A revision of etcd's for a compaction's output, while this claim holds (None if not)."""
        tx = self.client.transactions
        ok, responses = await self.client.transaction(
            compare=[tx.create(self.key("owners", p)) == stamp],
            success=[tx.put(self.key("compactions", p), str(stamp).encode(), lease=self.lease)], failure=[])
        return responses[0].response_put.header.revision if ok else None

    async def _swap(self, p: int, stamp: int, manifest: list, compacted: list) -> tuple[bool, list | None]:
        """The manifest becomes `compacted` if it is still `manifest` and this claim holds: (True,
        compacted). Else (False, the manifest as etcd has it if this claim still holds, else None):
        a swap whose answer was lost may have taken effect."""
        tx = self.client.transactions
        ok, responses = await self.client.transaction(
            compare=[tx.create(self.key("owners", p)) == stamp,
                     tx.value(self.key("manifests", p)) == json.dumps(manifest).encode()],
            success=[tx.put(self.key("manifests", p), json.dumps(compacted).encode())],
            failure=[tx.get(self.key("owners", p)), tx.get(self.key("manifests", p))])
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
        success = [tx.delete(self.key("owners", p))]
        if end is not None:
            current = await self.client.get(self.key("manifests", p))
            entries = json.loads(current.value) if current is not None else []
            if entries and entries[-1] == [stamp, None]:
                entries[-1][1] = end
                success.append(tx.put(self.key("manifests", p), json.dumps(entries).encode()))
        await self.client.transaction(compare=[tx.create(self.key("owners", p)) == stamp], success=success, failure=[])
        self.owners.pop(p, None)

    async def _delete_owner(self, p: int, stamp: int) -> None:
        tx = self.client.transactions
        await self.client.transaction(compare=[tx.create(self.key("owners", p)) == stamp],
                                      success=[tx.delete(self.key("owners", p))], failure=[])

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


def _ranges(partitions: list[int]) -> str:
    """0-3,5,7-9 for [0, 1, 2, 3, 5, 7, 8, 9]."""
    out: list[list[int]] = []
    for p in partitions:
        if out and out[-1][1] == p - 1:
            out[-1][1] = p
        else:
            out.append([p, p])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out) or "-"


def _stamped(data_dir: str) -> bool:
    """Whether a cluster's owners wrote segments here (`<base>-<stamp>.log`)."""
    return bool(glob.glob(os.path.join(glob.escape(data_dir), "__consumer_offsets-*", "*-*.log")))


def _describe(meta: dict[str, str] | None) -> str:
    if meta is None:
        return "new (no meta.properties)"
    if not meta.get(CLUSTER_MARK):
        return f"a lone node's (cluster {meta['cluster.id']})"
    return (f"cluster {meta['cluster.id']}'s (directory.id {meta.get('directory.id', '?')}, etcd prefix "
            f"{meta[CLUSTER_MARK]})")
