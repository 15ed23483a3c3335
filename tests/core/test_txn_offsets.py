"""Transactional offsets in the sans-IO core (spec transactions.md §2): TxnOffsetCommit's membership
checks (KIP-447), pending offsets until the marker, the higher-offset rule on COMMIT, ABORT,
RequireStable reads, tombstones, expiry and group deletion with open transactions, reverts, and
replaying the log into a fresh shard."""

import uuid

from groupd.coordinator.core.classic.group import COMPLETING_REBALANCE
from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, TopicsImage
from groupd.coordinator.core.partition import GroupSettings
from groupd.storage.catalog import Topic
from groupd.storage.records import OffsetCommitKey
from groupd.storage.txn_records import TxnMarkerKey, TxnOffsetKey

from .driver import E, Driver, completing_group, stable_group
from .test_expiry import RETENTION, expire

OK = {("t", 0): E.none}


def offset(d, group="g", topic="t", partition=0, require_stable=False):
    [(_, _, value)] = d.fetch(group, [(topic, [partition])], require_stable)
    return value if not hasattr(value, "offset") else value.offset


def test_pending_offsets_are_invisible_until_the_commit_marker(d):
    assert d.txn_commit("g", [("t", 0, 5)]) == OK
    assert isinstance(d.written[-1].key, TxnOffsetKey)
    assert offset(d) is None
    assert offset(d, require_stable=True) is E.unstable_offset_commit
    assert d.shard.pending.has_open("g")
    assert d.end_txn(True) == E.none
    assert isinstance(d.written[-1].key, TxnMarkerKey)
    assert offset(d) == 5 and offset(d, require_stable=True) == 5
    assert not d.shard.pending.has_open("g")
    assert d.replay().offsets == d.shard.offsets


def test_abort_drops_the_pending_offsets_and_keeps_the_committed_one(d):
    d.commit("g", [("t", 0, 3)])
    d.txn_commit("g", [("t", 0, 5), ("t", 1, 6)])
    assert d.end_txn(False) == E.none
    assert offset(d) == 3 and offset(d, partition=1) is None
    fresh = d.replay()
    assert fresh.offsets == d.shard.offsets and not fresh.pending.by_producer


def test_a_later_plain_commit_wins_over_the_transaction_at_commit(d):
    d.txn_commit("g", [("t", 0, 5), ("t", 1, 6)])
    d.commit("g", [("t", 0, 9)])  # after the transactional one in the log
    assert offset(d, require_stable=True) is E.unstable_offset_commit  # still pending for partition 0
    d.end_txn(True)
    assert offset(d) == 9 and offset(d, partition=1) == 6
    assert d.replay().offsets == d.shard.offsets


def test_an_earlier_plain_commit_loses_to_the_transaction_at_commit(d):
    d.commit("g", [("t", 0, 9)])
    d.txn_commit("g", [("t", 0, 5)])
    d.end_txn(True)
    assert offset(d) == 5
    assert d.replay().offsets == d.shard.offsets


def test_two_producers_the_later_pending_offset_wins(d):
    d.txn_commit("g", [("t", 0, 5)], producer_id=1)
    d.txn_commit("g", [("t", 0, 7)], producer_id=2)
    d.end_txn(True, producer_id=2)
    assert offset(d) == 7
    assert offset(d, require_stable=True) is E.unstable_offset_commit  # producer 1 still open
    d.end_txn(True, producer_id=1)  # older in the log than what producer 2 committed
    assert offset(d) == 7
    assert d.replay().offsets == d.shard.offsets


def test_a_tombstone_deletes_pending_offsets_and_offset_delete_writes_one_for_them(d):
    d.txn_commit("g", [("t", 0, 5)])
    reply = d.delete_offsets("g", [("t", [0])])
    assert reply == {"error_code": E.none, "partitions": {("t", 0): E.none}}
    assert d.written[-1].key == OffsetCommitKey("g", "t", 0) and d.written[-1].value is None
    d.end_txn(True)
    assert offset(d) is None


