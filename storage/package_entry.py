"""Enter a third-party package without running its `__init__`, when the process needs only some of
its submodules and the `__init__` imports much more (aiokafka's clients, prometheus_client's HTTP
servers, crc32c's metadata lookup): storage/aiokafka_record_code.py, storage/batch_crc.py,
coordinator/observability/prometheus.py.

The package is put in `sys.modules` as a module whose `__init__` has not run yet; its submodules
import as usual. The first attribute asked of the package itself (`from aiokafka import
AIOKafkaConsumer` in a test or a tool sharing the process) runs the real `__init__` in that same
module, so the package behaves as if it had been imported normally all along."""

from __future__ import annotations

import importlib.util
import sys
import threading

_completing = threading.Lock()  # two threads asking at once: one runs the real __init__, once


def enter_without_init(name: str) -> None:
    """Enter package `name` (a no-op when the process imported it already)."""
    if name in sys.modules:
        return
    package = importlib.util.module_from_spec(importlib.util.find_spec(name))

    def complete(attribute: str):
        """Module `__getattr__` of the not yet initialised package: initialise it, then answer."""
        with _completing:
            if vars(package).pop("__getattr__", None) is not None:  # the real __init__ defines every public name
                package.__spec__.loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = complete
    sys.modules[name] = package
