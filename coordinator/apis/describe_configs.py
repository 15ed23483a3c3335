"""DescribeConfigs (32), v1–v4 (Kafka 4 removed v0): v1 adds synonyms and each config's source,
v3 its type and documentation, v4 is flexible.

A GROUP resource (type 32) lists the group's consumer.session.timeout.ms and
consumer.heartbeat.interval.ms: its override (source GROUP_CONFIG) or the broker's group.consumer.*
value (STATIC_BROKER_CONFIG when set, DEFAULT_CONFIG otherwise), with that chain as synonyms, the
same for share.record.lock.duration.ms and Kafka 4.3's share.delivery.count.limit and
share.partition.max.record.locks (group.share.*), and share.auto.offset.reset and share.isolation.level
(override, else DEFAULT_CONFIG latest / read_uncommitted); the group need not exist. (Kafka 4.3
also lists the other share.*, streams.* and consumer.assignment.interval.ms configs of the group
types and features groupd does not have yet.) A TOPIC lists every Kafka topic config with its effective
value, source and synonyms (coordinator/core/topic_configs.py: a compacted topic answers exactly
cleanup.policy=compact); an unknown topic: UNKNOWN_TOPIC_OR_PARTITION. The BROKER resource of this
node lists groupd's settings, read-only (they are static), STATIC_BROKER_CONFIG when given,
DEFAULT_CONFIG otherwise; the cluster-wide default resource ("") has none (no dynamic configs).
"""

from __future__ import annotations

from groupd.coordinator.core import topic_configs
from groupd.coordinator.core.group_config import (
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    GROUP_DEFAULTS,
    NAMES,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_ISOLATION_LEVEL,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_RECORD_LOCK_DURATION_MS,
    STREAMS_ASSIGNMENT_INTERVAL_MS,
    STREAMS_HEARTBEAT_INTERVAL_MS,
    STREAMS_INITIAL_REBALANCE_DELAY_MS,
    STREAMS_NUM_STANDBY_REPLICAS,
    STREAMS_SESSION_TIMEOUT_MS,
    defaults,
)
from groupd.coordinator.runtime import offsets_topic
from groupd.coordinator.security.acls import AclOperation
from groupd.coordinator.security.authorizer import config_resource_denied
from groupd.coordinator.settings import KEYS, KEYS_BY_NAME
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.catalog import illegal_topic_name, legal_topic_name

from .incremental_alter_configs import BROKER, GROUP, TOPIC
from .request import Request

KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (1, 4)

STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8  # DescribeConfigsResponse.ConfigSource
BOOLEAN, STRING, INT, LONG, DOUBLE, PASSWORD = 1, 2, 3, 5, 6, 9  # ConfigType
DOCUMENTATION = {
    CONSUMER_SESSION_TIMEOUT_MS: "The timeout to detect client failures when using the consumer group protocol.",
    CONSUMER_HEARTBEAT_INTERVAL_MS: "The heartbeat interval given to the members of a consumer group.",
    SHARE_AUTO_OFFSET_RESET: "The strategy to initialize the share-partition start offset.",
    SHARE_RECORD_LOCK_DURATION_MS: "The record acquisition lock duration in milliseconds for share groups.",
    SHARE_ISOLATION_LEVEL: "Controls how to read records written transactionally. If set to \"read_committed\", the "
                           "share group will only deliver transactional records which have been committed. If set to "
                           "\"read_uncommitted\", the share group will return all messages, even transactional "
                           "messages which have been aborted. Non-transactional records will be returned "
                           "unconditionally in either mode.",
    SHARE_DELIVERY_COUNT_LIMIT: "The maximum number of delivery attempts for a record delivered to a share group.",
    SHARE_PARTITION_MAX_RECORD_LOCKS: "Share-group record lock limit per share-partition.",
    STREAMS_SESSION_TIMEOUT_MS: "The timeout to detect client failures when using the streams group protocol.",
    STREAMS_HEARTBEAT_INTERVAL_MS: "The heartbeat interval given to the members.",
    STREAMS_NUM_STANDBY_REPLICAS: "The number of standby replicas for each task.",
    STREAMS_INITIAL_REBALANCE_DELAY_MS: "The amount of time the group coordinator will wait for more streams "
                                        "clients to join a new group before performing the first rebalance.",
    STREAMS_ASSIGNMENT_INTERVAL_MS: "The interval between assignment updates for a streams group.",
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
                                                body.include_synonyms, getattr(body, "include_documentation", False))
        if error == ErrorCode.none and message is None:
            message = ""  # Kafka answers a described resource with an empty message, not null
        results.append({"error_code": error, "error_message": message, "resource_type": r.resource_type,
                        "resource_name": r.resource_name, "configs": configs})
    return build_response(KEY, request.version, {"results": results})


