"""DeleteRecords against Apache Kafka and groupd, answer by answer (diff.py), with no allowed difference:
on a topic of the scenario's own (CreateTopics v4, six records in three batches), every version, the
offset rules (-1, past the high watermark, below -1, at and below the log start), ListOffsets earliest,
latest and by time afterwards, several partitions in one request, an unknown topic and partition,
`__consumer_offsets` and a compact-only topic."""

from __future__ import annotations

import datetime
import struct
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

from .diff import Side, compare, run

pytestmark = pytest.mark.differential

MS = datetime.timedelta(milliseconds=1)
TS = (int(time.time()) - 3600) * 1000  # an hour ago: Kafka refuses a timestamp an hour ahead (4.x's default)


def batch(n: int, ts: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=None, value=b"v", headers=[])
    data = b.build()
    struct.pack_into(">q", data, 0, 0)
    return bytes(data)


def delete(topics: dict[str, list[tuple[int, int]]]) -> dict:
    return {"timeout": 5000 * MS, "topics": [{"name": t, "partitions": [
        {"partition_index": p, "offset": o} for p, o in ps]} for t, ps in topics.items()]}


def list_offsets(topic: str, partition: int, timestamp: int) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]}


def ready(s: Side, topic: str, partitions: int) -> None:
    """Wait (unrecorded) until every partition answers ListOffsets: Kafka elects its leaders after
    CreateTopics answers."""
    deadline = time.monotonic() + 60
    for p in range(partitions):
        while s.client().request(ApiKey.LIST_OFFSETS, 7, list_offsets(topic, p, -1)).topics[0].partitions[0] \
                .error_code is not ErrorCode.none:
            assert time.monotonic() < deadline, f"{topic}-{p} has no leader"
            time.sleep(0.1)


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
