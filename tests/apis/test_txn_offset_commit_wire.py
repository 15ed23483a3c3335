"""TxnOffsetCommit (28) on the wire against the real server, hand-built requests: its error table
(per partition only: topics, INVALID_GROUP_ID, KIP-447 membership of classic and consumer groups,
metadata size), RequireStable OffsetFetch of the pending offsets (UNSTABLE_OFFSET_COMMIT, offset -1,
metadata ""), ApiVersions, and pending offsets that outlive a restart of the process. Each group's
commits belong to a transaction opened at the transaction coordinator first (InitProducerId,
AddOffsetsToTxn): TxnOffsetCommit verifies it there (`node.transactions.verify_offsets`)."""

from __future__ import annotations

import datetime

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.process import GroupdProcess, WireClient, groupd_fixture, join_and_sync

E = ErrorCode
server = groupd_fixture("topics=t:4", "group.initial.rebalance.delay.ms=0")


_open: dict[tuple[int, str], tuple[str, int, int]] = {}  # (server port, group) → its open transaction


def transaction_for(c: WireClient, group: str) -> tuple[str, int, int]:
    """(transactional id, producer id, epoch) of a transaction holding `group`'s offsets partition."""
    key = (c.sock.getpeername()[1], group)
    if key not in _open:
        txn = f"tx-{group}"
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": txn,
                                                   "transaction_timeout": datetime.timedelta(minutes=5),
                                                   "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == E.none, r
        added = c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, "producer_id": r.producer_id,
                                                         "producer_epoch": r.producer_epoch, "group_id": group})
        assert added.error_code == E.none, added
        _open[key] = (txn, r.producer_id, r.producer_epoch)
    return _open[key]


def txn_commit(c: WireClient, group: str, offsets: dict, *, version: int = 3, generation: int = -1,
               member_id: str = "", instance_id: str | None = None, topic: str = "t",
               metadata: str = "", producer_id: int | None = None) -> dict[tuple[str, int], ErrorCode]:
    txn, pid, epoch = transaction_for(c, group)
    reply = c.request(ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": txn, "group_id": group, "producer_id": pid if producer_id is None else producer_id,
        "producer_epoch": epoch,
        "generation_id": generation, "member_id": member_id, "group_instance_id": instance_id,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": metadata}
            for p, o in offsets.items()]}]})
    return {(t.name, p.partition_index): p.error_code for t in reply.topics for p in t.partitions}


def fetch(c: WireClient, group: str, partitions, require_stable: bool) -> dict[int, tuple]:
    reply = c.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "require_stable": require_stable,
                                               "topics": [{"name": "t", "partition_indexes": list(partitions)}]})
    assert reply.error_code == E.none
    return {p.partition_index: (p.error_code, p.committed_offset, p.metadata)
            for t in reply.topics for p in t.partitions}


def test_api_versions_advertises_txn_offset_commit_0_to_5(server):
    with WireClient(server.bootstrap) as c:
        keys = {k.api_key: (k.min_version, k.max_version) for k in c.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert keys[ApiKey.TXN_OFFSET_COMMIT] == (0, 5)  # v5: transactions v2


def test_pending_offsets_answer_unstable_to_require_stable_fetches(server):
    with WireClient(server.bootstrap) as c:
        for version in (0, 2, 3, 4):
            assert txn_commit(c, f"simple-{version}", {0: 5, 1: 6}, version=version, metadata="m") == {
                ("t", 0): E.none, ("t", 1): E.none}
        assert fetch(c, "simple-3", [0, 1, 2], True) == {0: (E.unstable_offset_commit, -1, ""),
                                                         1: (E.unstable_offset_commit, -1, ""), 2: (E.none, -1, "")}
        assert fetch(c, "simple-3", [0, 1], False) == {0: (E.none, -1, ""), 1: (E.none, -1, "")}


def test_topic_and_group_id_errors(server):
    with WireClient(server.bootstrap) as c:
        assert txn_commit(c, "g-topics", {0: 1}, topic="nope") == {("nope", 0): E.unknown_topic_or_partition}
        assert txn_commit(c, "g-topics", {0: 1, 9: 1}) == {("t", 0): E.none, ("t", 9): E.unknown_topic_or_partition}
        assert txn_commit(c, "", {0: 1}) == {("t", 0): E.invalid_group_id}
        assert txn_commit(c, "g-meta", {0: 1}, metadata="x" * 5000) == {("t", 0): E.offset_metadata_too_large}
        assert txn_commit(c, "g-nopid", {0: 1}, producer_id=-1) == {("t", 0): E.invalid_producer_id_mapping}


def test_no_group_and_a_generation_is_illegal_generation(server):
    with WireClient(server.bootstrap) as c:
        assert txn_commit(c, "g-none", {0: 1}, generation=1, member_id="m") == {("t", 0): E.illegal_generation}


def test_classic_group_membership(server):
    with WireClient(server.bootstrap) as c:
        member, generation = join_and_sync(c, "g-classic")
        ok = {("t", 0): E.none}
        assert txn_commit(c, "g-classic", {0: 1}, generation=generation, member_id=member) == ok
        assert txn_commit(c, "g-classic", {0: 1}, generation=generation + 1, member_id=member) == {
            ("t", 0): E.illegal_generation}
        assert txn_commit(c, "g-classic", {0: 1}, generation=generation, member_id="stranger") == {
            ("t", 0): E.unknown_member_id}
        assert txn_commit(c, "g-classic", {0: 1}, generation=generation, member_id=member,
                          instance_id="unknown-instance") == {("t", 0): E.unknown_member_id}
        # v0–2 carry no membership: accepted though the group has a member (OffsetCommit refuses it)
        assert txn_commit(c, "g-classic", {0: 2}, version=2) == ok
        assert txn_commit(c, "g-classic", {0: 2}, version=3) == ok  # v3 without membership, likewise


def _heartbeat(c: WireClient, group: str, member_id: str, epoch: int):
    return c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None, "rack_id": None,
        "rebalance_timeout": datetime.timedelta(seconds=30), "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})


def test_consumer_group_membership(server):
    with WireClient(server.bootstrap) as c:
        joined = _heartbeat(c, "g-848", "m-1", 0)
        assert joined.error_code == E.none
        epoch = joined.member_epoch
        assert txn_commit(c, "g-848", {0: 1}, generation=epoch, member_id="m-1") == {("t", 0): E.none}
        assert txn_commit(c, "g-848", {0: 1}, generation=epoch + 1, member_id="m-1") == {
            ("t", 0): E.illegal_generation}
        assert txn_commit(c, "g-848", {0: 1}, generation=epoch, member_id="m-2") == {("t", 0): E.unknown_member_id}
        assert txn_commit(c, "g-848", {0: 1}, version=2) == {("t", 0): E.unknown_member_id}  # members: who commits?


def test_pending_offsets_outlive_a_restart(tmp_path):
    s = GroupdProcess(str(tmp_path), "topics=t:4").start()
    try:
        with WireClient(s.bootstrap) as c:
            assert txn_commit(c, "g-restart", {0: 5}) == {("t", 0): E.none}
        assert s.stop() == 0
        s.start()
        with WireClient(s.bootstrap) as c:
            assert fetch(c, "g-restart", [0], True) == {0: (E.unstable_offset_commit, -1, "")}
            assert fetch(c, "g-restart", [0], False) == {0: (E.none, -1, "")}
    finally:
        s.stop()
