"""Static members across the online migration (spec §6.1, §7.4): a classic static member replacing a
consumer-protocol one with the same group.instance.id and the reverse, during the migration (a
mixed consumer group) and when the replacement ends it (downgrade: KAFKA-19546, KAFKA-20273); the
last consumer-protocol static member leaving with -2 vs -1; duplicates fenced as Kafka fences them."""

import pytest

from groupd.coordinator.core.classic.group import ClassicGroup
from groupd.coordinator.core.consumer.group import ConsumerGroup
from groupd.coordinator.core.partition import GroupSettings
from groupd.protocol import ErrorCode
from groupd.protocol.consumer import assigned_partitions, encode_subscription

from .driver import Driver
from .test_consumer_classic_members import classic_join
from .test_consumer_heartbeat import FOO, TOPICS, assert_replay_matches, hb, join, owned
from .test_consumer_migration import classic_group

E = ErrorCode


@pytest.fixture
def d():
    return Driver(GroupSettings())


def group(d):
    return d.shard.groups["g"]


def partitions(member) -> set[int]:
    return set(member.assignment.assigned_partitions.get(FOO, ()))


def mixed_stable(d) -> dict[str, str]:
    """Classic static members a and b (instance ids "a-instance", "b-instance"); a consumer-protocol
    static member c ("c-instance") upgrades the group; everyone reconciles until Stable.
    Returns name → member id."""
    ids = classic_group(d, static=True)
    r = d.consumer_heartbeat(join("c", instance_id="c-instance"), TOPICS)
    assert r["error_code"] == E.none and isinstance(group(d), ConsumerGroup)
    ids["c"] = "c"
    mine, generation, c_epoch = {"a": [0, 1], "b": [2, 3]}, {"a": 1, "b": 1}, r["member_epoch"]
    c = []
    for step in range(8):
        if group(d).state_name == "Stable":
            return ids
        for name in ("a", "b"):
            if d.heartbeat("g", ids[name], generation[name], f"{name}-instance") == E.none:
                continue
            r = classic_join(d, ids[name], f"rejoin-{name}-{step}", owned_partitions=mine[name],
                             instance_id=f"{name}-instance")
            generation[name] = r["generation_id"]
            r = d.sync("g", ids[name], generation[name], ticket=f"sync-{name}-{step}", instance_id=f"{name}-instance")
            mine[name] = assigned_partitions(r["assignment"]).get("foo", [])
        r = d.consumer_heartbeat(hb("c", c_epoch, owned(*c), instance_id="c-instance"), TOPICS)
        c_epoch = r["member_epoch"]
        if r["assignment"] is not None:
            c = sorted(p for tp in r["assignment"]["topic_partitions"] for p in tp["partitions"])
    raise AssertionError(f"not Stable: {group(d).state_name}")


def classic_static_join(d, instance_id, ticket, topics=("foo",), member_id=""):
    meta = encode_subscription(list(topics))
    return d.join("g", member_id, ticket=ticket, instance_id=instance_id, protocols=[("range", meta)])


# -- during the migration: the group stays a consumer group --------------------------------------

def test_a_classic_static_member_replaces_a_consumer_protocol_one_without_waiting_for_a_leave(d):
    ids = mixed_stable(d)
    c = group(d).members["c"]
    held, epoch = partitions(c), group(d).group_epoch
    d.settings.consumer.migration_policy = "upgrade"  # no downgrade: the group stays mixed
    r = classic_static_join(d, "c-instance", "c-as-classic")
    assert r["error_code"] == E.none and r["member_id"] not in ids.values()
    g = group(d)
    assert isinstance(g, ConsumerGroup) and "c" not in g.members
    new = g.members[g.static_members["c-instance"]]
    assert new.classic is not None and partitions(new) == held and g.group_epoch == epoch
    # the consumer-protocol process still running with that instance id is fenced
    assert d.consumer_heartbeat(hb("c", c.member_epoch, instance_id="c-instance"), TOPICS)["error_code"] == \
        E.fenced_instance_id
    assert_replay_matches(d)


