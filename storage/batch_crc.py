"""The CRC-32C of a v2 record batch (Kafka's DefaultRecordBatch: bytes 17–20 hold the CRC of
everything from the attributes, byte 21, to the end), computed by the crc32c library with the CPU's
CRC instruction where there is one: aiokafka's table-driven CRC costs ~60 µs per 16 KB batch, this
~1 µs (tests/storage/test_batch_crc.py holds the two to the same values)."""

from __future__ import annotations

import struct

from .package_entry import enter_without_init

# the extension alone: the package's __init__ looks its own version up in the installed distributions'
# metadata (importlib.metadata: a scan of sys.path, zipfile, email, csv; ~15 ms of start-up) and
# imports its command line
enter_without_init("crc32c")

from crc32c._crc32c import crc32c  # noqa: E402

CRC_AT, CRC_END = 17, 21
_CRC = struct.Struct(">I")


def crc_of(batch) -> int:
    """The CRC the batch (bytes-like, starting at its base offset) should carry."""
    return crc32c(memoryview(batch)[CRC_END:])


def crc_ok(batch) -> bool:
    return _CRC.unpack_from(batch, CRC_AT)[0] == crc_of(batch)


def set_crc(batch: bytearray) -> None:
    """Recompute the CRC after the covered bytes changed."""
    _CRC.pack_into(batch, CRC_AT, crc_of(batch))
