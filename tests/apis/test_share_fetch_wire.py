"""ShareFetch (78) and ShareAcknowledge (79) on the wire against the real server (share-groups spec
§1.4–1.7, §3.4–3.9): sessions and their epochs, acquisition at the log end (`latest`), records
acquired by one member only, acknowledgements, release on session close and on disconnect, RENEW, the
error codes; on the memory records plane (the restart test and the real clients use the disk one)."""

from __future__ import annotations

import datetime
import re
import threading

import pytest
from confluent_kafka import Producer

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage.records_plane.batches import iter_batches
from tests.support.process import GroupdProcess, WireClient, groupd_fixture

server = groupd_fixture("topics=one:1,two:1,three:1", "group.share.delivery.count.limit=2", "records.plane=memory")


def topic_id(c: WireClient, name: str):
    return c.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": None}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False}).topics[0].topic_id


def share_fetch(c, group, member, epoch, tid=None, acks=(), max_records=100, wait_ms=0, forget=()):
    topics = [] if tid is None else [{"topic_id": tid, "partitions": [{
        "partition_index": 0, "acknowledgement_batches": [
            {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks]}]}]
    return c.request(ApiKey.SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait": datetime.timedelta(milliseconds=wait_ms),
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
        "topics": topics, "forgotten_topics_data": [{"topic_id": t, "partitions": [0]} for t in forget]})


def share_ack(c, group, member, epoch, tid, acks):
    return c.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "topics": [{
            "topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks]}]}]})


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=0)
        p.flush(10)  # one batch per record: acquisition may cut between them
    assert p.flush(10) == 0


def acquired(r):
    [t] = r.responses
    [p] = t.partitions
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records], p


def offsets_in(records: bytes) -> list[int]:
    return [b.base_offset + i for b in iter_batches(records) for i in range(b.last_offset_delta + 1)]


def test_acquire_acknowledge_and_redeliver_on_close(server):
    with WireClient(server.bootstrap) as c:
        tid = topic_id(c, "one")
        r = share_fetch(c, "sf", "a", 0, tid)  # opens the session; the share-partition starts at the log end
        assert r.error_code is ErrorCode.none and r.acquisition_lock_timeout.total_seconds() == 30
        assert acquired(r)[0] == []
        produce(server.bootstrap, "one", 6)
        got, p = acquired(share_fetch(c, "sf", "a", 1, max_records=4, wait_ms=5000))
        assert got == [(0, 3, 1)] and set(offsets_in(p.records)) >= {0, 1, 2, 3}
        got, _ = acquired(share_fetch(c, "sf", "b", 0, tid, wait_ms=5000))  # another member: the rest
        assert got == [(4, 5, 1)]
        # a ShareAcknowledge: accept 0-1, release 2; 4 is b's
        r = share_ack(c, "sf", "a", 2, tid, [(0, 1, 1), (2, 2, 2)])
        assert r.error_code is ErrorCode.none and r.responses[0].partitions[0].error_code is ErrorCode.none
        r = share_ack(c, "sf", "a", 3, tid, [(4, 4, 1)])
        assert r.responses[0].partitions[0].error_code is ErrorCode.invalid_record_state
        # the piggybacked form, then b closes its session: 4 and 5 come back
        r = share_fetch(c, "sf", "b", 1, tid, acks=[(4, 4, 1)], max_records=0)
        assert acquired(r)[1].acknowledge_error_code == 0
        assert share_fetch(c, "sf", "b", -1).error_code is ErrorCode.none
        got, _ = acquired(share_fetch(c, "sf", "a", 4, wait_ms=5000))
        assert got == [(2, 2, 2), (5, 5, 2)]
        # the delivery limit is 2: a release archives them
        r = share_ack(c, "sf", "a", 5, tid, [(2, 2, 2), (3, 3, 1), (5, 5, 2)])
        assert r.responses[0].partitions[0].error_code is ErrorCode.none
        r = share_fetch(c, "sf", "a", 6, max_records=10, wait_ms=200)
        assert r.error_code is ErrorCode.none and r.responses == ()  # nothing left to deliver


