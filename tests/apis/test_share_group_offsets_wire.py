"""DescribeShareGroupOffsets (90) on the wire against the real server (share-groups spec §1.8): each
share-partition's start offset and (v1) lag = log end − start − records acknowledged or archived past
the start; topics null lists the group's initialized share-partitions; a named topic that does not
exist, or a share-partition without state yet, is StartOffset −1 (Lag −1); the group's coordinator
answers, as Kafka's. `groupd groups describe` shows them."""

from __future__ import annotations

import json
import uuid

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.apis.test_share_fetch_wire import acquired, produce, share_ack, share_fetch, topic_id
from tests.support.harness import wait_until
from tests.support.process import WireClient, groupd_cli_output, groupd_fixture

server = groupd_fixture("topics=one:1,two:2", "records.plane=memory")


def describe(c: WireClient, group: str, topics=None, version: int = 1):
    r = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, {"groups": [{
        "group_id": group, "topics": None if topics is None else [
            {"topic_name": t, "partitions": ps} for t, ps in topics.items()]}]})
    [g] = r.groups
    return g


def rows(group) -> list[tuple]:
    return [(t.topic_name, p.partition_index, p.start_offset, getattr(p, "lag", None), p.error_code)
            for t in group.topics for p in t.partitions]


def join(c: WireClient, group: str, member: str, topics: list[str]) -> None:
    """Join, then heartbeat until the member holds partitions: a share-partition is assigned once
    its share state is initialized, at an epoch after the join's (as Kafka's)."""
    epoch = 0

    def heartbeat(names) -> bool:
        nonlocal epoch
        r = c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
            "subscribed_topic_names": names})
        assert r.error_code is ErrorCode.none
        epoch = r.member_epoch
        return r.assignment is not None and bool(r.assignment.topic_partitions)

    if not heartbeat(topics):
        wait_until(lambda: heartbeat(None), 30, f"member {member} of {group} assigned")


def test_start_offset_and_lag_follow_acknowledgements(server):
    with WireClient(server.bootstrap) as c:
        join(c, "so", "m", ["one"])
        g = describe(c, "so")  # initialized, no state yet: groupd makes it at the first ShareFetch
        assert g.error_code is ErrorCode.none and rows(g) == [("one", 0, -1, -1, ErrorCode.none)]
        tid = topic_id(c, "one")
        share_fetch(c, "so", "m", 0, tid)
        produce(server.bootstrap, "one", 6)
        assert acquired(share_fetch(c, "so", "m", 1, wait_ms=5000))[0] == [(0, 5, 1)]
        assert rows(describe(c, "so")) == [("one", 0, 0, 6, ErrorCode.none)]
        r = share_ack(c, "so", "m", 2, tid, [(0, 1, 1), (3, 3, 3)])  # accept 0-1, reject 3
        assert r.responses[0].partitions[0].error_code is ErrorCode.none
        g = describe(c, "so")
        assert rows(g) == [("one", 0, 2, 3, ErrorCode.none)]  # 6 − 2 − 1 (3 is archived)
        assert g.topics[0].topic_id == tid and g.topics[0].partitions[0].leader_epoch == 0
        assert rows(describe(c, "so", version=0)) == [("one", 0, 2, None, ErrorCode.none)]  # v0: no lag
    described = json.loads(groupd_cli_output("groups", "describe", "so", "--json", "--bootstrap", server.bootstrap))
    assert described["offsets"] == [{"topic": "one", "partition": 0, "offset": 2, "log_end_offset": 6, "lag": 3}]


def test_named_topics_unknown_ones_and_a_group_without_state(server):
    with WireClient(server.bootstrap) as c:
        g = describe(c, "nobody", {"two": [0, 1], "nope": [0]})
        assert g.error_code is ErrorCode.none
        assert rows(g) == [("two", 0, -1, -1, ErrorCode.none), ("two", 1, -1, -1, ErrorCode.none),
                           ("nope", 0, -1, -1, ErrorCode.none)]
        assert g.topics[1].topic_id is None  # the zero uuid on the wire, as Kafka (kio reads it as None)
        assert describe(c, "nobody").topics == ()  # topics null: what the group initialized, nothing




def alter(c: WireClient, group: str, offsets: dict[str, dict[int, int]]):
    return c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in ps.items()]}
        for t, ps in offsets.items()]})


def delete(c: WireClient, group: str, topics: list[str]):
    return c.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": t} for t in topics]})


def leave(c: WireClient, group: str, member: str) -> None:
    r = c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": -1, "rack_id": None, "subscribed_topic_names": None})
    assert r.error_code is ErrorCode.none


