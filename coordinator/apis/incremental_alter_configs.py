"""IncrementalAlterConfigs (44), v0–v1: v1 is flexible, nothing else changes.

Only GROUP resources (type 32) hold configs here: `consumer.session.timeout.ms` and
`consumer.heartbeat.interval.ms` per group (spec §2.4), validated against the broker's
group.consumer.min/max bounds as Kafka's GroupConfig does (INVALID_CONFIG with its message), kept
in the data directory (storage/group_configs.py) and read by the group's next heartbeat. The group
need not exist. groupd keeps no topic or broker configs: altering one is INVALID_CONFIG.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping

from protocol import ErrorCode
from protocol.apis import ApiKey
from protocol.codec import build_response

from ..access import config_resource_denied
from ..acls import AclOperation
from ..group_config import ConfigError, incrementally_altered, validate
from . import Request

KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = (0, 1)

TOPIC, BROKER, GROUP = 2, 4, 32  # ConfigResource.Type

log = logging.getLogger("groupd")


def handle(node, request: Request):
    body = request.body
    return build_response(KEY, request.version, {"responses": alter_each(
        node, request, [(r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs])
                        for r in body.resources],
        incrementally_altered, body.validate_only)})


def alter_each(node, request: Request, resources: list[tuple[int, str, list]],
               change: Callable[[Mapping[str, int], list], dict[str, int]], validate_only: bool) -> list[dict]:
    """One result per resource (shared with AlterConfigs, whose `change` replaces the overrides)."""
    counts = Counter((t, name) for t, name, _ in resources)
    results = []
    for resource_type, name, configs in resources:
        if counts[(resource_type, name)] > 1:
            error, message = ErrorCode.invalid_request, "Duplicate resource."
        else:
            error, message = _alter(node, request, resource_type, name, configs, change, validate_only)
        results.append({"error_code": error, "error_message": message, "resource_type": resource_type,
                        "resource_name": name})
    return results


def _alter(node, request: Request, resource_type: int, name: str, configs: list,
           change: Callable[[Mapping[str, int], list], dict[str, int]], validate_only: bool):
    denied = config_resource_denied(node, request, AclOperation.ALTER_CONFIGS, resource_type, name)
    if denied is not None:
        return denied, None
    if resource_type in (TOPIC, BROKER):
        return ErrorCode.invalid_config, ("groupd keeps no topic or broker configs; only GROUP resources "
                                          "(consumer.session.timeout.ms, consumer.heartbeat.interval.ms) can be altered")
    if resource_type != GROUP:
        return ErrorCode.invalid_request, f"Unexpected resource type {resource_type}"
    if not name:
        return ErrorCode.invalid_request, "Group name must not be empty"
    if not node.is_controller:  # another worker writes the group configs: the client asks it again there
        return ErrorCode.not_controller, None
    try:
        overrides = change(node.group_configs.overrides.get(name, {}), configs)
        validate(overrides, node.settings)
    except ConfigError as e:
        return e.error_code, str(e)
    if not validate_only:
        try:
            node.alter_group_configs(name, overrides, request)
        except OSError as e:
            log.error("group configs not written group=%s: %s", name, e)
            return ErrorCode.unknown_server_error, f"The group configs could not be written: {e.strerror}"
    return ErrorCode.none, None
