"""aiokafka's record code (batch reader and builder, MemoryRecords, its two exceptions) without
running aiokafka's package `__init__`, which imports the client, consumer and producer: a quarter
of the imports of a `groupd serve` that never uses them, and their memory.

The package is entered as a module whose `__init__` has not run yet; its submodules import as
usual. The first attribute asked of the package itself (`from aiokafka import AIOKafkaConsumer`
in a test or a tool sharing the process) runs the real `__init__` in that same module, so the
package behaves as if it had been imported normally all along."""

from __future__ import annotations

import importlib.util
import sys
import threading

_completing = threading.Lock()  # two threads asking at once: one runs the real __init__, once


def _complete(name: str):
    """Module `__getattr__` of the not yet initialised package: initialise it, then answer."""
    package = sys.modules["aiokafka"]
    with _completing:
        if vars(package).pop("__getattr__", None) is not None:  # the real __init__ defines every public name
            package.__spec__.loader.exec_module(package)
    return getattr(package, name)


if "aiokafka" not in sys.modules:
    _spec = importlib.util.find_spec("aiokafka")
    _package = importlib.util.module_from_spec(_spec)
    _package.__getattr__ = _complete
    sys.modules["aiokafka"] = _package

from aiokafka.errors import CorruptRecordException, UnsupportedCodecError  # noqa: E402
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402
from aiokafka.record.memory_records import MemoryRecords  # noqa: E402

__all__ = ["CorruptRecordException", "DefaultRecordBatch", "DefaultRecordBatchBuilder", "MemoryRecords",
           "UnsupportedCodecError"]
