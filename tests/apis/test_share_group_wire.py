"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77) on the wire against the real server
(share-groups spec §1.2, §1.3, §1.10, §2): members join with their own ids, share a partition,
leave; the classic admin APIs see the share group as Kafka's do; a restart keeps the group."""

from __future__ import annotations

import json

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, groupd_cli_output, groupd_fixture

server = groupd_fixture("topics=one:1,three:3,four:4")


def heartbeat(c: WireClient, group: str, member_id: str, epoch: int, names=None):
    return c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": None if names is None else list(names)})


def describe(c: WireClient, *groups: str):
    return c.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": list(groups),
                                                      "include_authorized_operations": False}).groups


def topic_id(c: WireClient, name: str):
    return c.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": None}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False}).topics[0].topic_id


def partitions(r) -> dict:
    return {tp.topic_id: sorted(tp.partitions) for tp in r.assignment.topic_partitions}


def settle(c: WireClient, group: str, epochs: dict[str, int]) -> dict[str, int]:
    """Heartbeat every member until each holds its target at the group's epoch with something
    assigned: partitions are assigned once their share state is initialized (a later epoch)."""
    def settled():
        for m, epoch in epochs.items():
            epochs[m] = heartbeat(c, group, m, epoch).member_epoch
        [g] = describe(c, group)
        return (g.group_epoch == g.assignment_epoch and all(m.member_epoch == g.group_epoch for m in g.members)
                and all(m.assignment.topic_partitions for m in g.members))
    wait_until(settled, 30, f"share group {group} assigned at its epoch")
    return epochs


def test_two_members_share_the_one_partition_and_describe_shows_them(server):
    with WireClient(server.bootstrap) as c:
        a = heartbeat(c, "sg-two", "9c1d6f3e-1111-4c4c-9d9d-000000000001", 0, ["one"])
        b = heartbeat(c, "sg-two", "b/+", 0, ["one"])  # any client-chosen id up to 36 chars
        assert (a.error_code, a.member_id, a.member_epoch) == (ErrorCode.none, a.member_id, 1)
        assert (b.error_code, b.member_id, b.member_epoch) == (ErrorCode.none, "b/+", 2)
        assert partitions(a) == {}  # not initialized yet
        assert a.heartbeat_interval.total_seconds() == 5
        epochs = settle(c, "sg-two", {a.member_id: 1, "b/+": 2})
        again = heartbeat(c, "sg-two", a.member_id, epochs[a.member_id])
        assert (again.error_code, again.assignment) == (ErrorCode.none, None)  # unchanged
        [g] = describe(c, "sg-two")
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        ErrorCode.none, "Stable", again.member_epoch, again.member_epoch, "simple")
    assert sorted(m.member_id for m in g.members) == sorted([a.member_id, "b/+"])
    for m in g.members:
        assert [(t.topic_name, list(t.partitions)) for t in m.assignment.topic_partitions] == [("one", [0])]
        assert list(m.subscribed_topic_names) == ["one"] and m.client_id == "wire-test"


def test_two_members_of_a_new_group_get_their_halves_only_once_initialized(server):
    """Kafka assigns only share-partitions whose state is initialized: the first member of a new
    group joins with nothing, so it cannot acquire every record before the second joins; once the
    state is initialized a new epoch gives each its half (librdkafka 0172 mixed-ack)."""
    with WireClient(server.bootstrap) as c:
        four = topic_id(c, "four")
        a = heartbeat(c, "sg-halves", "a", 0, ["four"])
        b = heartbeat(c, "sg-halves", "b", 0, ["four"])
        assert (a.error_code, a.member_epoch, partitions(a)) == (ErrorCode.none, 1, {})
        assert b.error_code == ErrorCode.none and len(partitions(b).get(four, [])) in (0, 2)  # never all four
        epochs = settle(c, "sg-halves", {"a": a.member_epoch, "b": b.member_epoch})
        [g] = describe(c, "sg-halves")
    halves = {m.member_id: [list(t.partitions) for t in m.assignment.topic_partitions] for m in g.members}
    assert sorted(len(h[0]) for h in halves.values()) == [2, 2]
    assert sorted(halves["a"][0] + halves["b"][0]) == [0, 1, 2, 3]
    assert epochs == {"a": g.group_epoch, "b": g.group_epoch}


def test_errors_as_kafka(server):
    with WireClient(server.bootstrap) as c:
        assert heartbeat(c, "sg-err", "m", 0, []).error_code == ErrorCode.invalid_request
        assert heartbeat(c, "sg-err", "x" * 37, 0, ["three"]).error_code == ErrorCode.invalid_request
        assert heartbeat(c, "sg-err", "m", 3).error_code == ErrorCode.group_id_not_found
        assert heartbeat(c, "sg-err", "m", 0, ["three"]).error_code == ErrorCode.none
        assert heartbeat(c, "sg-err", "other", 5).error_code == ErrorCode.unknown_member_id
        assert heartbeat(c, "sg-err", "m", 7).error_code == ErrorCode.fenced_member_epoch
        left = heartbeat(c, "sg-err", "m", -1)
        assert (left.error_code, left.member_id, left.member_epoch) == (ErrorCode.none, "m", -1)
        [gone, missing, empty] = describe(c, "sg-err", "sg-none", "")
    assert (gone.group_state, gone.group_epoch, list(gone.members)) == ("Empty", 2, [])
    assert (missing.error_code, missing.error_message) == (ErrorCode.group_id_not_found, "Group sg-none not found.")
    assert empty.error_code == ErrorCode.invalid_group_id


