"""aiokafka's record code (batch reader and builder, MemoryRecords, its two exceptions) without
running aiokafka's package `__init__`, which imports the client, consumer and producer: a quarter
of the imports of a `groupd serve` that never uses them, and their memory (storage/package_entry.py)."""

from __future__ import annotations

from .package_entry import enter_without_init

enter_without_init("aiokafka")

from aiokafka.errors import CorruptRecordException, UnsupportedCodecError  # noqa: E402
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402
from aiokafka.record.memory_records import MemoryRecords  # noqa: E402

__all__ = ["CorruptRecordException", "DefaultRecordBatch", "DefaultRecordBatchBuilder", "MemoryRecords",
           "UnsupportedCodecError"]
