"""What a server starts only when first needed: the writer threads of a `LogWorkers` pool start with
its first job (then all of them, as before), and the process pool of compaction and the data logs'
cleaner, with multiprocessing, is imported when the first compaction makes one."""

import asyncio
import subprocess
import sys
import threading

from groupd.coordinator.runtime import cleaner_process
from groupd.coordinator.runtime.log_workers import LogWorkers


def _names(prefix: str) -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(prefix)}


def test_log_workers_start_their_threads_with_the_first_job():
    async def main() -> None:
        workers = LogWorkers(3, "lazy-test")
        assert _names("lazy-test") == set()
        loop = asyncio.get_running_loop()
        one, both = loop.create_future(), loop.create_future()
        workers.run(lambda: 7, one.set_result)
        assert _names("lazy-test") == {"lazy-test-0", "lazy-test-1", "lazy-test-2"}
        assert await one is None

        def fails() -> None:
            raise OSError("disk")
        workers.run_all([lambda: None, fails], both.set_result)
        errors = await both
        assert errors[0] is None and isinstance(errors[1], OSError)
        workers.shutdown()
        assert _names("lazy-test") == set()

    asyncio.run(main())


def test_a_pool_that_never_ran_shuts_down_without_threads():
    workers = LogWorkers(4, "never-ran")
    workers.shutdown()
    assert _names("never-ran") == set()


def test_serve_imports_no_multiprocessing_until_a_pool_is_made():
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import groupd.coordinator.cli, groupd.coordinator.server.server\n"
        "gone = [m for m in ('multiprocessing', 'concurrent.futures.process', 'pickle', 'ctypes') if m in sys.modules]\n"
        "assert not gone, gone\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_the_cleaner_pool_runs_a_job_in_a_spawned_process_and_knows_a_broken_pool():
    from concurrent.futures.process import BrokenProcessPool

    pool = cleaner_process.spawn_pool(_nothing)
    try:
        assert pool.submit(_pid).result(timeout=60) != _pid()
    finally:
        pool.shutdown()
    assert cleaner_process.died(BrokenProcessPool("gone"))
    assert not cleaner_process.died(OSError("disk")) and not cleaner_process.died(None)


def _nothing() -> None:
    pass


def _pid() -> int:
    import os
    return os.getpid()
