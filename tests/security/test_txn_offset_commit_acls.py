"""TxnOffsetCommit's authorization on the wire, in KafkaApis' order: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (GROUP_AUTHORIZATION_FAILED), on
every partition; then READ per topic (TOPIC_AUTHORIZATION_FAILED, before existence). A partition past
every ACL meets the transaction coordinator's check next (INVALID_PRODUCER_ID_MAPPING: producer 1 has
no transaction)."""

from __future__ import annotations

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.authz import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE, acl, connect, create_acls, start_secured

E = ErrorCode
ACLS = [acl(TRANSACTIONAL_ID, "tx-ok", WRITE), acl(GROUP, "g-ok", READ), acl(TOPIC, "t", READ)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("txn-acls"))
    seed = start_secured(data_dir, "topics=t:2,u:1", super_users=("User:ANONYMOUS",))
    try:
        assert create_acls(seed.bootstrap, *ACLS) == [E.none] * len(ACLS)
    finally:
        assert seed.stop() == 0, seed.log()
    s = start_secured(data_dir, port=seed.port)
    yield s
    assert s.stop() == 0, s.log()


def txn_commit(c, transactional_id: str, group: str, *topics: str) -> dict:
    r = c.request(ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": transactional_id, "group_id": group, "producer_id": 1, "producer_epoch": 0,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                               "committed_leader_epoch": -1, "committed_metadata": ""}]}
                   for t in topics]})
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def test_checks_transactional_id_then_group_then_topics(server):
    with connect(server.bootstrap) as c:
        assert txn_commit(c, "tx-other", "g-other", "t") == {("t", 0): E.transactional_id_authorization_failed}
        assert txn_commit(c, "tx-ok", "g-other", "t", "u") == {("t", 0): E.group_authorization_failed,
                                                               ("u", 0): E.group_authorization_failed}
        assert txn_commit(c, "tx-ok", "g-ok", "t", "u", "nope") == {
            ("t", 0): E.invalid_producer_id_mapping, ("u", 0): E.topic_authorization_failed, ("nope", 0): E.topic_authorization_failed}
