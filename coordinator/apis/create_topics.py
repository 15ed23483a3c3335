"""CreateTopics (19), v2–v7 (Kafka 4 removed v0–v1).

v3/v4 change nothing on the wire; v5 is flexible and returns the created topic's partitions,
replication factor and configs; v6 only changes quota semantics; v7 returns the topic id.

groupd keeps one copy of each partition. A replication factor above the number of brokers (1 for a
single node) is refused as Kafka refuses it (INVALID_REPLICATION_FACTOR), unless it is -1 or at most
`default.replication.factor` (an operator's allowance for clients that insist on, say, 3); the
topic then still has one replica, which the v5+ answer says. A topic may have at most
`topic.max.partitions` partitions (groupd's bound: Metadata lists every partition, so an unbounded
count would hold the loop and memory); more gets INVALID_PARTITIONS. The topic's configs are checked
as Kafka's controller checks them (INVALID_CONFIG with its message) and kept with the topic in the
catalog; v5+ answers the new topic's effective configs (coordinator/core/topic_configs.py).

The catalog is written off the event loop (storage/catalog.py) and the request answered once it is;
a topic whose write failed gets UNKNOWN_SERVER_ERROR (REQUEST_TIMED_OUT when etcd did not answer in
time, as Kafka answers when its controller cannot commit in time) and was not created.
"""

from __future__ import annotations

from collections import Counter

from groupd.coordinator.cluster import controller_writes
from groupd.coordinator.core import topic_configs
from groupd.coordinator.core.group_config import ConfigError
from groupd.coordinator.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.catalog import illegal_topic_name, legal_topic_name
from groupd.storage.files import DataDirError, DocumentUnavailable
from groupd.storage.transaction_log import TOPIC as TRANSACTION_STATE  # internal: its directory is the txn log's

from .request import Request, respond_all

KEY = ApiKey.CREATE_TOPICS
VERSIONS = (2, 7)


