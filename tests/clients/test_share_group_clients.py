"""Share-group membership (KIP-932) with a real client: confluent-kafka 2.16's ShareConsumer
(librdkafka 2.16, preview) against the real server: the consumer joins with its own member id and
is given every partition; closing the consumer leaves the group. Delivery (ShareFetch and
ShareAcknowledge) is tests/clients/test_share_fetch_clients.py's."""

from __future__ import annotations

import pytest
from confluent_kafka import ShareConsumer

from groupd.protocol.apis import ApiKey
from tests.support.harness import wait_until
from tests.support.process import WireClient, groupd_fixture

pytestmark = pytest.mark.clients

server = groupd_fixture("topics=t:2")


def described(bootstrap: str, group: str):
    with WireClient(bootstrap) as c:
        return c.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                         "include_authorized_operations": False}).groups[0]


def test_a_share_consumer_joins_with_its_own_id_and_leaves_on_close(server):
    consumer = ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": "share-real",
                              "client.id": "share-client"})
    try:
        consumer.subscribe(["t"])

        def joined():
            consumer.poll(0.2)  # the client heartbeats from its own thread; poll drives its fetches
            g = described(server.bootstrap, "share-real")
            return g if g.members and g.members[0].assignment.topic_partitions else None

        g = wait_until(joined, 60, "the share consumer in the group with its partitions")
        [m] = g.members
        assert (g.group_state, g.assignor_name, m.client_id, list(m.subscribed_topic_names)) == (
            "Stable", "simple", "share-client", ["t"])
        assert 1 <= len(m.member_id) <= 36 and m.member_epoch == g.assignment_epoch
        assert [sorted(t.partitions) for t in m.assignment.topic_partitions] == [[0, 1]]
    finally:
        consumer.close()
    g = wait_until(lambda: (lambda d: d if not d.members else None)(described(server.bootstrap, "share-real")),
                   30, "the member gone after close")
    assert g.group_state == "Empty"
