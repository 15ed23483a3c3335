"""ACLs of the transaction APIs over TCP as `User:ANONYMOUS` (Kafka's KafkaApis table): WRITE on the
transactional id for InitProducerId, AddPartitionsToTxn (and WRITE per topic), AddOffsetsToTxn (and
READ on the group) and EndTxn; DESCRIBE on it for FindCoordinator, DescribeTransactions and
ListTransactions (a filter there, no error); CLUSTER_ACTION for WriteTxnMarkers. The ACLs and a
transaction nobody may describe are made while ANONYMOUS is a super user; the server then restarts
without that."""

from __future__ import annotations

import datetime

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.authz import (
    ANONYMOUS,
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    acl,
    connect,
    create_acls,
    start_secured,
)
from tests.support.harness import wait_until

E = ErrorCode
MINUTE = datetime.timedelta(minutes=1)
ACLS = [acl(TRANSACTIONAL_ID, "tx-w", WRITE), acl(TRANSACTIONAL_ID, "tx-d", DESCRIBE), acl(TOPIC, "t", WRITE),
        acl(GROUP, "g", READ)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("txn-acls"))
    seed = start_secured(data_dir, "topics=t:1,u:1", super_users=(ANONYMOUS,))
    try:
        assert create_acls(seed.bootstrap, *ACLS) == [E.none] * len(ACLS)
        with connect(seed.bootstrap) as c:
            for txn in ("tx-hidden", "tx-d"):
                assert init(c, txn).error_code is E.none
    finally:
        assert seed.stop() == 0, seed.log()
    s = start_secured(data_dir, port=seed.port)
    yield s
    assert s.stop() == 0, s.log()


def init(c, txn: str):
    return c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": txn, "transaction_timeout": MINUTE,
                                                  "producer_id": -1, "producer_epoch": -1})


def add(c, txn: str, pid: int, epoch: int, *topics: str):
    r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": [0]} for t in topics]})
    return {t.name: p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def test_transaction_apis_need_write_on_the_transactional_id(server):
    with connect(server.bootstrap) as c:
        assert init(c, "tx-d").error_code is E.transactional_id_authorization_failed
        r = init(c, "tx-w")
        assert r.error_code is E.none
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(c, "tx-d", pid, epoch, "t") == {"t": E.transactional_id_authorization_failed}
        assert add(c, "tx-w", pid, epoch, "t", "u") == {"t": E.operation_not_attempted, "u": E.topic_authorization_failed}
        assert add(c, "tx-w", pid, epoch, "t") == {"t": E.none}

        def add_offsets(group: str):
            return c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx-w", "producer_id": pid,
                                                            "producer_epoch": epoch, "group_id": group}).error_code
        assert add_offsets("h") is E.group_authorization_failed
        assert add_offsets("g") is E.none

        def end(txn: str):
            return c.request(ApiKey.END_TXN, 3, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                                                 "committed": False}).error_code
        assert end("tx-d") is E.transactional_id_authorization_failed
        assert end("tx-w") is E.none


def test_describe_on_the_transactional_id(server):
    with connect(server.bootstrap) as c:
        # a transaction of its own, ended below (whichever test runs first); an InitProducerId right
        # after another test's abort is answered CONCURRENT_TRANSACTIONS until its markers are written
        txn = wait_until(lambda: (r := init(c, "tx-w")).error_code is E.none and r, 30, "tx-w initialised")
        assert add(c, "tx-w", txn.producer_id, txn.producer_epoch, "t") == {"t": E.none}
        r = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx-w", "tx-d", "tx-hidden"]})
        assert [k.error_code for k in r.coordinators] == [E.none, E.none, E.transactional_id_authorization_failed]
        described = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx-hidden", "tx-w"]})
        hidden, writer = described.transaction_states
        assert hidden.error_code is E.transactional_id_authorization_failed
        assert writer.error_code is E.none
        listed = c.request(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": [],
                                                         "duration_filter": -1})
        assert sorted(t.transactional_id for t in listed.transaction_states) == ["tx-d", "tx-w"]
        assert c.request(ApiKey.END_TXN, 3, {"transactional_id": "tx-w", "producer_id": txn.producer_id,
                                             "producer_epoch": txn.producer_epoch, "committed": False}).error_code \
            is E.none


def test_write_txn_markers_needs_cluster_action(server):
    with connect(server.bootstrap) as c:
        r = c.request(ApiKey.WRITE_TXN_MARKERS, 2, {"markers": [{
            "producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
            "topics": [{"name": "t", "partition_indexes": [0]}]}]})
        assert r.markers[0].topics[0].partitions[0].error_code is E.cluster_authorization_failed