def test_session_epochs(server):
    with WireClient(server.bootstrap) as c:
        tid = topic_id(c, "two")
        assert share_fetch(c, "se", "m", 1, tid).error_code is ErrorCode.share_session_not_found
        assert share_fetch(c, "se", "m", 0, tid).error_code is ErrorCode.none
        assert share_fetch(c, "se", "m", 2).error_code is ErrorCode.invalid_share_session_epoch
        assert share_fetch(c, "se", "m", 1).error_code is ErrorCode.none
        assert share_ack(c, "se", "m", 0, tid, [(0, 0, 1)]).error_code is ErrorCode.invalid_share_session_epoch
        assert share_ack(c, "se", "m", 2, tid, []).error_code is ErrorCode.none
        r = share_fetch(c, "se", "m", 0, tid, acks=[(0, 0, 1)])
        assert r.error_code is ErrorCode.invalid_request  # a new session carries no acknowledgements
        assert share_fetch(c, "se", "m", -1).error_code is ErrorCode.none
        assert share_fetch(c, "se", "m", -1).error_code is ErrorCode.share_session_not_found
        assert share_ack(c, "se", "", 1, tid, []).error_code is ErrorCode.invalid_request
        assert share_fetch(c, "se", "x" * 37, 0, tid).error_code is ErrorCode.invalid_request


def test_a_fetch_waits_for_an_append(server):
    with WireClient(server.bootstrap) as c:
        tid = topic_id(c, "three")
        share_fetch(c, "sw", "m", 0, tid)
        t = threading.Timer(0.3, produce, (server.bootstrap, "three", 1))
        t.start()
        try:
            got, _ = acquired(share_fetch(c, "sw", "m", 1, wait_ms=30000))
        finally:
            t.join()
        assert got == [(0, 0, 1)]


@pytest.mark.parametrize("batch, error", [((3, 2, 1), ErrorCode.invalid_request),
                                          ((0, 0, 5), ErrorCode.invalid_request)])
def test_bad_acknowledgement_batches(server, batch, error):
    with WireClient(server.bootstrap) as c:
        tid = topic_id(c, "two")
        share_fetch(c, "sb", "m", 0, tid)
        r = share_ack(c, "sb", "m", 1, tid, [batch])
        assert r.responses[0].partitions[0].error_code is error


def test_a_restart_keeps_acknowledged_records_acknowledged(tmp_path):
    """Accepted and rejected records stay done; what was acquired comes back (Kafka never persists
    ACQUIRED); a released record keeps its delivery count. Killed with SIGKILL: the answer to the
    acknowledgement came after its durable write."""
    s = GroupdProcess(str(tmp_path), "topics=p:1").start()
    try:
        with WireClient(s.bootstrap) as c:
            tid = topic_id(c, "p")
            share_fetch(c, "sp", "a", 0, tid)
            produce(s.bootstrap, "p", 6)
            assert acquired(share_fetch(c, "sp", "a", 1, wait_ms=5000))[0] == [(0, 5, 1)]
            r = share_ack(c, "sp", "a", 2, tid, [(0, 1, 1), (2, 2, 2), (3, 3, 3)])
            assert r.responses[0].partitions[0].error_code is ErrorCode.none
        s.kill()
        s.start()
        with WireClient(s.bootstrap) as c:
            got, _ = acquired(share_fetch(c, "sp", "b", 0, tid, wait_ms=5000))
        assert got == [(2, 2, 2), (4, 5, 1)]
        assert re.search(r"share state loaded topic_id=\S+ partition=0 stamp=0 share_partitions=1\n", s.log())
    finally:
        s.stop()


def test_renew_in_v2_keeps_the_lock_and_needs_is_renew_ack(server):
    with WireClient(server.bootstrap) as c:
        tid = topic_id(c, "two")
        share_fetch(c, "sn", "m", 0, tid)
        produce(server.bootstrap, "two", 1)
        got, _ = acquired(share_fetch(c, "sn", "m", 1, wait_ms=5000))
        first = got[0][0]
        renew = {"group_id": "sn", "member_id": "m", "topics": [{"topic_id": tid, "partitions": [{
            "partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": first, "acknowledge_types": [4]}]}]}]}
        r = c.request(ApiKey.SHARE_ACKNOWLEDGE, 2, {**renew, "share_session_epoch": 2, "is_renew_ack": False})
        assert r.responses[0].partitions[0].error_code is ErrorCode.invalid_request  # RENEW needs IsRenewAck
        r = c.request(ApiKey.SHARE_ACKNOWLEDGE, 2, {**renew, "share_session_epoch": 3, "is_renew_ack": True})
        assert r.responses[0].partitions[0].error_code is ErrorCode.none
        assert r.acquisition_lock_timeout.total_seconds() == 30
        fetch = {**renew, "max_wait": datetime.timedelta(0), "min_bytes": 0, "max_bytes": 0, "max_records": 0,
                 "batch_size": 0, "share_acquire_mode": 0, "is_renew_ack": True, "forgotten_topics_data": []}
        r = c.request(ApiKey.SHARE_FETCH, 2, {**fetch, "share_session_epoch": 4})
        assert r.error_code is ErrorCode.none
        [p] = r.responses[0].partitions
        assert (p.acknowledge_error_code, p.acquired_records) == (0, ())
        r = c.request(ApiKey.SHARE_FETCH, 2, {**fetch, "share_session_epoch": 5, "max_records": 1})
        assert r.error_code is ErrorCode.invalid_request  # IsRenewAck with a fetch limit
        # refused before the session was looked at: its epoch is still 5; the record is still m's
        r = share_ack(c, "sn", "m", 5, tid, [(first, first, 1)])
        assert r.responses[0].partitions[0].error_code is ErrorCode.none


