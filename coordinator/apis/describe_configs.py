"""DescribeConfigs (32), v1–v4 (Kafka 4 removed v0): v1 adds synonyms and each config's source,
v3 its type and documentation, v4 is flexible.

A GROUP resource (type 32) lists the group's consumer.session.timeout.ms and
consumer.heartbeat.interval.ms: its override (source GROUP_CONFIG) or the broker's value
(DEFAULT_CONFIG); the group need not exist. A topic or this broker has no configs here: an empty
list (an unknown topic: UNKNOWN_TOPIC_OR_PARTITION).
"""

from __future__ import annotations

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from groupd.coordinator.security.authorizer import config_resource_denied
from groupd.coordinator.security.acls import AclOperation
from groupd.coordinator.core.group_config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS, NAMES, defaults
from .request import Request
from .incremental_alter_configs import BROKER, GROUP, TOPIC

KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (1, 4)

DEFAULT_CONFIG, GROUP_CONFIG = 5, 8  # DescribeConfigsResponse.ConfigSource
INT = 3  # ConfigType
DOCUMENTATION = {
    CONSUMER_SESSION_TIMEOUT_MS: "The timeout to detect client failures when using the consumer group protocol.",
    CONSUMER_HEARTBEAT_INTERVAL_MS: "The heartbeat interval given to the members of a consumer group.",
}


def handle(node, request: Request):
    body = request.body
    results = []
    for r in body.resources:
        denied = config_resource_denied(node, request, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        if denied is not None:
            error, message, configs = denied, None, []
        else:
            error, message, configs = _describe(node, r.resource_type, r.resource_name, r.configuration_keys,
                                                getattr(body, "include_documentation", False))  # v3+
        if error == ErrorCode.none and message is None:
            message = ""  # Kafka answers a described resource with an empty message, not null
        results.append({"error_code": error, "error_message": message, "resource_type": r.resource_type,
                        "resource_name": r.resource_name, "configs": configs})
    return build_response(KEY, request.version, {"results": results})


def _describe(node, resource_type: int, name: str, keys, documented: bool):
    if resource_type == GROUP:
        if not name:
            return ErrorCode.invalid_request, "Group name must not be empty", []
        overrides = node.group_configs.overrides.get(name, {})
        values = {**defaults(node.settings), **overrides}
        return ErrorCode.none, None, [
            {"name": n, "value": str(values[n]), "read_only": False, "is_sensitive": False, "synonyms": [],
             "config_source": GROUP_CONFIG if n in overrides else DEFAULT_CONFIG, "config_type": INT,
             "documentation": DOCUMENTATION[n] if documented else None}
            for n in NAMES if keys is None or n in keys]
    if resource_type == TOPIC:
        if node.catalog.get(name) is None:
            return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.", []
        return ErrorCode.none, None, []
    if resource_type == BROKER:
        if name not in ("", str(node.node_id)):
            return (ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {node.node_id} or empty string, but received {name}", [])
        return ErrorCode.none, None, []
    return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}", []
