"""Liveness and readiness as the metrics listener serves them (`GET /healthz`, `GET /ready`):
alive once the process serves, ready once every offsets partition it owns is loaded (a partition still
loading answers its groups COORDINATOR_LOAD_IN_PROGRESS; one that failed to load, NOT_COORDINATOR)."""

from __future__ import annotations

import json
from typing import Any

JSON = "application/json"


def partitions(coordinator: Any) -> dict[str, int]:
    """How many offsets partitions the runtime's GroupCoordinator owns, and how many of those are in
    each state (by state name: the runtime imports the metrics, which import this module)."""
    states = [s.value for s in coordinator.states if s.value != "unowned"]
    return {"partitions": len(states), "loaded": states.count("active"), "loading": states.count("loading"),
            "failed": states.count("failed")}


def is_ready(coordinator: Any) -> bool:
    """Every owned offsets partition loaded (the metrics listener's and the admin endpoint's /ready)."""
    counts = partitions(coordinator)
    return counts["loaded"] == counts["partitions"]


def ready(coordinator: Any) -> tuple[str, bytes, str]:
    """(HTTP status, body, content type) of `GET /ready`: 200 when every owned partition is loaded, else 503."""
    counts = partitions(coordinator)
    ready_ = counts["loaded"] == counts["partitions"]
    body = {"status": "ready" if ready_ else "not ready", **counts}
    return ("200 OK" if ready_ else "503 Service Unavailable"), (json.dumps(body) + "\n").encode(), JSON


def alive() -> tuple[str, bytes, str]:
    """`GET /healthz`: the event loop answered, so the process is alive and serving."""
    return "200 OK", b'{"status": "alive"}\n', JSON