def test_a_closed_connection_ends_its_session_and_releases_at_once(server):
    with WireClient(server.bootstrap) as c:
        tid = topic_id(c, "three")
        share_fetch(c, "sd", "gone", 0, tid)
        share_fetch(c, "sd", "other", 0, tid)
    with WireClient(server.bootstrap) as c:
        assert share_fetch(c, "sd", "other", 1).error_code is ErrorCode.share_session_not_found  # ended with it
        share_fetch(c, "sd", "other", 0, tid)
        with WireClient(server.bootstrap) as holder:
            share_fetch(holder, "sd", "holder", 0, tid)
            produce(server.bootstrap, "three", 2)
            held, _ = acquired(share_fetch(holder, "sd", "holder", 1, wait_ms=5000))
        got, _ = acquired(share_fetch(c, "sd", "other", 1, wait_ms=5000))  # long before the 30 s lock ends
    assert [(a, b) for a, b, _ in got] == [(a, b) for a, b, _ in held] and {n for _, _, n in got} == {2}


def test_an_expired_lock_hands_the_records_to_a_waiting_fetch(server):
    """The group's share.record.lock.duration.ms (15 s, the broker's minimum) runs out while the
    holder stays connected and silent: the other member's waiting fetch gets them, count 2."""
    with WireClient(server.bootstrap, timeout=90) as c:
        r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [{
            "resource_type": 32, "resource_name": "sx", "configs": [
                {"name": "share.record.lock.duration.ms", "config_operation": 0, "value": "15000"}]}]})
        assert r.responses[0].error_code is ErrorCode.none
        tid = topic_id(c, "one")
        share_fetch(c, "sx", "holder", 0, tid)
        share_fetch(c, "sx", "waiter", 0, tid)
        produce(server.bootstrap, "one", 1)
        held, _ = acquired(share_fetch(c, "sx", "holder", 1, wait_ms=5000))
        r = share_fetch(c, "sx", "waiter", 1, wait_ms=60000)
        assert r.acquisition_lock_timeout.total_seconds() == 15
        got, _ = acquired(r)
    assert [(a, b, n + 1) for a, b, n in held] == got


def test_deleting_the_group_deletes_its_share_state(tmp_path):
    """A group of the same id starts again from `share.auto.offset.reset`, also after a restart."""
    s = GroupdProcess(str(tmp_path), "topics=d:1").start()
    try:
        with WireClient(s.bootstrap) as c:
            tid = topic_id(c, "d")
            share_fetch(c, "sdel", "a", 0, tid)
            produce(s.bootstrap, "d", 3)
            assert acquired(share_fetch(c, "sdel", "a", 1, wait_ms=5000))[0] == [(0, 2, 1)]
            share_ack(c, "sdel", "a", 2, tid, [(0, 2, 1)])
            assert share_fetch(c, "sdel", "a", -1).error_code is ErrorCode.none
            joined = c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
                "group_id": "sdel", "member_id": "a", "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": ["d"]})
            c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
                "group_id": "sdel", "member_id": "a", "member_epoch": -1, "rack_id": None,
                "subscribed_topic_names": None})
            assert joined.error_code is ErrorCode.none
            r = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sdel"]})
            assert r.results[0].error_code is ErrorCode.none
        s.stop()
        s.start()
        with WireClient(s.bootstrap) as c:
            share_fetch(c, "sdel", "b", 0, tid)  # initialized afresh (latest), not loaded
            produce(s.bootstrap, "d", 1)
            assert acquired(share_fetch(c, "sdel", "b", 1, wait_ms=5000))[0] == [(3, 3, 1)]
        assert "share partition initialized group=sdel" in s.log().split("groupd ready")[-1]
    finally:
        s.stop()
