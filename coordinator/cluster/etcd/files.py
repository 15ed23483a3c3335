"""Cluster mode's shared documents in etcd: `EtcdDocument`, one key read and swapped, and `EtcdFile`,
one of the data dir's JSON files (the ACLs, the SCRAM credentials, the per-group configs) kept in
etcd instead, so that every node holds the same.

At start-up, before the node serves anything, a document is read (and a lone node's file seeds it)
with blocking calls to etcd's JSON gateway, bounded by a timeout. While serving, every call goes
through the asyncio etcd client the cluster's lease uses (`aetcd`), so that an etcd that does not
answer holds up only the admin request that changes the document, never the event loop (design.md).
Other nodes' changes arrive with the cluster's poll (`EtcdCluster.follow`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from groupd.storage.files import DataDirError, DocumentUnavailable, JsonFile, StaleDocument

log = logging.getLogger("groupd")


class EtcdDocument:
    """One etcd key: at start-up read and swapped with plain HTTP (etcd's v3 JSON gateway, trying each
    endpoint: `get`, `swap`), while serving through the cluster's asyncio client (`read`, `replace`)."""

    def __init__(self, endpoints: list[str], key: str, timeout: float, ssl_context=None,
                 client: Callable[[], Any] | None = None) -> None:
        self.endpoints, self.key, self.timeout = endpoints, key, timeout
        self.ssl_context = ssl_context  # for https:// endpoints (cluster.etcd.ssl.*)
        self._key64 = base64.b64encode(key.encode()).decode()
        self._client = client  # the cluster's connected aetcd client (EtcdCluster.client)

    def _call(self, path: str, body: dict) -> dict:
        import urllib.request  # not on every serve's import path: only cluster mode calls etcd

        errors = []
        for endpoint in self.endpoints:
            url = endpoint if "://" in endpoint else f"http://{endpoint}"  # settings make URLs; host:port too
            request = urllib.request.Request(f"{url}/v3/{path}", json.dumps(body).encode(),
                                             {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout, context=self.ssl_context) as reply:
                    return json.loads(reply.read())
            except (OSError, ValueError) as e:
                errors.append(f"{endpoint}: {e}")
        raise DataDirError(f"etcd unreachable for {self.key}: {'; '.join(errors)}")

    def get(self) -> tuple[bytes | None, int]:
        """(value or None, its mod revision, 0 when absent)."""
        kvs = self._call("kv/range", {"key": self._key64}).get("kvs") or []
        if not kvs:
            return None, 0
        return base64.b64decode(kvs[0].get("value", "")), int(kvs[0]["mod_revision"])

    def swap(self, value: bytes, revision: int) -> int | None:
        """Put `value` if the key's mod revision is still `revision` (0: absent); the new revision,
        or None when another writer came first."""
        reply = self._call("kv/txn", {
            "compare": [{"key": self._key64, "target": "MOD", "result": "EQUAL", "mod_revision": str(revision)}],
            "success": [{"request_put": {"key": self._key64, "value": base64.b64encode(value).decode()}}]})
        return int(reply["header"]["revision"]) if reply.get("succeeded") else None

    async def _await(self, call) -> Any:
        if self._client is None or self._client() is None:
            raise DocumentUnavailable(f"etcd is not connected for {self.key}")
        try:  # the client's own deadline is the timeout; the guard covers a call that never returns
            return await asyncio.wait_for(call(self._client()), self.timeout + 1)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise DocumentUnavailable(f"etcd did not answer for {self.key}: {e!r}") from None

    async def read(self) -> tuple[bytes | None, int]:
        """`get` through the asyncio client; DocumentUnavailable when etcd does not answer in time."""
        found = await self._await(lambda client: client.get(self.key.encode()))
        return (None, 0) if found is None else (found.value, found.mod_revision)

    async def replace(self, value: bytes, revision: int) -> int | None:
        """`swap` through the asyncio client; DocumentUnavailable when etcd does not answer in time (the
        value may have been put: the poll and the next change read what etcd holds)."""
        def txn(client):
            tx, key = client.transactions, self.key.encode()
            return client.transaction(compare=[tx.mod(key) == revision], success=[tx.put(key, value)], failure=[])
        ok, responses = await self._await(txn)
        return responses[0].response_put.header.revision if ok else None


class EtcdFile:
    """Stands in for a data-dir `JsonFile` (`load()` at start-up, `await write(content)` while serving):
    the same content under `<cluster.etcd.prefix>/<file name>`. `write` is a compare-and-swap on the revision this
    node last saw and raises StaleDocument when another node came first; `on_change(content)` hears
    other nodes' changes. A lone node's file seeds the key the first time."""

    def __init__(self, file: JsonFile, document: EtcdDocument, on_change: Callable[[Any], None]) -> None:
        self.file, self.document, self.on_change = file, document, on_change
        self.path = file.path
        self.revision = 0

    def _decode(self, value: bytes | None) -> Any:
        if value is None:
            return self.file.empty()
        try:
            return self.file.decode(value)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataDirError(f"{self.document.key} in etcd is damaged ({type(e).__name__}: {e})") from None

    def load(self) -> Any:
        value, self.revision = self.document.get()
        if value is None and os.path.exists(self.path):  # a lone node's file seeds the key
            if self.document.swap(self.file.encode(self.file.load()), 0) is not None:
                log.info("moved to etcd key=%s from=%s", self.document.key, self.path)
            value, self.revision = self.document.get()
        return self._decode(value)

    async def write(self, content: Any) -> None:
        revision = await self.document.replace(self.file.encode(content), self.revision)
        if revision is None:
            value, revision = await self.document.read()
            self.revision = max(self.revision, revision)
            raise StaleDocument(self._decode(value))
        self.revision = max(self.revision, revision)

    def follow(self, value: bytes, revision: int) -> None:
        """The document as a poll read it; one read before this node's own newer write is not taken."""
        if revision > self.revision:
            self.revision = revision
            self.on_change(self._decode(value))
