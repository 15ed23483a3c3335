"""ConsumerGroupHeartbeat (spec §2–§6) through the runner with a fake clock; after each scenario the
written records are replayed into a fresh partition and must rebuild the same groups."""

import uuid

import pytest

from groupd.coordinator.core.consumer.group import ConsumerGroup
from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, ConsumerSettings, TopicsImage
from groupd.coordinator.core.consumer.reconciliation import MemberState
from groupd.coordinator.core.partition import GroupSettings
from groupd.protocol import ErrorCode
from groupd.storage.catalog import Topic
from groupd.storage.consumer_records import ConsumerGroupMetadataKey

from .driver import Driver

E = ErrorCode
FOO = uuid.UUID(int=1)
BAR = uuid.UUID(int=2)
TOPICS = TopicsImage.of(1, [Topic("foo", 4, FOO)])


def join(member_id, topics=("foo",), instance_id=None, regex=None, version=1):
    return ConsumerHeartbeatRequest("g", member_id, 0, instance_id, None, 300_000,
                                    tuple(topics) if topics is not None else None, regex, None, [], version=version)


def hb(member_id, epoch, owned=None, instance_id=None):
    return ConsumerHeartbeatRequest("g", member_id, epoch, instance_id, None, -1, None, None, None, owned)


def owned(*partitions):
    return [(FOO, list(partitions))] if partitions else []


def assigned(reply):
    a = reply["assignment"]
    return None if a is None else {tp["topic_id"]: set(tp["partitions"]) for tp in a["topic_partitions"]}


@pytest.fixture
def d():
    return Driver(GroupSettings())


def group(d) -> ConsumerGroup:
    return d.shard.groups["g"]


def durable(g: ConsumerGroup) -> dict:
    return {"epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch, "targets": g.target_assignment,
            "members": {m.member_id: (m.metadata, m.assignment) for m in g.members.values()},
            "partition_epochs": g.partition_epochs, "static": g.static_members, "regexes": g.regexes}


def assert_replay_matches(d):
    fresh = d.replay()
    live = {gid: durable(g) for gid, g in d.shard.groups.items() if isinstance(g, ConsumerGroup)}
    assert {gid: durable(g) for gid, g in fresh.groups.items() if isinstance(g, ConsumerGroup)} == live