def test_a_consumer_protocol_static_member_replaces_a_classic_one_at_the_upgrade(d):
    ids = classic_group(d, static=True)
    a_partitions = set(assigned_partitions(d.shard.groups["g"].members[ids["a"]].assignment)["foo"])
    r = d.consumer_heartbeat(join("a2", instance_id="a-instance"), TOPICS)  # classic a sent no leave (KAFKA-17228)
    assert r["error_code"] == E.none
    g = group(d)
    assert isinstance(g, ConsumerGroup) and g.static_members["a-instance"] == "a2" and ids["a"] not in g.members
    assert partitions(g.members["a2"]) == a_partitions
    # the classic process of a is fenced on its next request
    assert d.heartbeat("g", ids["a"], 1, "a-instance") == E.fenced_instance_id
    r = d.sync("g", ids["a"], 1, ticket="old-a-sync", instance_id="a-instance")
    assert r["error_code"] == E.fenced_instance_id
    assert_replay_matches(d)


def test_a_consumer_protocol_static_member_replaces_a_classic_one_in_a_mixed_group(d):
    ids = mixed_stable(d)
    a_partitions = partitions(group(d).members[ids["a"]])
    r = d.consumer_heartbeat(join("a2", instance_id="a-instance"), TOPICS)
    assert r["error_code"] == E.none and partitions(group(d).members["a2"]) == a_partitions
    assert classic_static_join(d, "a-instance", "old-a", member_id=ids["a"])["error_code"] == E.fenced_instance_id
    assert_replay_matches(d)


# -- the replacement that ends the migration: downgrade -------------------------------------------

def test_replacing_the_last_consumer_protocol_member_downgrades_with_its_partitions_and_no_rebalance(d):
    ids = mixed_stable(d)
    c_partitions, epoch = partitions(group(d).members["c"]), group(d).group_epoch
    r = classic_static_join(d, "c-instance", "c-as-classic")
    assert (r["error_code"], r["generation_id"]) == (E.none, epoch)
    g = group(d)
    assert isinstance(g, ClassicGroup) and (g.state_name, g.generation) == ("Stable", epoch)
    assert set(g.members) == {ids["a"], ids["b"], r["member_id"]}
    assert g.static_members["c-instance"] == r["member_id"]
    s = d.sync("g", r["member_id"], epoch, ticket="c-sync", instance_id="c-instance")
    assert s["error_code"] == E.none and set(assigned_partitions(s["assignment"])["foo"]) == c_partitions
    assert d.heartbeat("g", ids["a"], epoch, "a-instance") == E.none  # the others carry on, no rebalance
    assert [e.direction for e in d.events if type(e).__name__ == "GroupConverted"] == ["upgrade", "downgrade"]
    assert d.consumer_heartbeat(hb("c", 3, instance_id="c-instance"), TOPICS)["error_code"] == E.group_id_not_found
    d.assert_replay_matches()


def test_a_replacement_with_another_subscription_downgrades_into_a_rebalance_kafka_19546(d):
    mixed_stable(d)
    r = classic_static_join(d, "c-instance", "c-as-classic", topics=("foo", "bar"))
    assert r["error_code"] == E.none
    assert (type(group(d)), group(d).state_name) == (ClassicGroup, "PreparingRebalance")


def test_a_replacement_before_the_target_is_reached_downgrades_into_a_rebalance_kafka_20273(d):
    classic_group(d, static=True)
    d.consumer_heartbeat(join("c", instance_id="c-instance"), TOPICS)
    assert group(d).state_name != "Stable"  # the classic members still hold what c is to get
    assert classic_static_join(d, "c-instance", "c-as-classic")["error_code"] == E.none
    assert (type(group(d)), group(d).state_name) == (ClassicGroup, "PreparingRebalance")


def test_a_failed_downgrade_by_replacement_keeps_the_consumer_group(d):
    mixed_stable(d)
    before = {m: (v.metadata, v.assignment) for m, v in group(d).members.items()}
    d.fail_next_write(E.not_coordinator)
    assert classic_static_join(d, "c-instance", "c-as-classic")["error_code"] == E.not_coordinator
    g = group(d)
    assert isinstance(g, ConsumerGroup) and {m: (v.metadata, v.assignment) for m, v in g.members.items()} == before
    assert_replay_matches(d)


# -- the last consumer-protocol static member leaving: -2 (temporary) vs -1 ------------------------

