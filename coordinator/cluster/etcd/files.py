"""Cluster mode's shared documents in etcd: `EtcdDocument`, one key read and swapped synchronously
through etcd's JSON gateway, and `EtcdFile`, one of the data dir's JSON files (the ACLs, the SCRAM
credentials, the per-group configs) kept in etcd instead, so that every node holds the same.

Their callers are synchronous (an admin request changing ACLs, a node starting): a call costs a few
ms on the loop, bounded by a timeout; these change rarely. Other nodes' changes arrive with the
cluster's poll (`EtcdCluster.follow`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from groupd.storage.files import DataDirError, JsonFile

log = logging.getLogger("groupd")


class EtcdDocument:
    """One etcd key read and swapped with plain HTTP (etcd's v3 JSON gateway), trying each endpoint."""

    def __init__(self, endpoints: list[str], key: str, timeout: float, ssl_context=None) -> None:
        self.endpoints, self.key, self.timeout = endpoints, key, timeout
        self.ssl_context = ssl_context  # for https:// endpoints (cluster.etcd.ssl.*)
        self._key64 = base64.b64encode(key.encode()).decode()

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


class StaleDocument(Exception):
    """Another node changed the document first: `latest` is what it holds now (decoded)."""

    def __init__(self, latest: Any) -> None:
        super().__init__("changed by another node")
        self.latest = latest


def save_change(save: Callable[[Any], None], compute: Callable[[], Any], follow: Callable[[Any], None],
                attempts: int = 5) -> Any:
    """Save what `compute()` returns (None: nothing to change) and return it; when another node
    changed the document first (StaleDocument), `follow` its content and compute again."""
    for _ in range(attempts):
        content = compute()
        if content is None:
            return None
        try:
            save(content)
            return content
        except StaleDocument as e:
            follow(e.latest)
    raise DataDirError(f"other nodes changed the document {attempts} times during one change")


class EtcdFile:
    """Stands in for a data-dir `JsonFile` (`load()`, `save(content)`): the same content under
    `<cluster.etcd.prefix>/<file name>`. `save` is a compare-and-swap on the revision this
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

    def save(self, content: Any) -> None:
        revision = self.document.swap(self.file.encode(content), self.revision)
        if revision is None:
            value, self.revision = self.document.get()
            raise StaleDocument(self._decode(value))
        self.revision = revision

    def follow(self, value: bytes, revision: int) -> None:
        if revision != self.revision:
            self.revision = revision
            self.on_change(self._decode(value))
