"""Size-prefixed frames: a 4-byte big-endian length, then that many bytes."""

from __future__ import annotations


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size


class FrameReader:
    """Accumulates stream bytes and hands out complete frames (without their size prefix)."""

    __slots__ = ("_buf", "_limit")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self._limit = limit

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        frames = []
        start = 0
        end = len(buf)
        while end - start >= 4:
            size = int.from_bytes(buf[start : start + 4], "big", signed=True)
            if size < 0 or size > self._limit:
                raise FrameTooLarge(size, self._limit)
            if end - start - 4 < size:
                break
            frames.append(bytes(buf[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            del buf[:start]
        return frames

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame still waiting for the rest."""
        return len(self._buf)
