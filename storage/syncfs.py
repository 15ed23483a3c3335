"""`syncfs(2)`: flush every dirty page and the journal of the file system that holds a file, in one
call. One syncfs covers many logs' appends for about the kernel CPU of one fdatasync (a fdatasync of
each of 50 offsets partitions costs ~50 µs of CPU apiece), which is what the offsets log's sync
rounds (coordinator/runtime/sync_rounds.py) use it for.

Python 3.11 has no `os.syncfs` (3.12 does), so it is called through libc. It is used only where it
reports write-back errors: Linux 5.8 and later return the error of any page of the file system that
failed to reach the disk since the descriptor was opened (`errseq` per super block); earlier
kernels returned 0 whatever happened, which would acknowledge commits that were lost.
"""

from __future__ import annotations

import os
import platform
import sys


def _reports_errors() -> bool:
    if sys.platform != "linux" or not (hasattr(os, "syncfs") or _libc_syncfs()):
        return False
    try:
        major, minor = (int(part) for part in platform.release().split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 8)


_syncfs = None


def _libc_syncfs():
    """libc's syncfs (ctypes releases the interpreter lock during the call), or None."""
    global _syncfs
    if _syncfs is None:
        try:
            import ctypes  # only a server that syncs through rounds pays for it

            libc = ctypes.CDLL(None, use_errno=True)
            call = libc.syncfs
            call.argtypes, call.restype = [ctypes.c_int], ctypes.c_int

            def _call(fd: int) -> None:
                if call(fd) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"syncfs: {os.strerror(errno)}")
            _syncfs = _call
        except (OSError, AttributeError):
            _syncfs = False
    return _syncfs or None


def available() -> bool:
    """Whether `syncfs` may stand in for an fsync of each file: it exists and reports errors."""
    return _reports_errors()


def syncfs(fd: int) -> None:
    """Make everything written to the file system of `fd` durable; raises OSError on a failed write-back."""
    if hasattr(os, "syncfs"):
        os.syncfs(fd)
        return
    call = _libc_syncfs()
    if call is None:
        raise OSError("syncfs is not available")
    call(fd)
