"""The rooms of design.md ("Layers and layout"), read from the code's imports: each room imports only
the rooms below it, no module imports in a circle, the sans-IO core reaches no I/O at any depth, and
pyproject.toml installs every package. Imports under `if TYPE_CHECKING:` are annotations, not edges.

    python -m pytest tests/test_rooms.py        # the check; it names each offending import
"""

import ast
import dataclasses
import pathlib
import tomllib

from groupd.coordinator.core import events
from groupd.coordinator.observability import observe

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDERS = ("protocol", "storage", "analytics", "coordinator")

# Each room and the rooms it may import (besides itself and the standard library). The order is the
# package graph, bottom up: protocol, storage <- core <- settings <- observability <- security,
# runtime <- cluster <- apis <- chaos <- server <- tools, the entry points.
KERNEL = {"protocol", "storage", "core", "settings"}
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "analytics": {"protocol", "storage"},
    "core": {"protocol", "storage"},
    "settings": {"protocol", "storage", "core"},  # settings.py, system_clock.py
    "observability": KERNEL,
    "security": KERNEL | {"observability"},
    "runtime": KERNEL | {"observability"},
    "cluster": KERNEL | {"observability", "security", "runtime"},
    "apis": KERNEL | {"observability", "security", "runtime", "cluster"},
    "chaos": KERNEL | {"observability", "apis"},
    "server": KERNEL | {"observability", "security", "runtime", "cluster", "apis", "chaos"},
    "tools": KERNEL | {"security", "runtime"},  # Kafka clients of a running server
    "entry": {"protocol", "storage", "analytics", "core", "settings", "observability", "security", "runtime",
              "cluster", "apis", "chaos", "server", "tools", "entry"},
}
ROOT_FILES = {"settings": "settings", "system_clock": "settings", "__init__": "settings",
              "cli": "entry", "__main__": "entry", "pytest_plugin": "entry"}
# never imported by the core, directly or through anything it imports
CORE_FORBIDDEN = {"asyncio", "socket", "ssl", "logging", "prometheus_client", "uvloop", "time", "selectors",
                  "threading", "concurrent"}


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(["groupd", *parts])] = path
    return found


MODULES = modules()


def imports(name: str) -> set[str]:
    """Every module `name` imports at run time (absolute names; a `from p import m` of a module m
    counts as p.m)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in MODULES)
    return found


def room(name: str) -> str:
    parts = name.split(".")
    if parts[1] != "coordinator":
        return parts[1]
    if len(parts) == 2:
        return "settings"
    if (ROOT / "coordinator" / parts[2]).is_dir():
        return parts[2]
    return ROOT_FILES[parts[2]]


def test_every_module_lives_in_a_room():
    assert {room(name) for name in MODULES} <= set(ALLOWED)
    assert {room(name) for name in MODULES} >= {"core", "apis", "server", "security", "cluster", "runtime"}


def test_each_room_imports_only_the_rooms_below_it():
    offenders = sorted(f"{name} imports {target} ({room(name)} -> {room(target)})"
                       for name in MODULES for target in imports(name)
                       if target in MODULES and room(target) != room(name)
                       and room(target) not in ALLOWED[room(name)])
    assert offenders == []


def test_no_module_imports_in_a_circle():
    """Importing p.m runs p/__init__ first, but takes no name from it: only explicit imports count
    (apis/__init__ imports its handlers; they import apis/request.py, never the package)."""
    graph = {name: {t for t in imports(name) if t in MODULES and t != name} for name in MODULES}
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_core_reaches_no_io_logging_metrics_or_clock_at_any_depth():
    core = [name for name in MODULES if room(name) == "core"]
    assert len(core) > 20
    offenders = {}
    for name in core:
        seen, todo = set(), [name]
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            for target in imports(module):
                if target in MODULES:
                    todo.append(target)
                elif target.split(".")[0] in CORE_FORBIDDEN:
                    offenders.setdefault(name, set()).add(f"{module} imports {target}")
    assert offenders == {}


def test_every_core_event_has_a_shell_handler():
    kinds = {obj for obj in vars(events).values() if isinstance(obj, type) and dataclasses.is_dataclass(obj)}
    assert kinds and kinds == set(observe.HANDLERS)


def test_pyproject_installs_every_package_under_groupd():
    with open(ROOT / "pyproject.toml", "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert set(setuptools["packages"]) == packages
    assert setuptools["package-dir"] == {f"groupd.{folder}": folder for folder in FOLDERS}
