"""The Java KafkaShareConsumer (kafka-clients 4.3) against groupd with explicit acknowledgement
(tests/clients/java/ShareConsume.java): ACCEPT is final, RELEASE hands a record back and it comes
again with delivery count 2, REJECT is never delivered again; afterwards the share-partition's start
offset (DescribeShareGroupOffsets) has moved past every record."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from groupd.protocol.apis import ApiKey
from tests.support.harness import CLIENTS_DIR, stack_available
from tests.support.process import WireClient, groupd_fixture

pytestmark = pytest.mark.clients

server = groupd_fixture("topics=jq:1")
HERE = os.path.dirname(os.path.abspath(__file__))
COUNT = 12


def test_java_share_consumer_accepts_releases_and_rejects(server):
    why = stack_available("java")
    if why:
        pytest.fail(why)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "java-share", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for i in range(COUNT):
        p.produce("jq", value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    run = subprocess.run(["java", "-cp", os.path.join(CLIENTS_DIR, "java", "lib", "*"),
                          os.path.join(HERE, "java", "ShareConsume.java"), server.bootstrap, "jq", "java-share",
                          str(COUNT)], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["deliveries"] == {str(i): ([1, 2] if i % 3 == 1 else [1]) for i in range(COUNT)}
    assert (out["accepted"], out["rejected"]) == (8, 4)
    with WireClient(server.bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "java-share", "topics": None}]})
    [t] = r.groups[0].topics
    assert [(p.partition_index, p.start_offset, p.lag) for p in t.partitions] == [(0, COUNT, 0)]
