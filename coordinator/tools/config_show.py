"""`groupd config show`: the effective settings as YAML a file could hold (or JSON), each value with
the source it came from, and each source (file, environment, --set) named once at the top."""

from __future__ import annotations

import json
from typing import Any

import yaml

from groupd.coordinator.settings import KEYS, Settings


def _plain(value: Any, secret: bool = False) -> Any:
    """A value as the file would spell it: listeners and lists comma-joined, maps as maps; a secret
    as Kafka shows one, [hidden] (sasl.users keeps its user names)."""
    if secret and value:
        return {user: "[hidden]" for user in value} if isinstance(value, dict) else "[hidden]"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return value


def _split(origin: str) -> tuple[str, str]:
    """An origin ("default", "file PATH", "env VAR", "--set", each maybe with " (alias)") → (origin
    without its alias, " (alias)" or "")."""
    if origin.endswith(")") and " (" in origin:
        at = origin.rindex(" (")
        return origin[:at], origin[at:]
    return origin, ""


def _source(origin: str) -> str:
    """"file PATH" → "file", "env VAR" → "env": the path and the variables are named once, among
    the sources."""
    base, alias = _split(origin)
    return base.split(" ", 1)[0] + alias


def sources(settings: Settings) -> dict[str, Any]:
    """Each source that gave a value, once: the file's path, the variables, the --set keys."""
    origins = {k.name: _split(settings.origins[k.name])[0] for k in KEYS}
    files = sorted({o[len("file "):] for o in origins.values() if o.startswith("file ")})
    env = sorted({o[len("env "):] for o in origins.values() if o.startswith("env ")})
    sets = [name for name, o in origins.items() if o == "--set"]
    return {"file": files[0] if files else None, "env": env, "set": sets}


def show(settings: Settings, as_json: bool = False) -> str:
    values = {k.name: {"value": _plain(settings.value(k.name), k.secret), "source": _source(settings.origins[k.name])}
              for k in KEYS}
    used = sources(settings)
    if as_json:
        return json.dumps({"sources": used, "settings": values}, indent=2)
    header = ("# groupd's effective settings; sources, lowest to highest: defaults"
              + (f", file {used['file']}" if used["file"] else "")
              + (f", env {' '.join(used['env'])}" if used["env"] else "")
              + (f", --set {' '.join(used['set'])}" if used["set"] else ""))
    lines = [header]
    for name, v in values.items():
        text = yaml.safe_dump({name: v["value"]}, default_flow_style=True, width=10**6).strip()[1:-1]
        lines.append(f"{text}  # {v['source']}")
    return "\n".join(lines)