def test_alter_and_delete_offsets_of_an_empty_group(server):
    """Alter (91): the share-partition starts afresh at the offset; Delete (92): its state goes and
    the next ShareFetch starts it at the log end (`latest`); both need the group empty."""
    with WireClient(server.bootstrap) as c:
        join(c, "sa", "m", ["two"])
        tid = topic_id(c, "two")
        share_fetch(c, "sa", "m", 0, tid)  # partition 0 of two: state at the log end
        produce(server.bootstrap, "two", 5)
        assert acquired(share_fetch(c, "sa", "m", 1, wait_ms=5000))[0] == [(0, 4, 1)]
        r = alter(c, "sa", {"two": {0: 1}})
        assert (r.error_code, r.responses) == (ErrorCode.non_empty_group, ())
        assert share_fetch(c, "sa", "m", -1).error_code is ErrorCode.none  # the session goes: records released
        leave(c, "sa", "m")
        r = alter(c, "sa", {"two": {0: 3, 9: 0}, "nope": {0: 0}})
        assert r.error_code is ErrorCode.none
        assert [(t.topic_name, t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in r.responses] == [
            ("two", tid, [(0, ErrorCode.none), (9, ErrorCode.unknown_topic_or_partition)]),
            ("nope", None, [(0, ErrorCode.unknown_topic_or_partition)])]
        assert rows(describe(c, "sa", {"two": [0]})) == [("two", 0, 3, 2, ErrorCode.none)]
        got, _ = acquired(share_fetch(c, "sa", "n", 0, tid, wait_ms=5000))
        assert got == [(3, 4, 1)]  # from the new start, a first delivery again
        assert share_fetch(c, "sa", "n", -1).error_code is ErrorCode.none
        r = delete(c, "sa", ["two", "nope"])
        assert [(t.topic_name, t.error_code) for t in r.responses] == [
            ("two", ErrorCode.none), ("nope", ErrorCode.unknown_topic_or_partition)]
        assert rows(describe(c, "sa", {"two": [0]})) == [("two", 0, -1, -1, ErrorCode.none)]
        assert describe(c, "sa").topics == ()  # no longer among the group's initialized share-partitions
        share_fetch(c, "sa", "n", 0, tid)  # started again at the log end
        assert rows(describe(c, "sa", {"two": [0]})) == [("two", 0, 5, 0, ErrorCode.none)]
        assert delete(c, "nobody", ["two"]).error_code is ErrorCode.group_id_not_found
        assert alter(c, "", {"two": {0: 0}}).error_code is ErrorCode.invalid_group_id


def test_alter_creates_a_missing_group(server):
    """As Kafka's: the group exists afterwards, empty, with the partition initialized at the offset."""
    with WireClient(server.bootstrap) as c:
        r = alter(c, "made", {"two": {1: 2}})
        assert r.error_code is ErrorCode.none and r.responses[0].partitions[0].error_code is ErrorCode.none
        assert rows(describe(c, "made")) == [("two", 1, 2, -2, ErrorCode.none)]  # past the (empty) log: Kafka's formula
        listed = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}).groups
        assert [(g.group_id, g.group_state) for g in listed if g.group_id == "made"] == [("made", "Empty")]


def state_request(c: WireClient, api: ApiKey, version: int, group: str, topics: dict) -> dict:
    """A share-state request (what a group's coordinator sends a data partition's leader); topics:
    topic id → partition → its fields. Answer: (topic id, partition) → the partition's result."""
    r = c.request(api, version, {"group_id": group, "topics": [
        {"topic_id": t, "partitions": [{"partition": p, **fields} for p, fields in ps.items()]}
        for t, ps in topics.items()]})
    return {(t.topic_id, p.partition): p for t in r.results for p in t.partitions}


def test_the_share_state_requests_a_leader_answers(server):
    """InitializeShareGroupState, ReadShareGroupStateSummary (v0, v1) and DeleteShareGroupState at the
    data partitions' leader (a lone node leads them all); broker-to-broker, so not advertised."""
    nope = uuid.uuid4()
    with WireClient(server.bootstrap) as c:
        tid = topic_id(c, "two")
        got = state_request(c, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, "ss", {
            tid: {1: {"state_epoch": 0, "start_offset": 4}, 2: {"state_epoch": 0, "start_offset": 0}},
            nope: {0: {"state_epoch": 0, "start_offset": 0}}})
        assert {k: r.error_code for k, r in got.items()} == {
            (tid, 1): ErrorCode.none, (tid, 2): ErrorCode.unknown_topic_or_partition,
            (nope, 0): ErrorCode.unknown_topic_or_partition}
        summary = {tid: {0: {"leader_epoch": -1}, 1: {"leader_epoch": -1}}}
        got = state_request(c, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, "ss", summary)
        assert [(r.error_code, r.state_epoch, r.start_offset, r.delivery_complete_count)
                for r in got.values()] == [(ErrorCode.none, 0, -1, -1), (ErrorCode.none, 1, 4, 0)]
        got = state_request(c, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, "ss", summary)
        assert [r.start_offset for r in got.values()] == [-1, 4]
        got = state_request(c, ApiKey.DELETE_SHARE_GROUP_STATE, 0, "ss", {tid: {1: {}}})
        assert got[(tid, 1)].error_code is ErrorCode.none
        got = state_request(c, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, "ss", summary)
        assert [r.start_offset for r in got.values()] == [-1, -1]
        advertised = {k.api_key for k in c.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert not advertised & {ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE,
                             ApiKey.READ_SHARE_GROUP_STATE_SUMMARY}
