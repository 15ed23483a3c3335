"""Giving the memory a finished log load freed back to the operating system."""

from __future__ import annotations


def trim() -> bool:
    """glibc keeps what a load freed (segment bytes, batches, decoded records: tens of MB for a
    large log) in the arenas of the threads that loaded, where it counts in RSS although nothing
    uses it; malloc_trim returns those pages. Whether any were returned; False where the C library
    has no malloc_trim (musl, macOS)."""
    import ctypes  # here: only the end of a load needs it

    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):
        return False