def check_topic(node, t, duplicated: bool, may_create) -> tuple[ErrorCode, str | None, int]:
    """(error, message, partition count) for one requested topic, in the order and with the
    messages of Kafka 4's controller (`ReplicationControlManager.createTopic`); authorization after
    the duplicate check, before anything that would reveal whether the topic exists."""
    if duplicated:
        return ErrorCode.invalid_request, f"Create topics request from client contains a duplicate topic {t.name}", -1
    if not may_create(t.name):
        return ErrorCode.topic_authorization_failed, "Authorization failed.", -1
    if not legal_topic_name(t.name):
        return ErrorCode.invalid_topic_exception, illegal_topic_name(t.name), -1
    if node.catalog.get(t.name) is not None or t.name in (node.offsets_topic.name, TRANSACTION_STATE):
        return ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.", -1
    configs = _configs(t)
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        return ErrorCode.invalid_config, f"Null value not supported for topic configs: {','.join(nulls)}", -1
    try:
        topic_configs.checked(configs, node.settings)
    except ConfigError as e:
        return e.error_code, str(e), -1
    if t.assignments:
        if t.replication_factor != -1:
            return (ErrorCode.invalid_request, "A manual partition assignment was specified, but replication "
                    "factor was not set to -1.", -1)
        if t.num_partitions != -1:
            return (ErrorCode.invalid_request, "A manual partition assignment was specified, but numPartitions "
                    "was not set to -1.", -1)
        if sorted(a.partition_index for a in t.assignments) != list(range(len(t.assignments))) or any(
                list(a.broker_ids) != [node.node_id] for a in t.assignments):
            return ErrorCode.invalid_replica_assignment, f"Replica assignment must place one replica on broker {node.node_id}", -1
        partitions = len(t.assignments)
    elif t.replication_factor < -1 or t.replication_factor == 0:
        return (ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.", -1)
    elif t.num_partitions < -1 or t.num_partitions == 0:
        return ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.", -1
    elif t.replication_factor > max(len(node.cluster.brokers()), node.settings.default_replication_factor):
        return (ErrorCode.invalid_replication_factor, f"Unable to replicate the partition "
                f"{t.replication_factor} time(s): The target replication factor of "
                f"{t.replication_factor} cannot be reached because only {len(node.cluster.brokers())} "
                "broker(s) are registered or some brokers have all their log directories cordoned.", -1)
    else:
        partitions = node.settings.num_partitions if t.num_partitions == -1 else t.num_partitions
    limit = node.settings.topic_max_partitions
    if partitions > limit:
        return ErrorCode.invalid_partitions, too_many_partitions(partitions, limit), -1
    return ErrorCode.none, None, partitions


def _configs(t) -> dict[str, str | None]:
    """The topic's requested configs (the last of a name wins, as Kafka)."""
    return {c.name: c.value for c in t.configs}


def too_many_partitions(partitions: int, limit: int) -> str:
    return (f"Number of partitions {partitions} is more than topic.max.partitions ({limit}), the most a topic "
            "may have on this groupd.")


def write_failure(e: Exception, what: str) -> tuple[ErrorCode, str]:
    """The error a topic change whose catalog write raised `e` answers with (shared with DeleteTopics
    and CreatePartitions)."""
    if isinstance(e, DocumentUnavailable):
        return ErrorCode.request_timed_out, controller_writes.TIMED_OUT
    return ErrorCode.unknown_server_error, f"{what}: {e.strerror if isinstance(e, OSError) and e.strerror else e}"


def handle(node, request: Request):
    body = request.body
    if not node.writes_catalog:  # another worker writes the catalog: the client asks it (Metadata's controller)
        return build_response(ApiKey.CREATE_TOPICS, request.version, {"topics": [
            {"name": t.name, "topic_id": None, "error_code": ErrorCode.not_controller, "error_message": None,
             "num_partitions": -1, "replication_factor": -1, "configs": None, "topic_config_error_code": 0}
            for t in body.topics]})
    counts = Counter(t.name for t in body.topics)
    # CREATE on the cluster covers every topic (its denial is not logged); else CREATE per topic
    cluster = authorized(node, request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False)
    may_create = lambda name: cluster or authorized(  # noqa: E731
        node, request, AclOperation.CREATE, ResourceType.TOPIC, name)
    results = []
    for t in body.topics:
        error, message, partitions = check_topic(node, t, counts[t.name] > 1, may_create)
        if error is ErrorCode.none and not body.validate_only:
            # v5+ describes the new topic's configs only to a principal that may DESCRIBE_CONFIGS it
            shown = authorized(node, request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name)
            results.append(node.spawn(_create(node, request, t.name, partitions, _configs(t), shown)))
            continue
        shown = error is ErrorCode.none and authorized(node, request, AclOperation.DESCRIBE_CONFIGS,
                                                       ResourceType.TOPIC, t.name)
        results.append(_result(t.name, None, error, message, partitions,
                               topic_configs.created(node.settings, _configs(t)) if shown else None))
    return respond_all(results, lambda done: build_response(ApiKey.CREATE_TOPICS, request.version, {"topics": done}))


async def _create(node, request: Request, name: str, partitions: int, configs: dict[str, str], shown: bool) -> dict:
    """The topic's result once the catalog holding it is written (or not)."""
    try:
        topic = await node.catalog.add(name, partitions, configs)
    except (OSError, DataDirError) as e:
        error, message = write_failure(e, "The topic could not be stored")
        node.log_topic_failure("not created", name, message, request)
        return _result(name, None, error, message, -1, None)
    if topic is None:  # another request created it while this one waited
        return _result(name, None, ErrorCode.topic_already_exists, f"Topic '{name}' already exists.", -1, None)
    node.log_topic_change("created", name, topic.partitions, request)
    return _result(name, topic.topic_id, ErrorCode.none, None, topic.partitions,
                   topic_configs.created(node.settings, dict(topic.configs)) if shown else None)


def _result(name: str, topic_id, error: ErrorCode, message: str | None, partitions: int,
            configs: list[dict] | None) -> dict:
    """One topic's answer; `configs` (v5+) only for a principal that may DESCRIBE_CONFIGS it."""
    ok, shown = error is ErrorCode.none, configs is not None
    return {"name": name, "topic_id": topic_id, "error_code": error,
            "error_message": message, "num_partitions": partitions if shown else -1,
            "replication_factor": 1 if shown else -1, "configs": configs,
            "topic_config_error_code": (ErrorCode.topic_authorization_failed if ok and not shown
                                        else ErrorCode.none).value}
