"""Size-prefixed frames: a 4-byte big-endian length, then that many bytes."""

from __future__ import annotations


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size


class FrameReader:
    """Accumulates stream bytes and hands out complete frames (without their size prefix), one at a
    time, so that the reader of a connection can stop between frames (flow control, fairness)."""

    __slots__ = ("_buf", "_start", "_limit")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self._start = 0  # where the next frame begins; consumed bytes are dropped on the next append
        self._limit = limit

    def append(self, data: bytes) -> None:
        if self._start:
            del self._buf[:self._start]
            self._start = 0
        self._buf += data

    def next(self) -> bytes | None:
        """The next complete frame, or None until more bytes arrive. Raises FrameTooLarge as soon
        as a size prefix over the limit is seen, before anything is read for it."""
        buf, start = self._buf, self._start
        if len(buf) - start < 4:
            return None
        size = int.from_bytes(buf[start:start + 4], "big", signed=True)
        if size < 0 or size > self._limit:
            raise FrameTooLarge(size, self._limit)
        end = start + 4 + size
        if end > len(buf):
            return None
        self._start = end
        return bytes(buf[start + 4:end])

    def whole(self, data: bytes) -> bool:
        """`data` is exactly one frame within the limit (the reader may then skip buffering it)."""
        return len(data) >= 4 and 0 <= int.from_bytes(data[:4], "big", signed=True) == len(data) - 4 <= self._limit

    def feed(self, data: bytes) -> list[bytes]:
        """append + every complete frame (for tools and tests that do not pause between frames)."""
        self.append(data)
        return list(iter(self.next, None))

    def set_limit(self, limit: int) -> None:
        """A new largest frame (a SASL connection's limit rises once it has authenticated)."""
        self._limit = limit

    @property
    def pending(self) -> int:
        """Bytes held that no frame handed out has taken: an incomplete frame, or frames not yet read."""
        return len(self._buf) - self._start
