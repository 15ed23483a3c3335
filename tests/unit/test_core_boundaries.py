"""The sans-IO core (design.md "Layers"): no module of it imports asyncio, logging, Prometheus or
a clock, and every event it reports has a handler in the shell."""

import ast
import dataclasses
import pathlib

from groupd.coordinator import events
from groupd.coordinator.observability import observe

COORDINATOR = pathlib.Path(__file__).resolve().parents[2] / "coordinator"
CORE_MODULES = ["clock.py", "events.py", "group.py", "group_config.py", "offsets.py", "outcome.py", "partitioning.py",
                "requests.py", "runner.py", "shard.py",
                # the SASL exchanges, which say they are sans-IO too
                "authenticator.py", "oauthbearer.py", "sasl.py", "scram.py"]
CORE_PACKAGES = ["classic", "consumer", "share"]  # each group type's machine
FORBIDDEN = {"asyncio", "logging", "prometheus_client", "time", "uvloop"}


def core_files() -> list[pathlib.Path]:
    files = [COORDINATOR / name for name in CORE_MODULES]
    for package in CORE_PACKAGES:
        files += sorted((COORDINATOR / package).glob("**/*.py"))
    return files


def imported_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_imports_no_event_loop_logging_metrics_or_clock():
    files = core_files()
    assert len(files) >= len(CORE_MODULES) + 4  # the classic package is there too
    offenders = {str(path.relative_to(COORDINATOR)): sorted(imported_modules(path) & FORBIDDEN)
                 for path in files if imported_modules(path) & FORBIDDEN}
    assert offenders == {}


def test_every_core_event_has_a_shell_handler():
    kinds = {obj for obj in vars(events).values() if isinstance(obj, type) and dataclasses.is_dataclass(obj)}
    assert kinds and kinds == set(observe.HANDLERS)
