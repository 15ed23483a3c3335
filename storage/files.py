"""The data directory's files outside the log: crash-safe small-file writes (write a temporary
file, fsync it, rename it over the old one, fsync the directory: a reader sees the old or the new
content, never a torn mix), the directory's checks at start-up, and its `.lock`.

A server changes its shared documents (the topic catalog, the ACLs, the SCRAM credentials, the
group configs: a data-dir file, or in cluster mode an etcd key) off its event loop: `JsonFile.write`
runs the blocking `save` on a thread, and `save_change` retries a change that another writer beat."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

LOCK_FILE = ".lock"  # Kafka's name for a log dir's lock


def node_lock_file(node_id: int) -> str:
    """The lock of one node among several on a directory (worker processes, whose supervisor holds
    `.lock`; cluster-mode nodes): two processes serving the same node id refuse."""
    return f".lock-node-{node_id}"


class DataDirError(Exception):
    """The data directory cannot be used; the message is one line that names the file and what
    to do about it."""


class DocumentUnavailable(DataDirError):
    """The store of a shared document (etcd) did not answer in time: the change may or may not have
    been made (the next read of the document says which)."""


class StaleDocument(Exception):
    """Another node changed the document first: `latest` is what it holds now (decoded)."""

    def __init__(self, latest: Any) -> None:
        super().__init__("changed by another node")
        self.latest = latest


async def save_change(save: Callable[[Any], Awaitable[None]], compute: Callable[[], Any],
                      follow: Callable[[Any], None], attempts: int = 5) -> Any:
    """Save what `compute()` returns (None: nothing to change) and return it; when another node
    changed the document first (StaleDocument), `follow` its content and compute again. The caller
    makes one change of a document at a time (its lock), and applies the result once saved."""
    for _ in range(attempts):
        content = compute()
        if content is None:
            return None
        try:
            await save(content)
            return content
        except StaleDocument as e:
            follow(e.latest)
    raise DataDirError(f"other nodes changed the document {attempts} times during one change")


def atomic_write(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)


class JsonFile:
    """A small JSON file of the data dir, read whole and rewritten whole (`atomic_write`). Each kind
    says its `name`, how its content reads and writes (`decode`, which raises ValueError, KeyError,
    TypeError or AttributeError on damage; `encode`), its content when absent (`empty`), and for
    messages what it is (`what`) and what to do when it is damaged (`remedy`)."""

    name = ""
    what = ""
    remedy = ""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, self.name)

    def load(self):
        if not os.path.exists(self.path):
            return self.empty()
        try:
            with open(self.path, "rb") as f:
                return self.decode(f.read())
        except OSError as e:
            raise DataDirError(f"cannot read {self.what} {self.path}: {e.strerror}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSONDecodeError is a ValueError
            raise DataDirError(f"{self.what} {self.path} {'are' if self.what.endswith('s') else 'is'} damaged "
                               f"({type(e).__name__}: {e}); {self.remedy}") from None

    def save(self, content) -> None:
        atomic_write(self.path, self.encode(content))

    async def write(self, content) -> None:
        """`save` on a thread (encoding and both fsyncs): the event loop serves on meanwhile."""
        await asyncio.get_running_loop().run_in_executor(None, self.save, content)

    @staticmethod
    def empty():
        raise NotImplementedError

    @staticmethod
    def decode(data: bytes):
        raise NotImplementedError

    @staticmethod
    def encode(content) -> bytes:
        raise NotImplementedError


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_files(paths: list[str]) -> None:
    """Delete files (one already gone is skipped: two owners may clean the same ones) and fsync
    their directories."""
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    for directory in {os.path.dirname(path) for path in paths}:
        fsync_dir(directory)


def prepare_data_dir(data_dir: str) -> None:
    """Create `data_dir` if needed and check that this process can write there."""
    if os.path.exists(data_dir) and not os.path.isdir(data_dir):
        raise DataDirError(f"data.dir {data_dir} is a file, not a directory: set data.dir to a directory")
    try:
        os.makedirs(data_dir, exist_ok=True)
    except OSError as e:
        raise DataDirError(f"cannot create data.dir {data_dir}: {e.strerror}; create it, or set data.dir "
                           "to a directory this user may write") from None
    try:  # a real write, not os.access: root passes access checks on a read-only or special file system
        tempfile.TemporaryFile(dir=data_dir).close()
    except OSError as e:
        raise DataDirError(f"data.dir {data_dir} is not writable by this user (uid {os.getuid()}: {e.strerror}): "
                           "fix its permissions, or set data.dir to a directory this user may write") from None


class DataDirLock:
    """An exclusive `flock` on `<data dir>/.lock`, as Kafka locks a log dir: a second server (or
    `groupd log repair`) on the same directory is refused instead of writing the same log. The
    file holds the holder's pid, for the refusal to name it. The lock lasts as long as the open
    file: `release()`, process exit or a crash all end it (the file itself stays, as Kafka's)."""

    def __init__(self, data_dir: str, name: str = LOCK_FILE) -> None:
        self.path = os.path.join(data_dir, name)  # cluster mode: one per node id (nodes share the dir)
        self._file = None

    def acquire(self, who: str = "groupd") -> DataDirLock:
        try:
            f = open(self.path, "a+", encoding="utf-8")  # not "w": the holder's pid must survive a refusal
        except OSError as e:
            raise DataDirError(f"cannot open the lock file {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            f.close()
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataDirError(f"cannot lock {self.path}: {e.strerror}") from None
            raise DataDirError(f"data.dir {os.path.dirname(self.path)} is in use: {self.path} is held by {holder}; "
                               "stop that process, or give this one its own data.dir") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} ({who})\n")
        f.flush()
        self._file = f
        return self

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the flock
            self._file = None
