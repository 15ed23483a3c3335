"""DeleteRecords against Apache Kafka and groupd, answer by answer (diff.py), with no allowed difference:
on a topic of the scenario's own (CreateTopics v4, six records in three batches), every version, the
offset rules (-1, past the high watermark, below -1, at and below the log start), ListOffsets earliest,
latest and by time afterwards, several partitions in one request, an unknown topic and partition,
`__consumer_offsets` and a compact-only topic."""

from __future__ import annotations

import pytest

from groupd.protocol.apis import ApiKey

from .corpus import MS, TS, list_offsets, ready
from .corpus import produced_batch as batch
from .diff import Side, compare, run

pytestmark = pytest.mark.differential


def delete(topics: dict[str, list[tuple[int, int]]]) -> dict:
    return {"timeout": 5000 * MS, "topics": [{"name": t, "partitions": [
        {"partition_index": p, "offset": o} for p, o in ps]} for t, ps in topics.items()]}


def delete_records_scenario(s: Side) -> None:
    topic, compacted = f"{s.scenario}-t", f"{s.scenario}-c"
    s.call("create", ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": compacted, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": "cleanup.policy", "value": "compact"}]}],
        "timeout": 30_000 * MS, "validate_only": False})
    ready(s, topic, 2)
    ready(s, compacted, 1)
    for p in (0, 1):
        for i in range(3):  # offsets 0-5 in batches at 0, 2, 4, stamped a second apart per batch
            s.call(f"produce-{p}-{i}", ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout": 5000 * MS,
                                                          "topic_data": [{"name": topic, "partition_data": [
                                                              {"index": p, "records": batch(2, TS + 1000 * i)}]}]})
    s.call("v0-to-1", ApiKey.DELETE_RECORDS, 0, delete({topic: [(0, 1)]}))
    s.call("v1-to-3", ApiKey.DELETE_RECORDS, 1, delete({topic: [(0, 3)]}))
    s.call("v2-below-start", ApiKey.DELETE_RECORDS, 2, delete({topic: [(0, 2)]}))
    s.call("v2-at-start", ApiKey.DELETE_RECORDS, 2, delete({topic: [(0, 3)]}))
    s.call("past-high-watermark", ApiKey.DELETE_RECORDS, 2, delete({topic: [(0, 7)]}))
    s.call("below-minus-one", ApiKey.DELETE_RECORDS, 2, delete({topic: [(0, -2)]}))
    for label, ts in (("earliest", -2), ("latest", -1), ("by-time-0", 0), ("by-time-batch-2", TS + 2000)):
        s.call(f"list-{label}", ApiKey.LIST_OFFSETS, 3, list_offsets(topic, 0, ts))  # v3: no leader epoch
    s.call("both-partitions", ApiKey.DELETE_RECORDS, 2, delete({topic: [(0, -1), (1, 6)]}))
    s.call("list-earliest-after-all", ApiKey.LIST_OFFSETS, 3, list_offsets(topic, 1, -2))
    s.call("unknown", ApiKey.DELETE_RECORDS, 2, delete({f"{s.scenario}-none": [(0, 0)], topic: [(2, 0)]}))
    s.call("internal", ApiKey.DELETE_RECORDS, 2, delete({"__consumer_offsets": [(0, 0)]}))
    s.call("compacted", ApiKey.DELETE_RECORDS, 2, delete({compacted: [(0, 0)]}))


def test_delete_records_answers_as_kafka(servers):
    kafka, groupd = servers
    k = run(delete_records_scenario, Side("kafka", kafka.bootstrap, "dr", kafka.topic_ids))
    assert k.steps and not any(label == "aborted" for label, _ in k.steps), k.steps[-1:]
    g = run(delete_records_scenario, Side("groupd", groupd.bootstrap, "dr", groupd.topic_ids))
    diffs = compare(k, g)
    assert not diffs, "\n".join(diffs)
