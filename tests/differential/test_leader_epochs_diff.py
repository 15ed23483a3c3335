"""Leader epochs against Apache Kafka and groupd, answer by answer (diff.py), with no allowed
difference: on a topic of the scenario's own with records in one partition, ListOffsets v4+ (each
offset's epoch, the current_leader_epoch check), Fetch v12's check (a newer epoch, a negative one),
and OffsetForLeaderEpoch v2-v4: the current epoch's end, an epoch beyond the latest, -1, the fencing
of an older and an unknown newer current epoch, an empty partition, an unknown partition and topic."""

from __future__ import annotations

import uuid

import pytest

from groupd.protocol.apis import ApiKey

from .diff import Side, compare, run
from .test_delete_records_diff import MS, TS, batch, list_offsets, ready

pytestmark = pytest.mark.differential


def end_offsets(topic: str, asks: list[tuple[int, int, int]]) -> dict:
    return {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": p, "current_leader_epoch": current, "leader_epoch": epoch} for p, current, epoch in asks]}]}


def fetch(topic: str, current_epoch: int) -> dict:
    """Fetch v12 from offset 0 of partition 0, read_committed (an empty aborted-transactions list, null
    with an error, as Kafka)."""
    return {"replica_id": -1, "max_wait": 0 * MS, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "cluster_id": None, "forgotten_topics_data": [],
            "topics": [{"topic": topic, "topic_id": uuid.UUID(int=0), "partitions": [
                {"partition": 0, "current_leader_epoch": current_epoch, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}


def leader_epochs_scenario(s: Side) -> None:
    topic = f"{s.scenario}-t"
    s.call("create", ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout": 30_000 * MS, "validate_only": False})
    ready(s, topic, 2)
    for i in range(2):
        s.call(f"produce-{i}", ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout": 5000 * MS,
                                                   "topic_data": [{"name": topic, "partition_data": [
                                                       {"index": 0, "records": batch(3, TS + 1000 * i)}]}]})
    for label, ts in (("earliest", -2), ("latest", -1), ("by-time", TS + 1000), ("not-found", TS + 10**9)):
        s.call(f"list-{label}", ApiKey.LIST_OFFSETS, 9, list_offsets(topic, 0, ts))
    for label, current in (("current", 0), ("newer", 1), ("negative", -2)):
        request = list_offsets(topic, 0, -1)
        request["topics"][0]["partitions"][0]["current_leader_epoch"] = current
        s.call(f"list-{label}", ApiKey.LIST_OFFSETS, 9, request)
    s.call("fetch-newer", ApiKey.FETCH, 12, fetch(topic, 1))
    s.call("fetch-negative", ApiKey.FETCH, 12, fetch(topic, -2))
    for v in (2, 3, 4):
        s.call(f"epochs-v{v}", ApiKey.OFFSET_FOR_LEADER_EPOCH, v, end_offsets(topic, [
            (0, -1, 0), (0, 0, 0), (0, -1, 1), (0, -1, -1), (0, -2, 0), (0, 1, 0), (1, -1, 0), (2, -1, 0)]))
    s.call("epochs-unknown-topic", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, end_offsets(f"{s.scenario}-none", [(0, -1, 0)]))


def test_leader_epochs_answer_as_kafka(servers):
    kafka, groupd = servers
    k = run(leader_epochs_scenario, Side("kafka", kafka.bootstrap, "le", kafka.topic_ids))
    assert k.steps and not any(label == "aborted" for label, _ in k.steps), k.steps[-1:]
    g = run(leader_epochs_scenario, Side("groupd", groupd.bootstrap, "le", groupd.topic_ids))
    diffs = compare(k, g)
    assert not diffs, "\n".join(diffs)
