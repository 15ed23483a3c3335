"""Per-group config overrides (consumer.session.timeout.ms, consumer.heartbeat.interval.ms), kept
across restarts in `group_configs.json` beside the topic catalog: Kafka keeps them in its config
log; here a change is written to disk atomically (write, fsync, rename) before it takes effect."""

from __future__ import annotations

import json
import os

from .files import DataDirError, atomic_write

GROUP_CONFIGS_FILE = "group_configs.json"


class GroupConfigStore:
    def __init__(self, data_dir: str) -> None:
        self._path = os.path.join(data_dir, GROUP_CONFIGS_FILE)
        # group id → config name → value; changed in place, so readers holding it see every change
        self.overrides: dict[str, dict[str, int]] = {}
        self.overrides.update(self._read())

    def _read(self) -> dict[str, dict[str, int]]:
        if not os.path.exists(self._path):
            return {}
        overrides = {}
        try:
            with open(self._path, encoding="utf-8") as f:
                for group_id, configs in json.load(f)["groups"].items():
                    if not all(isinstance(k, str) and type(v) is int for k, v in configs.items()):
                        raise ValueError(f"bad entry for group {group_id!r}")
                    overrides[group_id] = dict(configs)
        except OSError as e:
            raise DataDirError(f"cannot read the group configs {self._path}: {e.strerror}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataDirError(f"the group configs {self._path} are damaged ({type(e).__name__}: {e}); restore "
                               "them from a backup, or move the file away to start with no overrides") from None
        return overrides

    def reload(self) -> None:
        """Take the file as another process (the controller worker) wrote it."""
        new = self._read()
        self.overrides.clear()
        self.overrides.update(new)

    def set(self, group_id: str, configs: dict[str, int]) -> None:
        """The group's overrides become `configs` (none: the group has no entry), durably."""
        new = {g: c for g, c in self.overrides.items() if g != group_id}
        if configs:
            new[group_id] = dict(configs)
        atomic_write(self._path, json.dumps({"groups": new}, indent=1, sort_keys=True).encode())
        self.overrides.clear()
        self.overrides.update(new)
