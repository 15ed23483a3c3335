"""The threads that fsync (and roll) the offsets log: as few interpreter-lock hand-offs per job as
Python allows, since 32 of them compete with the loop for the lock whenever a job ends.

A job is `(work, done)`: a thread runs `work()` and hands `done(error)` to the loop that submitted
it (`call_soon_threadsafe`). The queue is a C `SimpleQueue` and a job has no future, no condition
variable and no callback list: a `ThreadPoolExecutor` spent a quarter of a durable commit's loop
time in `submit()` and its futures, mostly waiting for the lock.

The threads start with the first job, all at once, so a server that has written nothing holds none
of them (47 threads' stacks and states are ~2 MiB of an idle server's RSS); from then on the pool is
the same as if they had started with it.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable


class LogWorkers:
    def __init__(self, threads: int, name: str = "groupd-write") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        self._started = False

    def _start(self) -> None:
        self._started = True
        for t in self._threads:
            t.start()

    def run(self, work: Callable[[], object], done: Callable[[BaseException | None], None]) -> None:
        """`work()` on a worker thread, then `done(None)` or `done(its exception)` on this loop."""
        if not self._started:
            self._start()
        self._jobs.put((work, done, asyncio.get_running_loop()))

    def run_all(self, works: list[Callable[[], object]],
                done: Callable[[list[BaseException | None]], None]) -> None:
        """Each of `works` on a worker thread (at once, as threads are free), then one
        `done([None or each one's exception, in order])` on this loop: the loop wakes once for all."""
        loop, errors, left, lock = asyncio.get_running_loop(), [None] * len(works), [len(works)], threading.Lock()

        def one(i: int, work: Callable[[], object]) -> Callable[[], None]:
            def job() -> None:
                try:
                    work()
                except BaseException as e:  # noqa: BLE001  (handed to the loop, which maps it)
                    errors[i] = e
                with lock:
                    left[0] -= 1
                    last = left[0] == 0
                if last:
                    try:
                        loop.call_soon_threadsafe(done, errors)
                    except RuntimeError:  # the loop is closed: nobody waits for the answer any more
                        pass
            return job

        if not self._started:
            self._start()
        for i, work in enumerate(works):
            self._jobs.put((one(i, work), None, loop))

    def _run(self) -> None:
        get = self._jobs.get
        while (job := get()) is not None:
            work, done, loop = job
            try:
                work()
                error = None
            except BaseException as e:  # noqa: BLE001  (handed to the loop, which maps it)
                error = e
            if done is None:  # a job of `run_all`: it answers the loop itself
                continue
            try:
                loop.call_soon_threadsafe(done, error)
            except RuntimeError:  # the loop is closed: nobody waits for the answer any more
                pass

    def shutdown(self) -> None:
        """Let queued jobs finish, then stop every thread."""
        if not self._started:
            return
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join()