def test_delete_group_tombstones_pending_offsets(d):
    d.commit("g", [("t", 0, 1)])
    d.txn_commit("g", [("t", 0, 5), ("t", 1, 6)])
    assert d.delete_group("g") == E.none
    d.end_txn(True)
    assert offset(d) is None and offset(d, partition=1) is None


def test_expiry_skips_partitions_with_pending_offsets_and_keeps_the_group(d):
    d.commit("g", [("t", 0, 1), ("t", 1, 2)])
    d.txn_commit("g", [("t", 0, 5)])
    d.clock.now += RETENTION + 1
    written = expire(d)
    assert [(r.key.topic, r.key.partition) for r in written] == [("t", 1)]  # partition 0 has pending offsets
    assert "g" in d.shard.groups
    d.end_txn(False)
    written = expire(d)  # the aborted transaction left partition 0's old offset, now expired
    assert [(type(r.key).__name__, getattr(r.key, "partition", None)) for r in written] == [
        ("OffsetCommitKey", 0), ("GroupMetadataKey", None)]
    assert "g" not in d.shard.groups


def test_a_group_with_only_pending_offsets_is_not_expired(d):
    d.txn_commit("g", [("t", 0, 5)])
    d.clock.now += RETENTION + 1
    assert expire(d) == []
    assert "g" in d.shard.groups


def test_a_failed_write_of_the_marker_reverts_it(d):
    d.commit("g", [("t", 0, 3)])
    d.txn_commit("g", [("t", 0, 5)])
    d.fail_next_write(E.not_coordinator)
    assert d.end_txn(True) == E.not_coordinator
    assert offset(d) == 3 and offset(d, require_stable=True) is E.unstable_offset_commit
    assert d.end_txn(True) == E.none
    assert offset(d) == 5


def test_a_failed_txn_commit_leaves_nothing_pending(d):
    d.fail_next_write(E.not_coordinator)
    assert d.txn_commit("g", [("t", 0, 5)]) == {("t", 0): E.not_coordinator}
    assert not d.shard.pending.by_producer and not d.shard.pending.has_open("g")
    assert "g" not in d.shard.groups


def test_a_marker_in_flight_reads_at_the_last_committed_offset(d):
    d.commit("g", [("t", 0, 3)])
    d.txn_commit("g", [("t", 0, 5)])
    d.hold_writes()
    d.end_txn(True)
    assert offset(d) == 3  # the marker is not durable yet
    d.finish_writes()
    assert offset(d) == 5


def test_markers_of_an_older_producer_epoch_or_coordinator_are_fenced(d):
    d.txn_commit("g", [("t", 0, 5)], producer_epoch=3)
    assert d.end_txn(True, producer_epoch=2) == E.invalid_producer_epoch
    assert d.end_txn(True, producer_epoch=3, coordinator_epoch=4) == E.none
    assert d.end_txn(False, producer_epoch=3, coordinator_epoch=3) == E.transaction_coordinator_fenced
    assert offset(d) == 5


def test_metadata_too_large(d):
    d.shard.store.metadata_max_bytes = 4
    reply = d.txn_commit("g", [("t", 0, 5, -1, "12345"), ("t", 1, 6, -1, "1234")])
    assert reply == {("t", 0): E.offset_metadata_too_large, ("t", 1): E.none}


# -- KIP-447 membership (spec rule 2) ---------------------------------------------------------------

def test_no_group_with_a_generation_is_illegal_generation(d):
    assert d.txn_commit("g", [("t", 0, 5)], generation=1, member_id="m") == {("t", 0): E.illegal_generation}
    assert "g" not in d.shard.groups


def test_classic_group_member_checks(d):
    ids = stable_group(d, names=("a", "b"))
    a = ids["a"]
    assert d.txn_commit("g", [("t", 0, 5)], generation=1, member_id=a) == OK
    assert d.txn_commit("g", [("t", 0, 5)], generation=2, member_id=a) == {("t", 0): E.illegal_generation}
    assert d.txn_commit("g", [("t", 0, 5)], generation=1, member_id="nobody") == {("t", 0): E.unknown_member_id}
    # v0–2 carry no membership: accepted although the group is not empty (unlike OffsetCommit)
    assert d.txn_commit("g", [("t", 0, 5)], version=2) == OK
    assert d.commit("g", [("t", 0, 5)]) == {("t", 0): E.unknown_member_id}


