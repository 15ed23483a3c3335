"""What the controller worker writes and the other workers read from the shared data dir: the topic
catalog, ACLs, SCRAM users and group configs. A worker stats each file every tick (a few µs) and
reloads the ones another process replaced (every write is a rename: a new inode)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from groupd.storage.acls import ACLS_FILE
from groupd.storage.catalog import CATALOG_FILE
from groupd.storage.group_configs import GROUP_CONFIGS_FILE
from groupd.storage.scram import SCRAM_FILE

log = logging.getLogger("groupd")

CHECK_INTERVAL_S = 0.1  # how soon a change made on the controller reaches the other workers


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class SharedFiles:
    def __init__(self, node) -> None:
        reloads: dict[str, Callable[[], object]] = {
            CATALOG_FILE: node.catalog.reload, GROUP_CONFIGS_FILE: node.group_configs.reload,
            SCRAM_FILE: node.scram_users.reload}
        if node.access is not None:
            reloads[ACLS_FILE] = node.access.reload
        self._reloads = {os.path.join(node.settings.data_dir, name): reload for name, reload in reloads.items()}
        self._seen = {path: _identity(path) for path in self._reloads}

    def check(self) -> None:
        for path, reload in self._reloads.items():
            seen = _identity(path)
            if seen != self._seen[path]:
                self._seen[path] = seen
                try:
                    reload()
                except Exception as e:  # a damaged file: keep what we had, say so once per change
                    log.error("cannot reload %s: %s", path, e)
