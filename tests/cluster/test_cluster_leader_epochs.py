"""Leader epochs in cluster mode: a real etcd and two groupd nodes on one data dir. A data partition's
epoch is its leader's claim stamp, so both nodes report the same one; when the leader stops and the
other node takes the partition, the epoch grows, new batches carry it, the partition's
leader-epoch-checkpoint records where it began, and OffsetForLeaderEpoch answers the old epoch's end
there (what a consumer that read from the old leader validates its position with)."""

from __future__ import annotations

import os
import struct

import pytest

from groupd.coordinator.tools.groups import AdminConnection
from groupd.protocol import ErrorCode as E
from groupd.protocol.apis import ApiKey
from tests.apis.test_leader_epochs_wire import end_offsets
from tests.cluster.test_cluster_etcd import etcd, spread, two_nodes  # noqa: F401,F811 (the fixture)
from tests.cluster.test_cluster_records import agreed_leaders
from tests.storage.test_records_plane import batch, fetch_request, list_offset, produce
from tests.support.harness import wait_until
from tests.support.process import WireClient

pytestmark = pytest.mark.clients


@pytest.fixture
def nodes(tmp_path, etcd):  # noqa: F811
    yield from two_nodes(tmp_path, etcd, "records.plane=disk")


def epochs(bootstrap: str) -> dict[int, int]:
    with AdminConnection(bootstrap, "epochs-test") as c:
        r = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "t", "topic_id": None}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
    return {p.partition_index: p.leader_epoch for p in r.topics[0].partitions}


def produced(bootstrap: str, partition: int, count: int) -> int:
    """Produce `count` records once the node serves the partition (ListOffsets answers: loaded); the
    base offset."""
    def serving():
        with WireClient(bootstrap) as c:
            return list_offset(c, "t", partition, -1).error_code is E.none
    wait_until(serving, 60, "the leader serves the partition")
    with WireClient(bootstrap) as c:
        p = produce(c, "t", partition, batch(count))
    assert p.error_code is E.none, p
    return p.base_offset


def test_a_new_leader_bumps_the_epoch_and_records_where_it_began(nodes, tmp_path):
    spread(nodes)
    lead = agreed_leaders(nodes, {1, 2}, exactly=True)
    partition = next(p for p, node in lead.items() if node == 2)
    old, survivor = nodes[1], nodes[0]
    assert produced(old.bootstrap, partition, 3) == 0
    first = epochs(old.bootstrap)[partition]
    assert first > 0 and epochs(survivor.bootstrap)[partition] == first  # every node reports the same

    assert old.stop() == 0, old.log()  # a clean hand-over: node 1 claims the partition's home
    agreed_leaders([survivor], {1})
    assert produced(survivor.bootstrap, partition, 2) == 3
    second = epochs(survivor.bootstrap)[partition]
    assert second > first

    with WireClient(survivor.bootstrap) as c:
        assert end_offsets(c, "t", [(partition, -1, first), (partition, second, second),
                                    (partition, first, second)]) == [
            (partition, E.none, first, 3), (partition, E.none, second, 5), (partition, E.fenced_leader_epoch, -1, -1)]
        # each leader's segment is read by its own fetch (one segment per fetch, as Kafka's)
        stamps = [struct.unpack_from(">i", fetch_from(c, partition, offset), 12)[0] for offset in (0, 3)]
    assert stamps == [first, second]
    with open(os.path.join(str(tmp_path / "data"), f"t-{partition}", "leader-epoch-checkpoint")) as f:
        assert f.read() == f"0\n2\n{first} 0\n{second} 3\n"


def fetch_from(c: WireClient, partition: int, offset: int) -> bytes:
    f = c.request(ApiKey.FETCH, 12, fetch_request([("t", partition, offset)])).responses[0].partitions[0]
    assert f.error_code is E.none, f
    return f.records