def test_classic_group_completing_rebalance_is_no_error(d):
    ids = completing_group(d, names=("a",))
    assert d.group("g").state is COMPLETING_REBALANCE
    assert d.txn_commit("g", [("t", 0, 5)], generation=1, member_id=ids["a"]) == OK
    assert d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["a"]) == {("t", 0): E.rebalance_in_progress}


def test_classic_static_member_fenced(d):
    ids = stable_group(d, names=("a",), static=True)
    reply = d.txn_commit("g", [("t", 0, 5)], generation=1, member_id="other", instance_id="a-instance")
    assert reply == {("t", 0): E.fenced_instance_id}
    reply = d.txn_commit("g", [("t", 0, 5)], generation=1, member_id=ids["a"], instance_id="a-instance")
    assert reply == OK


def test_a_tombstone_closes_the_partition_for_the_open_transaction_checks(d):
    """As Kafka 4's openTransactions: a group whose pending partitions were all deleted has no open
    transaction any more (expiry may remove it), though the producer's marker is still to come."""
    d.txn_commit("g", [("t", 0, 5)])
    d.delete_offsets("g", [("t", [0])])
    assert not d.shard.pending.has_open("g")
    d.clock.now += RETENTION + 1
    assert [type(r.key).__name__ for r in expire(d)] == ["GroupMetadataKey"]
    assert d.end_txn(True) == E.none and "g" not in d.shard.groups


def test_a_failed_marker_leaves_the_other_producers_pending_offsets_as_they_were(d):
    d.txn_commit("g", [("t", 0, 5)], producer_id=1)
    d.txn_commit("g", [("t", 0, 7), ("t", 1, 8)], producer_id=2)
    d.fail_next_write(E.not_coordinator)
    assert d.end_txn(True, producer_id=2) == E.not_coordinator
    assert offset(d) is None and offset(d, partition=1) is None
    assert d.end_txn(True, producer_id=1) == E.none
    assert offset(d) == 5
    assert d.end_txn(True, producer_id=2) == E.none
    assert offset(d) == 7 and offset(d, partition=1) == 8
    assert d.replay().offsets == d.shard.offsets


def test_a_failed_plain_commit_over_pending_offsets_reverts_cleanly(d):
    d.txn_commit("g", [("t", 0, 5)])
    d.fail_next_write(E.not_coordinator)
    assert d.commit("g", [("t", 0, 9)]) == {("t", 0): E.not_coordinator}
    d.end_txn(True)
    assert offset(d) == 5  # the failed commit did not count as later in the log


def test_consumer_group_member_checks():
    """A KIP-848 group: the generation is the member epoch, any TxnOffsetCommit version, and a
    stale epoch is ILLEGAL_GENERATION (OffsetCommit says STALE_MEMBER_EPOCH)."""
    d = Driver(GroupSettings())  # the shared fixture's replay check reads classic groups only
    topics = TopicsImage.of(1, [Topic("t", 2, uuid.UUID(int=1))])
    joined = d.consumer_heartbeat(ConsumerHeartbeatRequest("g", "m", 0, None, None, 300_000, ("t",), None, None, [],
                                                           version=1), topics)
    epoch = joined["member_epoch"]
    assert d.txn_commit("g", [("t", 0, 5)], generation=epoch, member_id="m", version=3) == OK
    assert d.txn_commit("g", [("t", 0, 5)], generation=epoch + 1, member_id="m") == {("t", 0): E.illegal_generation}
    assert d.commit("g", [("t", 0, 5)], generation=epoch + 1, member_id="m") == {("t", 0): E.stale_member_epoch}
    assert d.txn_commit("g", [("t", 0, 5)], generation=epoch, member_id="x") == {("t", 0): E.unknown_member_id}
    assert d.txn_commit("g", [("t", 0, 5)], version=2) == {("t", 0): E.unknown_member_id}
    d.end_txn(True)
    assert offset(d) == 5
    assert d.replay().offsets == d.shard.offsets
