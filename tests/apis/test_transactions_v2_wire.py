"""Transactions v2 (KIP-890 part 2) over the wire against a real `groupd serve`: the finalized
`transaction.version` feature in ApiVersions, Produce v12 adding its partition implicitly (v11 still
only verifies), TxnOffsetCommit v5 adding the group implicitly, EndTxn v5 bumping the epoch and
answering it, a retried EndTxn v5 answered NONE with the same identity (across a restart too: the
log keeps the client's transaction version), and read_committed seeing only committed records."""

from __future__ import annotations

import datetime
import time

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.apis.test_transactions_wire import init, state, wait_state
from tests.storage.test_records_plane import batch, produce
from tests.support.process import GroupdProcess, WireClient

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)


@pytest.fixture
def server(tmp_path):
    s = GroupdProcess(str(tmp_path), "topics=t:2", "offsets.topic.num.partitions=3").start()
    yield s
    if s.alive():
        assert s.stop() == 0, s.log()


def features(c: WireClient, version: int):
    r = c.request(ApiKey.API_VERSIONS, version, {"client_software_name": "wire-test",
                                                 "client_software_version": "1.0"})
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}
    return supported, finalized, r.finalized_features_epoch


def end(c: WireClient, pid: int, epoch: int, commit: bool, txn: str = "tx", version: int = 5):
    r = c.request(ApiKey.END_TXN, version, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                                            "committed": commit})
    return r.error_code, getattr(r, "producer_id", None), getattr(r, "producer_epoch", None)  # v5+ only


def txn_offset_commit(c: WireClient, pid: int, epoch: int, version: int = 5, group: str = "g", offset: int = 7):
    r = c.request(ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": "tx", "group_id": group, "producer_id": pid, "producer_epoch": epoch,
        "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    return r.topics[0].partitions[0].error_code


def committed(c: WireClient, group: str = "g") -> int:
    """The group's committed offset of t-0, once stable (RequireStable: UNSTABLE_OFFSET_COMMIT while pending)."""
    deadline = time.monotonic() + 30
    while True:
        r = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
            {"name": "t", "partition_indexes": [0]}]}], "require_stable": True})
        p = r.groups[0].topics[0].partitions[0]
        if p.error_code != E.unstable_offset_commit:
            return p.committed_offset
        assert time.monotonic() < deadline
        time.sleep(0.05)


def stable_end(c: WireClient, partition: int = 0) -> int:
    r = c.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": "t", "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                      "timestamp": -1}]}]})
    return r.topics[0].partitions[0].offset


def test_api_versions_advertises_the_finalized_transaction_version(server):
    with WireClient(server.bootstrap) as c:
        supported, finalized, epoch = features(c, 4)
        assert supported["transaction.version"] == (0, 2)
        assert finalized["transaction.version"] == (2, 2) and epoch >= 0
        supported, finalized, _ = features(c, 3)
        assert "transaction.version" not in supported  # v0–v3 leave out features whose minimum is 0
        assert finalized["transaction.version"] == (2, 2)
        versions = {k.api_key: k.max_version for k in c.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "wire-test", "client_software_version": "1.0"}).api_keys}
        assert (versions[ApiKey.PRODUCE], versions[ApiKey.END_TXN], versions[ApiKey.TXN_OFFSET_COMMIT]) == (12, 5, 5)
        assert versions[ApiKey.ADD_PARTITIONS_TO_TXN] == 3  # v4+ is broker-to-broker (KAFKA-15757)


@pytest.mark.parametrize("level", [0, 1])
def test_a_lower_setting_finalizes_a_lower_level(tmp_path, level):
    s = GroupdProcess(str(tmp_path), f"transaction.version={level}").start()
    try:
        with WireClient(s.bootstrap) as c:
            supported, finalized, _ = features(c, 4)
            assert supported["transaction.version"] == (0, 2)
            assert finalized == ({} if level == 0 else {"transaction.version": (1, 1)})
    finally:
        assert s.stop() == 0, s.log()


def test_a_transactions_v2_life(server):
    with WireClient(server.bootstrap) as c:
        r = init(c)
        pid, epoch = r.producer_id, r.producer_epoch
        # Produce v11 (transactions v1) still only verifies: the partition was never added
        # (TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE before, as Kafka hands the verdict on)
        for version, error in ((11, E.transaction_abortable), (10, E.invalid_txn_state)):
            refused = produce(c, "t", 1, batch(1, pid=pid, epoch=epoch, seq=0, transactional=True),
                              version=version, transactional_id="tx")
            assert refused.error_code == error
        # Produce v12 adds the partition itself, TxnOffsetCommit v5 the group (no AddOffsetsToTxn)
        r = produce(c, "t", 0, batch(2, pid=pid, epoch=epoch, seq=0, transactional=True), version=12,
                    transactional_id="tx")
        assert r.error_code == E.none
        assert state(c) == "Ongoing"
        assert txn_offset_commit(c, pid, epoch) == E.none
        assert txn_offset_commit(c, pid, epoch, version=4, offset=8) == E.none  # the group is in the transaction now
        # EndTxn v5 bumps the epoch and answers it; a retry with the epoch it bumped from gets the same
        assert end(c, pid, epoch, True) == (E.none, pid, epoch + 1)
        wait_state(c, "CompleteCommit")
        assert end(c, pid, epoch, True) == (E.none, pid, epoch + 1)
        assert end(c, pid, epoch, False)[0] == E.invalid_txn_state  # the opposite result of the retried end
        assert end(c, pid, epoch + 1, True) == (E.invalid_txn_state, -1, -1)  # nothing to commit at the new epoch
        assert end(c, pid, epoch - 1 if epoch else epoch + 5, True)[0] == E.producer_fenced
        assert stable_end(c) == 3  # two records and the COMMIT marker, written with the bumped epoch
        assert committed(c) == 8
        # the next transaction under the bumped epoch: its sequence starts at 0 again; aborted
        epoch += 1
        r = produce(c, "t", 0, batch(1, pid=pid, epoch=epoch, seq=0, transactional=True), version=12,
                    transactional_id="tx")
        assert r.error_code == E.none
        assert txn_offset_commit(c, pid, epoch, offset=99) == E.none
        assert end(c, pid, epoch, False) == (E.none, pid, epoch + 1)
        wait_state(c, "CompleteAbort")
        assert stable_end(c) == 5
        assert committed(c) == 8
        # TV2 may abort a transaction that added nothing: bumped again, nothing to mark
        epoch += 1
        assert end(c, pid, epoch, False) == (E.none, pid, epoch + 1)
        wait_state(c, "CompleteAbort")
        assert stable_end(c) == 5
    # the client's transaction version is in the log: a retry is still recognised after a restart
    server.stop()
    server.start()
    with WireClient(server.bootstrap) as c:
        assert end(c, pid, epoch, False) == (E.none, pid, epoch + 1)
        assert committed(c) == 8


def test_end_txn_v4_keeps_the_epoch(server):
    with WireClient(server.bootstrap) as c:
        r = init(c)
        pid, epoch = r.producer_id, r.producer_epoch
        assert produce(c, "t", 0, batch(1, pid=pid, epoch=epoch, seq=0, transactional=True), version=12,
                       transactional_id="tx").error_code == E.none
        assert end(c, pid, epoch, True, version=4)[0] == E.none
        wait_state(c, "CompleteCommit")
        assert end(c, pid, epoch, True, version=4)[0] == E.none  # TV1's retry: the same epoch
        assert end(c, pid, epoch, True)[0] == E.invalid_txn_state  # not a v2 retry: that is the epoch before
