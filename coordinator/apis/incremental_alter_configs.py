"""IncrementalAlterConfigs (44), v0–v1: v1 is flexible, nothing else changes.

GROUP resources (type 32): `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` per
group (spec §2.4), and the share.* and streams.* group configs (coordinator/core/group_config.py
NAMES), validated against the broker's group.*.min/max bounds as Kafka's GroupConfig does
(INVALID_CONFIG with its message), kept in the data directory (storage/group_configs.py) and read
by the group's next heartbeat or share fetch. The group need not exist. TOPIC resources: Kafka's topic configs
(SET, DELETE, APPEND and SUBTRACT for list configs), kept with the topic catalog
(coordinator/apis/alter_topic_configs.py). groupd's broker configs are its static settings: altering
one is INVALID_CONFIG.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.core.group_config import ConfigError, incrementally_altered, validate
from groupd.coordinator.security.acls import AclOperation
from groupd.coordinator.security.authorizer import config_resource_denied
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .alter_topic_configs import alter_topic
from .request import Request, respond, respond_all

KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = (0, 1)

TOPIC, BROKER, GROUP = 2, 4, 32  # ConfigResource.Type

log = logging.getLogger("groupd")


def handle(node, request: Request):
    body = request.body
    return alter_each(node, request, [(r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value)
                                                                          for c in r.configs])
                                      for r in body.resources], incrementally_altered, body.validate_only)


def alter_each(node, request: Request, resources: list[tuple[int, str, list]],
               change: Callable[[Mapping[str, int], list], dict[str, int]], validate_only: bool):
    """The response, one result per resource (shared with AlterConfigs, whose `change` replaces a
    group's overrides; a topic's: alter_topic_configs.py); a future of it while the controller writes
    on another worker's behalf."""
    counts = Counter((t, name) for t, name, _ in resources)
    outcomes = [(ErrorCode.invalid_request, "Duplicate resource.") if counts[(resource_type, name)] > 1 else
                _alter(node, request, resource_type, name, configs, change, validate_only)
                for resource_type, name, configs in resources]
    return respond_all(outcomes, lambda done: build_response(ApiKey(request.header.api_key), request.version, {"responses": [
        {"error_code": error, "error_message": message, "resource_type": resource_type, "resource_name": name}
        for (error, message), (resource_type, name, _) in zip(done, resources)]}))


def _alter(node, request: Request, resource_type: int, name: str, configs: list,
           change: Callable[[Mapping[str, int], list], dict[str, int]], validate_only: bool):
    denied = config_resource_denied(node, request, AclOperation.ALTER_CONFIGS, resource_type, name)
    if denied is not None:
        return denied, None
    if resource_type == TOPIC:
        return alter_topic(node, request, name, configs, validate_only)
    if resource_type == BROKER:
        return ErrorCode.invalid_config, ("groupd's broker configs are static: set them in its settings (YAML, "
                                          "GROUPD_* or --set) and restart")
    if resource_type != GROUP:
        return ErrorCode.invalid_request, f"Unexpected resource type {resource_type}"
    if not name:
        return ErrorCode.invalid_request, "Group name must not be empty"
    try:
        overrides = change(node.group_configs.overrides.get(name, {}), configs)
        validate(overrides, node.settings)
    except ConfigError as e:
        return e.error_code, str(e)
    if validate_only:
        return ErrorCode.none, None
    # on disk first, then for the next heartbeat; the controller writes (on another worker: its answer, later)
    written = controller_writes.write(node, "set_group_configs", {"group": name, "configs": overrides})
    return respond(written, lambda done: _written(node, request, name, overrides, done))


def _written(node, request: Request, name: str, overrides: dict[str, int], done: dict) -> tuple[ErrorCode, str | None]:
    refusal = controller_writes.refusal(done, f"The group configs could not be written: {done.get('failed')}")
    if refusal is not None:
        if "failed" in done or "timed_out" in done:
            log.error("group configs not written group=%s: %s", name, done.get("failed") or done["timed_out"])
        return refusal
    node.group_configs_altered(name, overrides, request)
    return ErrorCode.none, None