def _describe(node, resource_type: int, name: str, keys, synonyms: bool, documented: bool):
    if resource_type == GROUP:
        if not name:
            return ErrorCode.invalid_request, "Group name must not be empty", []
        return ErrorCode.none, None, _group(node.settings, node.group_configs.overrides.get(name, {}), keys,
                                            synonyms, documented)
    if resource_type == TOPIC:
        if name == node.offsets_topic.name:
            overrides = offsets_topic.configs(node.settings)
        elif node.catalog.get(name) is not None:
            overrides = dict(node.catalog.get(name).configs)
        elif not legal_topic_name(name):
            return ErrorCode.invalid_topic_exception, illegal_topic_name(name), []
        else:
            return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.", []
        return ErrorCode.none, None, topic_configs.describe(node.settings, overrides, keys, synonyms, documented)
    if resource_type == BROKER:
        if name == "":
            return ErrorCode.none, None, []  # the cluster-wide dynamic defaults: groupd has none
        if not name.lstrip("-").isdigit():
            return ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}", []
        if int(name) != node.node_id:
            return (ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {node.node_id} or empty string, but received {name}", [])
        return ErrorCode.none, None, _broker(node.settings, keys, synonyms, documented)
    return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}", []


def _group(settings, overrides: dict, keys, synonyms: bool, documented: bool) -> list[dict]:
    """A group's configs: its override (GROUP_CONFIG), else the broker's group.<name> as given
    (STATIC_BROKER_CONFIG) or by default; the synonyms in that order, as Kafka lists them."""
    broker = defaults(settings)
    out = []
    for n in NAMES:
        if keys is not None and n not in keys:
            continue
        setting = f"group.{n}"
        chain = [{"name": n, "value": str(overrides[n]), "source": GROUP_CONFIG}] if n in overrides else []
        if n in GROUP_DEFAULTS:  # no broker setting behind it
            chain.append({"name": n, "value": GROUP_DEFAULTS[n], "source": DEFAULT_CONFIG})
            out.append({"name": n, "value": chain[0]["value"], "read_only": False, "is_sensitive": False,
                        "config_source": chain[0]["source"], "synonyms": chain if synonyms else [],
                        "config_type": STRING, "documentation": DOCUMENTATION[n] if documented else None})
            continue
        if not settings.origins.get(setting, "default").startswith("default"):
            chain.append({"name": setting, "value": str(broker[n]), "source": STATIC_BROKER_CONFIG})
        chain.append({"name": setting, "value": str(KEYS_BY_NAME[setting].default),
                      "source": DEFAULT_CONFIG})
        out.append({"name": n, "value": chain[0]["value"], "read_only": False, "is_sensitive": False,
                    "config_source": chain[0]["source"], "synonyms": chain if synonyms else [],
                    "config_type": INT, "documentation": DOCUMENTATION[n] if documented else None})
    return out


def _broker(settings, keys, synonyms: bool, documented: bool) -> list[dict]:
    """This node's settings as broker configs: all read-only (groupd changes none at run time), the
    secret ones sensitive with no value."""
    out = []
    for key in KEYS:
        if keys and key.name not in keys:
            continue
        shown = key.name
        if key.name == "advertised.listeners" and not settings.advertised_listeners:
            shown = "listeners"  # unset: the listeners are advertised, as by Kafka
        value = None if key.secret else topic_configs.setting_text(settings.value(shown))
        given = not settings.origins.get(shown, "default").startswith("default")
        source = STATIC_BROKER_CONFIG if given else DEFAULT_CONFIG
        chain = [{"name": key.name, "value": value, "source": source}] if given else []
        if key.default is not None:
            chain.append({"name": key.name, "value": None if key.secret else topic_configs.setting_text(key.default),
                          "source": DEFAULT_CONFIG})
        out.append({"name": key.name, "value": value, "read_only": True, "is_sensitive": key.secret,
                    "config_source": source, "synonyms": chain if synonyms else [],
                    "config_type": _type(key), "documentation": key.doc if documented else None})
    return out


def _type(key) -> int:
    """DescribeConfigs' ConfigType of a setting, from its default (an unset one: a duration)."""
    default = key.default
    if key.secret:
        return PASSWORD
    if isinstance(default, bool):
        return BOOLEAN
    if isinstance(default, float):
        return DOUBLE
    if default is None or isinstance(default, int):
        return LONG if key.name.endswith((".ms", ".bytes")) else INT
    return STRING
