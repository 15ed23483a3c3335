"""The topic catalog and the cluster id, kept in the data directory across restarts.

Clients need topics that exist with a stable partition count and a stable topic id: the catalog is
`topics.json` (name → partitions, topic id, the topic's config overrides), and the cluster id lives in
`meta.properties` as Kafka keeps it. The records plane reads a topic's effective config through
`TopicCatalog.topic_config` (storage/topic_config.py).

At start-up, before anything is served, the topics the config declares are written at once
(`create`, `set_partitions`); while serving, the admin APIs' and auto-creates' changes (`add`,
`resize`, `reconfigure`, `remove`) are written off the event loop, one at a time, and apply once written.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import glob
import json
import os
import re
import uuid
from collections.abc import Callable

from .files import DataDirError, atomic_write
from .topic_config import KAFKA_DEFAULTS, TopicConfig, effective

CATALOG_FILE = "topics.json"
META_FILE = "meta.properties"
_LEGAL_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def legal_topic_name(name: str | None) -> bool:
    """Kafka's rule (`Topic.validate`): 1–249 of [A-Za-z0-9._-], and not "." or ".."."""
    return bool(name) and name not in (".", "..") and _LEGAL_NAME.fullmatch(name) is not None


def illegal_topic_name(name: str) -> str:
    """Kafka's message for a name `legal_topic_name` refuses (`Topic.validate`'s reasons)."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > 249:
        reason = f"the length of '{name}' is longer than the max allowed length 249"
    else:
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return f"Topic name is invalid: {reason}"


@dataclasses.dataclass(frozen=True, slots=True)
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID
    configs: tuple[tuple[str, str], ...] = ()  # the topic's config overrides (Kafka's names), sorted by name


class TopicCatalog:
    """Topics by name and by id. Every change is written to disk before it is visible."""

    def __init__(self, data_dir: str) -> None:
        self._path = os.path.join(data_dir, CATALOG_FILE)
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self.version = 0  # bumped by every change: consumer groups refresh their topic metadata on it
        self.created_version = 0  # the version of the last creation: consumer groups re-resolve regexes on it
        self._writing = asyncio.Lock()  # one change at a time while serving: each starts from the last
        self.config_defaults = KAFKA_DEFAULTS  # the broker's topic config defaults (Node sets them from the settings)
        self._effective: dict[str, TopicConfig] = {}  # topic_config's answers at `_effective_version`
        self._effective_version = -1
        for topic in self._read().values():
            self._index(topic)

    def _read(self) -> dict[str, Topic]:
        if not os.path.exists(self._path):
            return {}
        try:
            with open(self._path, "rb") as f:
                return decode_catalog(f.read())
        except OSError as e:
            raise DataDirError(f"cannot read the topic catalog {self._path}: {e.strerror}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSONDecodeError is a ValueError
            raise DataDirError(f"the topic catalog {self._path} is damaged ({type(e).__name__}: {e}); restore "
                               "it from a backup, or move it away to start with no topics (new topic ids)") from None

    def reload(self) -> bool:
        """Take the file as another process (the controller worker) wrote it; True when it changed."""
        topics = self._read()
        if topics == self._by_name:
            return False
        self._follow(topics)
        return True

    def _follow(self, topics: dict[str, Topic]) -> None:
        """Another process's change: a new version, and a new creation version when topics appeared."""
        created = topics.keys() - self._by_name.keys()
        self._replace(topics)
        if created:
            self.created_version = self.version

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self):
        return iter(list(self._by_name.values()))

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def use_defaults(self, defaults: dict) -> None:
        """The broker's topic config defaults (typed, by topic config name) that topics without an
        override run with."""
        self.config_defaults = defaults
        self._effective_version = -1

    def topic_config(self, name: str) -> TopicConfig:
        """The effective config of topic `name`: its overrides over the broker's defaults, typed (the
        broker's defaults for a topic the catalog does not hold). Cached until the catalog changes."""
        if self._effective_version != self.version:
            self._effective.clear()
            self._effective_version = self.version
        config = self._effective.get(name)
        if config is None:
            topic = self._by_name.get(name)
            config = TopicConfig.of(effective(dict(topic.configs) if topic else {}, self.config_defaults))
            self._effective[name] = config
        return config

    # -- at start-up, before anything is served: written at once (blocking) ----------------------

    def create(self, name: str, partitions: int) -> Topic:
        assert name not in self._by_name, name
        topic = Topic(name, partitions, _new_topic_id())
        self._save({**self._by_name, name: topic})
        self.created_version = self.version
        return self._by_name[name]  # a shared catalog keeps the topic another node created first

    def set_partitions(self, name: str, partitions: int) -> Topic:
        topic = dataclasses.replace(self._by_name[name], partitions=partitions)
        self._save({**self._by_name, name: topic})
        return topic

    def _save(self, topics: dict[str, Topic]) -> None:
        atomic_write(self._path, encode_catalog(topics))
        self._replace(topics)

    # -- while serving: written off the event loop, one change at a time, visible once written ----
    # (OSError or DataDirError: nothing changed)

    async def add(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic | None:
        """The new topic, with `configs` as its config overrides; None when it exists already (another
        request created it first). A shared catalog keeps the topic another node created first."""
        async with self._writing:
            if name in self._by_name:
                return None
            await self._write({**self._by_name, name: Topic(name, partitions, _new_topic_id(), _pairs(configs or {}))})
            self.created_version = self.version
            return self._by_name.get(name)

    async def resize(self, name: str, partitions: int) -> Topic | None:
        """The topic with `partitions` partitions (or more: another change grew it first); None when
        it is gone."""
        async with self._writing:
            topic = self._by_name.get(name)
            if topic is None or topic.partitions >= partitions:
                return topic
            await self._write({**self._by_name, name: dataclasses.replace(topic, partitions=partitions)})
            return self._by_name.get(name)

    async def reconfigure(self, name: str, change: Callable[[dict[str, str]], dict[str, str]]) -> Topic | None:
        """The topic with `change(its current config overrides)` as its whole set of them (`change`
        checks them, and raises to change nothing), computed under the write lock so that concurrent
        changes do not lose each other; None when the topic is gone."""
        async with self._writing:
            topic = self._by_name.get(name)
            if topic is None:
                return None
            configs = _pairs(change(dict(topic.configs)))
            await self._write({**self._by_name, name: dataclasses.replace(topic, configs=configs)})
            return self._by_name.get(name)

    async def remove(self, name: str) -> Topic | None:
        """The deleted topic; None when it was gone already."""
        async with self._writing:
            topic = self._by_name.get(name)
            if topic is None:
                return None
            await self._write({n: t for n, t in self._by_name.items() if n != name})
            return topic

    async def _write(self, topics: dict[str, Topic]) -> None:
        path = self._path
        await asyncio.get_running_loop().run_in_executor(None, lambda: atomic_write(path, encode_catalog(topics)))
        self._replace(topics)

    def _replace(self, topics: dict[str, Topic]) -> None:
        self.version += 1
        self._by_name.clear()
        self._by_id.clear()
        for t in topics.values():
            self._index(t)

    def _index(self, topic: Topic) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic


def encode_catalog(topics: dict[str, Topic]) -> bytes:
    """The catalog's JSON document (topics.json, or cluster mode's copy in etcd)."""
    doc = {"topics": [{"name": t.name, "partitions": t.partitions, "id": str(t.topic_id),
                       **({"configs": dict(t.configs)} if t.configs else {})} for t in topics.values()]}
    return json.dumps(doc, indent=1).encode()


def decode_catalog(data: bytes) -> dict[str, Topic]:
    """Topics by name from the catalog's JSON document; ValueError (or KeyError, TypeError) if damaged."""
    topics = {}
    for entry in json.loads(data)["topics"]:
        if not legal_topic_name(entry["name"]) or not isinstance(entry["partitions"], int) or entry["partitions"] < 1:
            raise ValueError(f"bad entry {entry!r}")
        configs = entry.get("configs", {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in configs.items()):
            raise ValueError(f"bad configs {configs!r}")
        topics[entry["name"]] = Topic(entry["name"], entry["partitions"], uuid.UUID(entry["id"]), _pairs(configs))
    return topics


def _pairs(configs: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(configs.items()))


def _new_topic_id() -> uuid.UUID:
    # Kafka never hands out the zero uuid (it means "no id"), nor ids whose base64 starts with '-'.
    while True:
        topic_id = uuid.uuid4()
        if base64.urlsafe_b64encode(topic_id.bytes)[:1] != b"-":
            return topic_id


CLUSTER_MARK = "cluster.etcd.prefix"  # in meta.properties: the data dir is a cluster's (cluster mode)


def read_meta(data_dir: str) -> dict[str, str] | None:
    """`meta.properties`' keys, or None when there is none; DataDirError when it is damaged."""
    path = os.path.join(data_dir, META_FILE)
    if not os.path.exists(path):
        return None
    props = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.strip().partition("=")
                if sep and not key.startswith("#"):
                    props[key] = value
    except OSError as e:
        raise DataDirError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        props = {}
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", props.get("cluster.id", "")):
        raise DataDirError(f"{path} is damaged (no valid cluster.id line); restore it from a backup, or "
                           "move it away to start with a new cluster id")
    return props


def write_meta(data_dir: str, props: dict[str, str], exclusive: bool = False) -> bool:
    """Write `meta.properties`; `exclusive`: only if there is none yet (False when there was one:
    another node of a cluster made it first)."""
    path = os.path.join(data_dir, META_FILE)
    data = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
    if not exclusive:
        atomic_write(path, data)
        return True
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"  # nodes sharing the dir each write their own, then link
    atomic_write(tmp, data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes)[:22].decode()  # 22 chars, like Kafka's


def load_cluster_id(data_dir: str, node_id: int) -> str:
    """The cluster id from `meta.properties`, created on first start (22 chars, like Kafka's). A
    cluster's data dir (cluster mode: etcd's manifests say what its segments count) is refused."""
    props = read_meta(data_dir)
    if props is not None and props.get(CLUSTER_MARK):
        raise DataDirError(f"data.dir {data_dir} is cluster {props['cluster.id']}'s shared data dir (cluster mode, "
                           f"etcd prefix {props[CLUSTER_MARK]}): a lone node would serve its groups without their "
                           "offsets; set cluster.etcd.endpoints to join the cluster, or another data.dir")
    if props is None:
        stamped = glob.glob(os.path.join(glob.escape(data_dir), "__consumer_offsets-*", "*-*.log"))
        if stamped:
            raise DataDirError(f"data.dir {data_dir} holds a cluster's segments ({os.path.basename(stamped[0])}, "
                               "cluster mode) and no meta.properties: a lone node would serve its groups without "
                               "their offsets; set cluster.etcd.endpoints to join the cluster, or another data.dir")
        props = {"version": "1", "cluster.id": new_cluster_id(), "node.id": str(node_id)}
        write_meta(data_dir, props)
    return props["cluster.id"]
