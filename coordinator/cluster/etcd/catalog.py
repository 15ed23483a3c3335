"""Cluster mode's topic catalog: one JSON document in etcd (`/groupd/topics`, the format of
topics.json) that every node reads and changes, so they all list the same topics with the same ids.

A change is a compare-and-swap on the document's revision: at start-up (the config's topics, before
anything is served) through etcd's JSON gateway, blocking; while serving through the cluster's
asyncio client, so that an etcd that does not answer holds up only the request that changes the
catalog. A swap that loses to another node's change applies the same change again on top of it.
Other nodes' changes arrive with the cluster's poll (`EtcdCluster.follow`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os

from groupd.storage.catalog import CATALOG_FILE, Topic, TopicCatalog, decode_catalog, encode_catalog
from groupd.storage.files import DataDirError
from groupd.storage.topic_config import KAFKA_DEFAULTS

from .files import EtcdDocument

log = logging.getLogger("groupd")

CATALOG_KEY = "/groupd/topics"  # under the default cluster.etcd.prefix
SWAP_ATTEMPTS = 5  # a change that keeps losing to other nodes' fails after this many


class EtcdCatalog(TopicCatalog):
    def __init__(self, document: EtcdDocument, data_dir: str) -> None:
        self._document = document
        self._by_name: dict[str, Topic] = {}
        self._by_id = {}
        self.version = self.created_version = 0
        self._writing = asyncio.Lock()
        self.revision = 0  # of the document this node last saw
        self.config_defaults, self._effective, self._effective_version = KAFKA_DEFAULTS, {}, -1  # topic_config
        value, revision = document.get()
        seed = os.path.join(data_dir, CATALOG_FILE)
        if value is None and os.path.exists(seed):  # a lone node's catalog becomes the cluster's
            with open(seed, "rb") as f:
                value = f.read()
            revision = document.swap(value, 0) or document.get()[1]
            log.info("topic catalog moved to etcd from=%s", seed)
        if value is not None:
            self.follow(value, revision)

    def follow(self, value: bytes, revision: int) -> None:
        """The document as etcd has it now (at start, and when another node changed it); a poll's read
        from before this node's own newer change is not taken."""
        if revision <= self.revision:
            return
        try:
            topics = decode_catalog(value)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataDirError(f"the topic catalog in etcd ({self._document.key}) is damaged: {e!r}") from None
        self.revision = revision
        self._follow(topics)

    def _save(self, topics: dict[str, Topic]) -> None:
        for _ in range(SWAP_ATTEMPTS):
            revision = self._document.swap(encode_catalog(topics), self.revision)
            if revision is not None:
                self.revision = revision
                self._replace(topics)
                return
            before = dict(self._by_name)
            value, revision = self._document.get()
            self.follow(value or b'{"topics": []}', revision)
            topics = _rebase(before, topics, self._by_name)
        raise DataDirError(f"the topic catalog in etcd ({self._document.key}) changed {SWAP_ATTEMPTS} times "
                          "during one change")

    async def _write(self, topics: dict[str, Topic]) -> None:
        """`_save` through the asyncio client (DocumentUnavailable when etcd does not answer in time)."""
        for _ in range(SWAP_ATTEMPTS):
            revision = await self._document.replace(encode_catalog(topics), self.revision)
            if revision is not None:
                if revision > self.revision:  # else a poll already took this change, or a newer one
                    self.revision = revision
                    self._replace(topics)
                return
            before = dict(self._by_name)
            value, revision = await self._document.read()
            self.follow(value or b'{"topics": []}', revision)
            topics = _rebase(before, topics, self._by_name)
        raise DataDirError(f"the topic catalog in etcd ({self._document.key}) changed {SWAP_ATTEMPTS} times during "
                           "one change")


def _rebase(before: dict[str, Topic], wanted: dict[str, Topic], now: dict[str, Topic]) -> dict[str, Topic]:
    """`wanted` was `before` changed; the same change applied to `now`, another node's newer catalog
    (a topic both created keeps the other node's id; a topic changed here keeps the other node's
    change of its other fields; a topic the other node deleted stays deleted)."""
    out = dict(now)
    for name, topic in wanted.items():
        old = before.get(name)
        if old == topic or (old is None and name in now):
            continue
        if old is None:
            out[name] = topic
        elif name in now and now[name].topic_id == topic.topic_id:
            out[name] = dataclasses.replace(now[name], **{f: getattr(topic, f) for f in ("partitions", "configs")
                                                          if getattr(topic, f) != getattr(old, f)})
    for name in before.keys() - wanted.keys():
        out.pop(name, None)
    return out