def test_a_minus_two_leave_of_the_last_consumer_protocol_member_keeps_the_consumer_group(d):
    mixed_stable(d)
    epoch = group(d).members["c"].member_epoch
    assert d.consumer_heartbeat(hb("c", -2, instance_id="c-instance"), TOPICS)["error_code"] == E.none
    g = group(d)
    assert isinstance(g, ConsumerGroup) and g.members["c"].member_epoch == -2
    # it comes back within its session: same partitions, no downgrade
    r = d.consumer_heartbeat(join("c2", instance_id="c-instance"), TOPICS)
    assert r["error_code"] == E.none and isinstance(group(d), ConsumerGroup)
    assert r["member_epoch"] == epoch


def test_a_minus_two_leave_downgrades_once_its_session_expires(d):
    ids = mixed_stable(d)
    d.consumer_heartbeat(hb("c", -2, instance_id="c-instance"), TOPICS)
    for _ in range(12):  # a and b heartbeat; c's session (45 s from its last heartbeat) runs out
        if isinstance(group(d), ClassicGroup):
            break
        for name in ("a", "b"):
            assert d.heartbeat("g", ids[name], group(d).members[ids[name]].member_epoch, f"{name}-instance") == E.none
        d.advance(5_000)
    g = group(d)
    assert isinstance(g, ClassicGroup) and set(g.members) == {ids["a"], ids["b"]}
    assert g.state_name == "PreparingRebalance"


def test_a_minus_one_leave_of_the_last_consumer_protocol_member_downgrades_at_once(d):
    ids = mixed_stable(d)
    assert d.consumer_heartbeat(hb("c", -1, instance_id="c-instance"), TOPICS)["error_code"] == E.none
    g = group(d)
    assert isinstance(g, ClassicGroup) and set(g.members) == {ids["a"], ids["b"]}
    assert g.state_name == "PreparingRebalance"


def test_a_classic_member_replacing_one_that_left_with_minus_two_downgrades(d):
    mixed_stable(d)
    c_partitions = partitions(group(d).members["c"])
    d.consumer_heartbeat(hb("c", -2, instance_id="c-instance"), TOPICS)
    r = classic_static_join(d, "c-instance", "c-as-classic")
    assert r["error_code"] == E.none and isinstance(group(d), ClassicGroup)
    s = d.sync("g", r["member_id"], r["generation_id"], ticket="c-sync", instance_id="c-instance")
    assert set(assigned_partitions(s["assignment"])["foo"]) == c_partitions


# -- duplicates ----------------------------------------------------------------------------------

def test_a_second_consumer_protocol_process_with_a_live_instance_id_is_unreleased(d):
    mixed_stable(d)
    r = d.consumer_heartbeat(join("c2", instance_id="c-instance"), TOPICS)
    assert r["error_code"] == E.unreleased_instance_id


def test_a_classic_join_naming_another_members_instance_is_fenced_and_an_unknown_one_unknown(d):
    ids = mixed_stable(d)
    assert classic_static_join(d, "c-instance", "a-as-c", member_id=ids["a"])["error_code"] == E.fenced_instance_id
    assert classic_static_join(d, "x-instance", "a-as-x", member_id=ids["a"])["error_code"] == E.unknown_member_id


def test_a_restarted_classic_static_member_gets_a_new_id_and_fences_the_old_process(d):
    ids = mixed_stable(d)
    a_partitions = partitions(group(d).members[ids["a"]])
    d.settings.consumer.migration_policy = "upgrade"
    r = classic_static_join(d, "a-instance", "a-restarted")
    assert r["error_code"] == E.none and r["member_id"] != ids["a"]
    assert partitions(group(d).members[r["member_id"]]) == a_partitions
    assert d.heartbeat("g", ids["a"], r["generation_id"], "a-instance") == E.fenced_instance_id
    assert_replay_matches(d)


def test_a_classic_static_member_cannot_bring_a_regex_along(d):
    d.consumer_heartbeat(join("c", topics=None, instance_id="c-instance", regex="f.*"), TOPICS)
    d.run_effects()
    d.consumer_heartbeat(join("d", topics=("foo",)), TOPICS)  # a second consumer-protocol member: no downgrade
    r = classic_static_join(d, "c-instance", "c-as-classic")
    assert r["error_code"] == E.none
    g = group(d)
    new = g.members[g.static_members["c-instance"]]
    assert (new.subscribed_topic_regex, new.subscribed_topic_names) == (None, ("foo",))
    assert g.regexes == {}  # it was the last member using it
    assert_replay_matches(d)
