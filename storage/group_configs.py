"""Per-group config overrides (consumer.session.timeout.ms, consumer.heartbeat.interval.ms,
share.auto.offset.reset, share.isolation.level, …), kept
across restarts in `group_configs.json` beside the topic catalog: Kafka keeps them in its config
log; here a change is written to disk atomically (write, fsync, rename; off the event loop, one
change at a time) before it takes effect."""

from __future__ import annotations

import asyncio
import json

from .files import JsonFile, save_change

GROUP_CONFIGS_FILE = "group_configs.json"
_STRINGS = ("share.auto.offset.reset", "share.isolation.level")  # storage/ may not import the coordinator

Overrides = dict[str, dict[str, int | str]]  # group id → config name → value


class GroupConfigsFile(JsonFile):
    name = GROUP_CONFIGS_FILE
    what = "the group configs"
    remedy = "restore them from a backup, or move the file away to start with no overrides"

    @staticmethod
    def empty() -> Overrides:
        return {}

    @staticmethod
    def decode(data: bytes) -> Overrides:
        groups = {}
        for group_id, configs in json.loads(data)["groups"].items():
            # the two strings; every other value is an int (coordinator/core/group_config.py checks the names)
            if not all(isinstance(k, str) and type(v) is (str if k in _STRINGS else int)
                       for k, v in configs.items()):
                raise ValueError(f"bad entry for group {group_id!r}")
            groups[group_id] = dict(configs)
        return groups

    @staticmethod
    def encode(groups: Overrides) -> bytes:
        return json.dumps({"groups": groups}, indent=1, sort_keys=True).encode()


class GroupConfigStore:
    def __init__(self, data_dir: str, file=None) -> None:
        self._file = file or GroupConfigsFile(data_dir)  # cluster mode: the overrides in etcd
        # changed in place, so readers holding it see every change
        self.overrides: Overrides = {}
        self._writing = asyncio.Lock()  # one change at a time: each starts from the last one saved
        self.reload()

    def reload(self) -> None:
        """Read the overrides again: at start, and on a worker when the controller worker rewrote the file."""
        self.follow(self._file.load())

    def follow(self, groups: Overrides) -> None:
        """The overrides as stored now: at start, and in cluster mode when another node changed them."""
        self.overrides.clear()
        self.overrides.update(groups)

    def with_group(self, group_id: str, configs: dict[str, int]) -> Overrides:
        """Every override, with the group's become `configs` (none: the group has no entry)."""
        new = {g: c for g, c in self.overrides.items() if g != group_id}
        if configs:
            new[group_id] = dict(configs)
        return new

    async def set(self, group_id: str, configs: dict[str, int]) -> None:
        """The group's overrides become `configs` (none: back to the defaults), written first (off the
        loop; in cluster mode to etcd, where another node's change may come first, then this one is
        made again on top of it); OSError or DataDirError changes nothing."""
        async with self._writing:
            saved = await save_change(self._file.write, lambda: self.with_group(group_id, configs), self.follow)
            self.follow(saved)
