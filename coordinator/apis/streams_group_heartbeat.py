"""StreamsGroupHeartbeat (88), v0–v1: streams-group membership (KIP-1071), as Kafka 4.3 serves it.

The member id is the client's own; epoch 0 joins (with the topology and RebalanceTimeoutMs), -1
leaves; static membership (-2, InstanceId), TaskOffsets/TaskEndOffsets, warm-up tasks and source
topic regexes are refused as Kafka 4.3 refuses them (INVALID_REQUEST).
v1 (Kafka 4.4, KIP-1331; codec from protocol/newer_versions.py): the same request; the answer's
AcceptableRecoveryLag is an int64 (-1, its default, on an error), and TopologyDescriptionRequired is
false, as Kafka 4.4 answers without a topology-description plugin (groupd stores no descriptions, so
a client never sends StreamsGroupTopologyDescriptionUpdate). MISSING_CLIENT_TAGS, which v1 allows,
never comes: groupd places standbys without client tags. TaskOffsets and TaskEndOffsets, which
Kafka Streams 4.4 sends over v1 (every TaskOffsetIntervalMs) and Kafka 4.4 takes for its warm-up
tasks, are accepted and not used: groupd assigns no warm-ups (v0 still refuses them as Kafka 4.3). Served only when group.coordinator.rebalance.protocols includes
`streams`. ACLs as Kafka's: Read on the group, then Describe on every topic the topology names; the
internal topics the answer names as missing are created here (streams_topics.py).
"""

from __future__ import annotations

import datetime

from groupd.coordinator.core.streams.machine import StreamsHeartbeatRequest, error_reply
from groupd.coordinator.core.streams.tasks import Tasks, task_map
from groupd.coordinator.security.acls import AclOperation, ResourceType
from groupd.coordinator.security.authorizer import authorized
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response
from groupd.storage.streams_records import (
    CopartitionGroup,
    StreamsGroupTopologyValue,
    StreamsTopicInfo,
    Subtopology,
    TopicConfig,
)

from .request import Request, ms, respond
from .streams_topics import create_internal_topics

KEY = ApiKey.STREAMS_GROUP_HEARTBEAT
VERSIONS = (0, 1)


def handle(node, request: Request):
    body, version = request.body, request.version
    if "streams" not in node.settings.group_coordinator_rebalance_protocols:
        return _response(version, error_reply(ErrorCode.unsupported_version, "The streams group protocol is "
                                              "disabled (group.coordinator.rebalance.protocols)."))
    if not authorized(node, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(version, error_reply(ErrorCode.group_authorization_failed))
    topology = _topology(body.topology)
    if topology is not None and not all(authorized(node, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                                        for name in _topic_names(topology)):
        return _response(version, error_reply(ErrorCode.topic_authorization_failed))
    given = [t for t in (body.active_tasks, body.standby_tasks, body.warmup_tasks) if t is not None]
    if given and len(given) < 3:
        return _response(version, error_reply(ErrorCode.invalid_request,
                                              "If one task-type is non-null, all must be non-null."))
    owned = (Tasks(task_map(body.active_tasks), task_map(body.standby_tasks), task_map(body.warmup_tasks))
             if given else None)
    endpoint = body.user_endpoint
    req = StreamsHeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
        endpoint_information_epoch=body.endpoint_information_epoch, instance_id=body.instance_id,
        rack_id=body.rack_id, rebalance_timeout_ms=ms(body.rebalance_timeout), topology=topology, owned=owned,
        owned_warmup_given=bool(body.warmup_tasks), process_id=body.process_id,
        user_endpoint=(endpoint.host, int(endpoint.port)) if endpoint is not None else None,
        client_tags=tuple((kv.key, kv.value) for kv in body.client_tags) if body.client_tags is not None else None,
        # v1's TaskOffsets/TaskEndOffsets (Kafka Streams 4.4 reports them) are taken and not used
        task_offsets_given=version == 0 and body.task_offsets is not None,
        task_end_offsets_given=version == 0 and body.task_end_offsets is not None,
        regex_given=body.topology is not None and any(s.source_topic_regex for s in body.topology.subtopologies),
        shutdown_application=body.shutdown_application,
        client_id=request.header.client_id or "", client_host=request.client_host)
    result = node.coordinator.streams_heartbeat(req, node.topics_image())
    return respond(result, lambda reply: _answer(node, request, reply))


def _answer(node, request: Request, reply: dict):
    create_internal_topics(node, request, reply.get("internal_topics"))
    return _response(request.version, reply)


def _topology(t) -> StreamsGroupTopologyValue | None:
    """The request's topology as the StreamsGroupTopology record holds it."""
    if t is None:
        return None

    def infos(entries) -> tuple:
        return tuple(StreamsTopicInfo(i.name, i.partitions, i.replication_factor,
                                      tuple(TopicConfig(c.key, c.value) for c in i.topic_configs)) for i in entries)

    return StreamsGroupTopologyValue(t.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
                    infos(s.state_changelog_topics), tuple(s.repartition_sink_topics),
                    infos(s.repartition_source_topics),
                    tuple(CopartitionGroup(tuple(c.source_topics), tuple(c.source_topic_regex),
                                           tuple(c.repartition_source_topics)) for c in s.copartition_groups))
        for s in t.subtopologies))


def _topic_names(topology: StreamsGroupTopologyValue) -> set[str]:
    names = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(s.repartition_sink_topics)
        names.update(t.name for t in s.repartition_source_topics)
        names.update(t.name for t in s.state_changelog_topics)
    return names


def _response(version: int, reply: dict):
    if version >= 1 and reply["error_code"] != ErrorCode.none:
        reply = {**reply, "acceptable_recovery_lag": -1}  # v1's default: Kafka sets it only on success
    return build_response(KEY, version, {
        **reply, "heartbeat_interval": datetime.timedelta(milliseconds=reply["heartbeat_interval_ms"]),
        "task_offset_interval": datetime.timedelta(milliseconds=reply["task_offset_interval_ms"])})