def test_classic_admin_apis_see_a_share_group_as_kafka(server):
    with WireClient(server.bootstrap) as c:
        assert heartbeat(c, "sg-admin", "m", 0, ["three"]).error_code == ErrorCode.none
        listed = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed
                if g.group_id == "sg-admin"] == [("sg-admin", "share", "Stable", "share")]
        [d] = c.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["sg-admin"],
                                                    "include_authorized_operations": False}).groups
        assert (d.error_code, d.group_state) == (ErrorCode.group_id_not_found, "Dead")
        deleted = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg-admin"]}).results
        assert [r.error_code for r in deleted] == [ErrorCode.non_empty_group]
        consumer = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["sg-admin"],
                                                                 "include_authorized_operations": False}).groups
        assert consumer[0].error_code == ErrorCode.group_id_not_found
        heartbeat(c, "sg-admin", "m", -1)
        deleted = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg-admin"]}).results
        assert [r.error_code for r in deleted] == [ErrorCode.none]
        [d] = describe(c, "sg-admin")
        assert d.error_code == ErrorCode.group_id_not_found


def test_api_versions_lists_the_share_apis(server):
    with WireClient(server.bootstrap) as c:
        keys = {k.api_key: (k.min_version, k.max_version)
                for k in c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                            "client_software_version": "1"}).api_keys}
    assert keys[76] == keys[77] == (1, 1) and keys[78] == keys[79] == (1, 2)  # librdkafka 2.16 uses v1


@pytest.fixture
def own_server(tmp_path):
    s = GroupdProcess(str(tmp_path), "topics=three:3").start()
    yield s
    assert s.stop() == 0, s.log()


def test_a_restart_keeps_the_group_its_epochs_and_assignment(own_server):
    with WireClient(own_server.bootstrap) as c:
        a = heartbeat(c, "sg-restart", "a", 0, ["three"])
        b = heartbeat(c, "sg-restart", "b", 0, ["three"])
        epochs = settle(c, "sg-restart", {"a": a.member_epoch, "b": b.member_epoch})
        before = describe(c, "sg-restart")[0]
    own_server.stop()
    own_server.start()
    with WireClient(own_server.bootstrap) as c:
        after = describe(c, "sg-restart")[0]
        epoch = epochs["a"]
        assert (after.group_state, after.group_epoch, after.assignment_epoch) == ("Stable", epoch, epoch)
        assert {m.member_id: (m.member_epoch, [list(t.partitions) for t in m.assignment.topic_partitions])
                for m in after.members} == {m.member_id: (m.member_epoch, [list(t.partitions)
                                                                           for t in m.assignment.topic_partitions])
                                            for m in before.members}
        # the members go on with the epochs they had
        assert heartbeat(c, "sg-restart", "b", epoch).error_code == ErrorCode.none
        assert heartbeat(c, "sg-restart", "a", epoch).member_epoch == epoch


def test_groups_cli_lists_and_describes_a_share_group(server):
    with WireClient(server.bootstrap) as c:
        heartbeat(c, "sg-cli", "m-1", 0, ["three"])
        heartbeat(c, "sg-cli", "m-2", 0, ["three"])
        epoch = settle(c, "sg-cli", {"m-1": 1, "m-2": 2})["m-1"]
    b = ["--bootstrap", server.bootstrap]
    listed = json.loads(groupd_cli_output("groups", "list", "--type", "share", "--json", *b))
    assert {"group": "sg-cli", "state": "Stable", "protocol_type": "share", "type": "share"} in listed
    described = json.loads(groupd_cli_output("groups", "describe", "sg-cli", "--json", *b))
    assert (described["type"], described["state"], described["protocol"], described["group_epoch"]) == (
        "share", "Stable", "simple", epoch)
    assert sorted(m["member_id"] for m in described["members"]) == ["m-1", "m-2"]
    held = sorted(p for m in described["members"] for p in m["assignment"].get("three", []))
    assert held == [0, 1, 2]  # three partitions, two members: each partition once (S = 1)
    # initialized, no state yet (made at the first ShareFetch): no start offset, no lag
    assert described["offsets"] == [{"topic": "three", "partition": p, "offset": None, "log_end_offset": 0,
                                     "lag": None} for p in range(3)]
    text = groupd_cli_output("groups", "describe", "sg-cli", *b)
    assert f"share group Stable, group epoch {epoch}, assignment epoch" in text and "assignor simple" in text
    assert "START-OFFSET" in text
