"""The one-process pool that the offsets log's compaction and the data logs' cleaner run in, made on
first use: a server that never compacts does not import multiprocessing (with pickle, its context,
connection and queue modules: ~1 MiB of RSS and ~5 ms of a start)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


def spawn_pool(initializer: Callable[[], None]) -> ProcessPoolExecutor:
    """One worker process, spawned (not forked: the loop's threads and sockets stay in the server)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=initializer)


def died(error: BaseException | None) -> bool:
    """Whether a job's error says the pool's process died (the next job needs a new pool). Only asked
    of a job's future, so the pool, and the module that defines the error, exist by then."""
    from concurrent.futures.process import BrokenProcessPool

    return isinstance(error, BrokenProcessPool)
