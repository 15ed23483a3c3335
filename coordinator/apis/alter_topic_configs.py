"""AlterConfigs and IncrementalAlterConfigs of a TOPIC resource: the topic's config overrides changed
(coordinator/core/topic_configs.py: Kafka's operations, checks and messages), validated over the
broker's defaults, then written to the topic catalog by whoever writes it (the controller worker
under `--workers`, any node in cluster mode: coordinator/cluster/controller_writes.py), which applies
the operations again to the overrides as they are then (concurrent changes lose nothing). The records
plane reads the result through `TopicCatalog.topic_config`.
"""

from __future__ import annotations

import logging

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.core.group_config import ConfigError
from groupd.coordinator.core.topic_configs import altered, checked
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage.catalog import illegal_topic_name, legal_topic_name

from .request import Request, respond

log = logging.getLogger("groupd")


def alter_topic(node, request: Request, name: str, changes: list, validate_only: bool):
    """(error, message) for one TOPIC resource, or a future of it while the catalog is written.
    `changes`: IncrementalAlterConfigs' (name, operation, value), or AlterConfigs' (name, value)."""
    if not name:
        return ErrorCode.invalid_request, "Default topic resources are not allowed."
    if not legal_topic_name(name):
        return ErrorCode.invalid_topic_exception, illegal_topic_name(name)
    if name == node.offsets_topic.name:
        return ErrorCode.invalid_config, (f"{name}'s configs follow groupd's offsets.topic.* settings; they "
                                          "cannot be altered")
    incremental = request.header.api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
    topic = node.catalog.get(name)
    try:  # answered here when it is refused whatever the topic's overrides are by the time of the write
        checked(altered(dict(topic.configs) if topic else {}, changes, incremental), node.settings)
    except ConfigError as e:
        return e.error_code, str(e)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
    if validate_only:
        return ErrorCode.none, None
    written = controller_writes.write(node, "set_topic_configs", {
        "topic": name, "changes": [list(c) for c in changes], "incremental": incremental})
    return respond(written, lambda done: _written(node, request, name, done))


def _written(node, request: Request, name: str, done: dict):
    refusal = controller_writes.refusal(done, f"The topic configs could not be written: {done.get('failed')}")
    if refusal is not None:
        if "failed" in done:
            log.error("topic configs not written topic=%s: %s", name, done["failed"])
        return refusal
    if "refused" in done:  # another change came first and this one no longer holds
        return ErrorCode(done["refused"][0]), done["refused"][1]
    if done.get("missing"):
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
    if node.controller is not None:  # a worker: read the controller's catalog now, not at the next tick
        node.catalog.reload()
    log.info("topic configs altered topic=%s configs=%s client=%s host=%s", name,
             ",".join(f"{k}={v}" for k, v in sorted(done["configs"].items())) or "(defaults)",
             request.header.client_id, request.client_host)
    return ErrorCode.none, None