def test_the_worked_example_of_spec_4_4(d):
    r = d.consumer_heartbeat(join("a"), TOPICS)
    assert (r["error_code"], r["member_epoch"], assigned(r)) == (E.none, 1, {FOO: {0, 1, 2, 3}})
    r = d.consumer_heartbeat(join("b"), TOPICS)
    assert (r["member_epoch"], assigned(r)) == (2, {})  # its partitions are still held by a
    assert group(d).state_name == "Reconciling"
    r = d.consumer_heartbeat(hb("a", 1), TOPICS)  # owned unknown: a must revoke two first
    assert (r["member_epoch"], assigned(r)) == (1, {FOO: {0, 1}})
    assert group(d).members["a"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    r = d.consumer_heartbeat(hb("a", 1, owned(0, 1)), TOPICS)
    assert (r["member_epoch"], r["assignment"]) == (2, None)
    r = d.consumer_heartbeat(hb("b", 2), TOPICS)
    assert (r["member_epoch"], assigned(r)) == (2, {FOO: {2, 3}})
    assert group(d).state_name == "Stable"
    assert_replay_matches(d)


def test_v0_join_with_an_empty_member_id_gets_a_generated_one(d):
    r = d.consumer_heartbeat(join("", version=0), TOPICS)
    assert r["error_code"] == E.none and r["member_id"] in group(d).members


def test_validation_errors_carry_kafkas_messages(d):
    assert d.consumer_heartbeat(join(""), TOPICS)["error_code"] == E.invalid_request  # v1 needs an id
    bad = join("a")
    bad.topic_partitions = None
    assert d.consumer_heartbeat(bad, TOPICS)["error_message"] == "TopicPartitions must be empty when (re-)joining."
    assert d.consumer_heartbeat(hb("a", -3), TOPICS)["error_code"] == E.invalid_request
    assert d.consumer_heartbeat(hb("a", -2), TOPICS)["error_code"] == E.invalid_request  # -2 needs an instance id
    unknown = join("a")
    unknown.server_assignor = "sticky"
    assert d.consumer_heartbeat(unknown, TOPICS)["error_code"] == E.unsupported_assignor


def test_unknown_group_and_member_and_epoch_errors(d):
    assert d.consumer_heartbeat(hb("a", 3), TOPICS)["error_code"] == E.group_id_not_found
    d.consumer_heartbeat(join("a"), TOPICS)
    assert d.consumer_heartbeat(hb("x", 1), TOPICS)["error_code"] == E.unknown_member_id
    assert d.consumer_heartbeat(hb("a", 5), TOPICS)["error_code"] == E.fenced_member_epoch


def test_epoch_zero_from_a_known_member_is_a_rejoin_kafka_19233(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    r = d.consumer_heartbeat(join("a"), TOPICS)
    assert (r["error_code"], r["member_epoch"], assigned(r)) == (E.none, 1, {FOO: {0, 1, 2, 3}})
    assert group(d).group_epoch == 1  # nothing changed: no new epoch


def test_leave_tombstones_the_member_and_bumps_the_epoch(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    d.consumer_heartbeat(join("b"), TOPICS)
    r = d.consumer_heartbeat(hb("b", -1), TOPICS)
    assert (r["error_code"], r["member_epoch"]) == (E.none, -1)
    assert set(group(d).members) == {"a"} and group(d).group_epoch == 3
    assert d.consumer_heartbeat(hb("b", -1), TOPICS)["error_code"] == E.unknown_member_id
    assert_replay_matches(d)


def test_session_expiry_fences_the_member(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    d.consumer_heartbeat(join("b"), TOPICS)
    d.advance(30_000)
    d.consumer_heartbeat(hb("a", 1, owned(0, 1)), TOPICS)  # a heartbeats; b does not
    d.advance(20_000)
    assert set(group(d).members) == {"a"}
    assert d.consumer_heartbeat(hb("b", 2), TOPICS)["error_code"] == E.unknown_member_id
    assert_replay_matches(d)


def test_rebalance_timeout_fences_a_member_that_never_revokes(d):
    req = join("a")
    req.rebalance_timeout_ms = 10_000
    d.consumer_heartbeat(req, TOPICS)
    d.consumer_heartbeat(join("b"), TOPICS)
    d.consumer_heartbeat(hb("a", 1), TOPICS)  # now UNREVOKED_PARTITIONS
    d.advance(5_000)
    d.consumer_heartbeat(hb("b", 2), TOPICS)
    d.advance(6_000)
    assert "a" not in group(d).members
    d.consumer_heartbeat(hb("b", 2), TOPICS)
    r = d.consumer_heartbeat(hb("b", group(d).members["b"].member_epoch), TOPICS)
    assert group(d).members["b"].assignment.assigned_partitions == {FOO: frozenset(range(4))}
    assert r["error_code"] == E.none


def test_a_static_member_bounces_and_its_replacement_gets_its_partitions_back(d):
    d.consumer_heartbeat(join("a", instance_id="i-a"), TOPICS)
    d.consumer_heartbeat(join("b", instance_id="i-b"), TOPICS)
    d.consumer_heartbeat(hb("a", 1, owned(0, 1), instance_id="i-a"), TOPICS)
    d.consumer_heartbeat(hb("b", 2, instance_id="i-b"), TOPICS)
    before = group(d).members["b"].assignment.assigned_partitions
    epoch = group(d).group_epoch
    assert d.consumer_heartbeat(join("b2", instance_id="i-b"), TOPICS)["error_code"] == E.unreleased_instance_id
    r = d.consumer_heartbeat(hb("b", -2, instance_id="i-b"), TOPICS)
    assert (r["error_code"], r["member_epoch"]) == (E.none, -2)
    r = d.consumer_heartbeat(join("b2", instance_id="i-b"), TOPICS)
    assert r["error_code"] == E.none and assigned(r) == {t: set(ps) for t, ps in before.items()}
    assert group(d).group_epoch == epoch and "b" not in group(d).members
    assert group(d).static_members["i-b"] == "b2"
    assert d.consumer_heartbeat(hb("b", 2, instance_id="i-b"), TOPICS)["error_code"] == E.fenced_instance_id
    assert_replay_matches(d)


def test_a_new_partition_count_bumps_the_epoch_on_the_next_heartbeat(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    grown = TopicsImage.of(2, [Topic("foo", 6, FOO)])
    r = d.consumer_heartbeat(hb("a", 1), grown)
    assert (group(d).group_epoch, r["member_epoch"], assigned(r)) == (2, 2, {FOO: set(range(6))})
    assert_replay_matches(d)


def test_a_regex_subscription_picks_up_a_created_topic(d):
    r = d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    assert assigned(r) == {}  # a new regex matches nothing until its resolution lands (spec §6.2)
    assert d.run_effects() == 1
    r = d.consumer_heartbeat(hb("a", 1), TOPICS)
    assert assigned(r) == {FOO: {0, 1, 2, 3}}
    more = TopicsImage.of(2, [Topic("foo", 4, FOO), Topic("fab", 2, BAR)])
    d.advance(10_001)  # not more often than every 10 s
    r = d.consumer_heartbeat(hb("a", 2), more)
    assert d.run_effects() == 1
    r = d.consumer_heartbeat(hb("a", 2), more)
    assert assigned(r) == {FOO: {0, 1, 2, 3}, BAR: {0, 1}}
    assert group(d).regexes["f.*"].topics == ("fab", "foo")
    assert d.consumer_heartbeat(join("b", topics=None, regex="("), TOPICS)["error_code"] == E.invalid_regular_expression
    assert_replay_matches(d)


def test_offset_commits_check_the_member_epoch(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    assert d.commit("g", [("foo", 0, 5)], generation=1, member_id="a") == {("foo", 0): E.none}
    assert d.commit("g", [("foo", 0, 5)], generation=0, member_id="a") == {("foo", 0): E.stale_member_epoch}
    assert d.commit("g", [("foo", 0, 5)], generation=1, member_id="x") == {("foo", 0): E.unknown_member_id}
    assert d.commit("g", [("foo", 0, 5)], generation=1, member_id="a", version=8) == {("foo", 0): E.unsupported_version}
    assert d.shard.validate_offset_fetch("g", "a", 0) == E.stale_member_epoch
    assert d.shard.validate_offset_fetch("g", None, -1) is None


def test_delete_needs_an_empty_group_and_tombstones_every_record(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    assert d.delete_group("g") == E.non_empty_group
    d.consumer_heartbeat(hb("a", -1), TOPICS)
    assert d.delete_group("g") == E.none
    assert "g" not in d.shard.groups
    assert d.written[-1].key == ConsumerGroupMetadataKey("g") and d.written[-1].value is None
    assert "g" not in d.replay().groups


def test_offset_delete_of_a_subscribed_topic_is_refused(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    d.commit("g", [("foo", 0, 5)], generation=1, member_id="a")
    reply = d.delete_offsets("g", [("foo", [0])])
    assert reply["partitions"] == {("foo", 0): E.group_subscribed_to_topic}


def test_a_failed_write_reverts_the_join(d):
    d.fail_next_write(E.not_coordinator)
    r = d.consumer_heartbeat(join("a"), TOPICS)
    assert r["error_code"] == E.not_coordinator
    assert "g" not in d.shard.groups


def test_an_empty_group_of_the_other_type_is_replaced(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    r = d.join("g", ticket="classic")  # a live consumer group serves classic members (test_consumer_classic_members)
    assert r["error_code"] == E.member_id_required and group(d).type == "consumer"
    d.consumer_heartbeat(hb("a", -1), TOPICS)
    r = d.join("g", ticket="classic-2")  # an empty consumer group is replaced
    assert r["error_code"] == E.member_id_required
    assert group(d).type == "classic"
    assert d.consumer_heartbeat(join("c"), TOPICS)["error_code"] == E.none  # an empty classic group is replaced too
    assert group(d).type == "consumer"


def test_a_reloaded_partition_keeps_epochs_and_arms_the_timers_again(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    d.consumer_heartbeat(join("b"), TOPICS)
    d.consumer_heartbeat(hb("a", 1), TOPICS)  # a must revoke: UNREVOKED_PARTITIONS
    d.shard = d.replay()
    d.runner.run(d.shard.on_loaded(d.clock.read()))
    assert (group(d).group_epoch, group(d).members["a"].member_epoch) == (2, 1)
    assert {k[0] for k in d.timers} == {"consumer-session", "consumer-rebalance"}
    r = d.consumer_heartbeat(hb("a", 1, owned(0, 1)), TOPICS)  # it carries on where it was
    assert (r["error_code"], r["member_epoch"]) == (E.none, 2)


def test_metrics_count_consumer_groups_by_type_and_state_and_unreconciled_members(d):
    from groupd.coordinator.observability.collector import CoordinatorCollector
    from groupd.coordinator.runtime.partitions import PartitionState

    d.consumer_heartbeat(join("a"), TOPICS)
    d.consumer_heartbeat(join("b"), TOPICS)  # b's partitions are still a's: both differ from their target
    class Coordinator:  # hashable and weakly referenced, as the collector holds coordinators
        shards, states, writers = [d.shard], [PartitionState.ACTIVE], [None]

    coordinator = Coordinator()
    collector = CoordinatorCollector()
    collector.watch(coordinator, generations=True, offsets=False)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in collector.collect() for s in family.samples}
    assert samples[("groupd_groups", (("protocol_type", "consumer"), ("state", "Reconciling"),
                                      ("type", "consumer")))] == 1
    assert samples[("groupd_consumer_members_unreconciled", ())] == 2
    assert samples[("groupd_consumer_group_epoch", (("epoch", "group"), ("group", "g")))] == 2
    assert samples[("groupd_group_state", (("group", "g"), ("protocol_type", "consumer"), ("state", "Reconciling"),
                                           ("type", "consumer")))] == 1
    assert samples[("groupd_group_members", (("group", "g"), ("type", "consumer")))] == 2


def test_an_empty_consumer_group_expires_with_its_last_offset(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    d.commit("g", [("foo", 0, 5)], generation=1, member_id="a")
    d.advance(2_000)  # past the retention, within the session
    d.runner.run(d.shard.expire(d.clock.read(), retention_ms=1000))
    assert "g" in d.shard.groups and d.shard.offsets  # subscribed by a live member: kept
    d.consumer_heartbeat(hb("a", -1), TOPICS)
    d.runner.run(d.shard.expire(d.clock.read(), retention_ms=1000))
    assert "g" not in d.shard.groups and not d.shard.offsets
    assert "g" not in d.replay().groups


TWO_TOPICS = TopicsImage.of(1, [Topic("foo", 4, FOO), Topic("bar", 2, BAR)])


def test_a_failed_write_into_a_live_group_reverts_every_record(d):
    d.consumer_heartbeat(join("a", topics=("foo", "bar")), TWO_TOPICS)
    d.consumer_heartbeat(join("b", topics=("foo",)), TWO_TOPICS)
    before = durable(group(d))
    d.fail_next_write(E.not_coordinator)
    assert d.consumer_heartbeat(join("c", topics=("bar",), regex="b.*"), TWO_TOPICS)["error_code"] == E.not_coordinator
    assert durable(group(d)) == before
    d.fail_next_write(E.not_coordinator)
    assert d.consumer_heartbeat(hb("b", -1), TWO_TOPICS)["error_code"] == E.not_coordinator
    assert durable(group(d)) == before


def test_a_removed_member_takes_its_topics_out_of_the_subscription_metadata(d):
    d.consumer_heartbeat(join("a", topics=("foo",)), TWO_TOPICS)
    d.consumer_heartbeat(join("b", topics=("bar",)), TWO_TOPICS)
    assert [t.topic_name for t in group(d).subscription_metadata.topics] == ["bar", "foo"]
    d.consumer_heartbeat(hb("b", -1), TWO_TOPICS)
    assert [t.topic_name for t in group(d).subscription_metadata.topics] == ["foo"]
    epoch = group(d).group_epoch
    newer = TopicsImage.of(2, [Topic("foo", 4, FOO), Topic("bar", 2, BAR)])
    d.consumer_heartbeat(hb("a", group(d).members["a"].member_epoch), newer)
    assert group(d).group_epoch == epoch  # a new topics version alone changes nothing for the group


def test_the_regex_of_the_last_member_using_it_is_tombstoned(d):
    d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    d.consumer_heartbeat(join("b", topics=None, regex="f.*"), TOPICS)
    d.run_effects()
    d.consumer_heartbeat(hb("a", -1), TOPICS)
    assert "f.*" in group(d).regexes
    d.consumer_heartbeat(hb("b", -1), TOPICS)
    assert group(d).regexes == {}
    assert_replay_matches(d)


def test_the_assignor_most_members_name_computes_the_target(d):
    req = join("a", topics=("foo", "bar"))
    req.server_assignor = "range"
    d.consumer_heartbeat(req, TWO_TOPICS)
    d.consumer_heartbeat(join("b", topics=("foo", "bar")), TWO_TOPICS)
    assert d.shard.consumer_describe("g", TWO_TOPICS)["assignor_name"] == "range"
    # range: co-partitioned ranges, a gets foo 0-1 and bar 0 (uniform would spread them otherwise)
    assert group(d).target_of("a") == {FOO: frozenset({0, 1}), BAR: frozenset({0})}


def test_a_full_group_refuses_a_new_member():
    d = Driver(GroupSettings(consumer=ConsumerSettings(max_size=1)))
    d.consumer_heartbeat(join("a"), TOPICS)
    assert d.consumer_heartbeat(join("b"), TOPICS)["error_code"] == E.group_max_size_reached
    assert d.consumer_heartbeat(hb("a", 1), TOPICS)["error_code"] == E.none


def test_a_static_leave_checks_the_instance_and_minus_one_removes_it_for_good(d):
    d.consumer_heartbeat(join("a", instance_id="i-a"), TOPICS)
    r = d.consumer_heartbeat(hb("x", -1, instance_id="i-a"), TOPICS)
    assert r["error_code"] == E.fenced_instance_id
    assert d.consumer_heartbeat(hb("a", -1, instance_id="nope"), TOPICS)["error_code"] == E.unknown_member_id
    r = d.consumer_heartbeat(hb("a", -1, instance_id="i-a"), TOPICS)
    assert (r["error_code"], r["member_epoch"]) == (E.none, -1)
    assert group(d).members == {} and group(d).static_members == {}
    assert group(d).state_name == "Empty"


def test_a_static_member_that_left_temporarily_expires_after_a_session(d):
    d.consumer_heartbeat(join("a", instance_id="i-a"), TOPICS)
    d.consumer_heartbeat(hb("a", -2, instance_id="i-a"), TOPICS)
    assert group(d).members["a"].member_epoch == -2 and group(d).partition_epochs  # still held
    assert group(d).state_name == "Reconciling"
    d.advance(45_000)
    assert group(d).members == {} and group(d).partition_epochs == {}


def test_a_failed_replacement_of_an_empty_consumer_group_keeps_it(d):
    d.consumer_heartbeat(join("a"), TOPICS)
    d.consumer_heartbeat(hb("a", -1), TOPICS)
    before = durable(group(d))
    d.fail_next_write(E.not_coordinator)
    assert d.join("g", ticket="classic")["error_code"] == E.not_coordinator
    assert group(d).type == "consumer" and durable(group(d)) == before
