"""Regex subscriptions resolve as Kafka's do (spec §6.2): asynchronously, batched per group, at most
one resolution in flight and not more often than every 10 s; a heartbeat asks for one as an effect
and the result comes back through the same records (type 16, then a new group epoch)."""

import uuid

import pytest

from groupd.coordinator.core.consumer.machine import ConsumerHeartbeatRequest, ConsumerSettings, TopicsImage
from groupd.coordinator.core.partition import GroupSettings
from groupd.protocol import ErrorCode
from groupd.storage.catalog import Topic
from groupd.storage.consumer_records import ConsumerGroupMetadataKey, ConsumerGroupRegularExpressionKey

from .driver import Driver
from .test_consumer_heartbeat import BAR, FOO, assert_replay_matches, assigned, group, hb, join

E = ErrorCode
BAZ = uuid.UUID(int=3)
TOPICS = TopicsImage.of(1, [Topic("foo", 4, FOO), Topic("bar", 2, BAR)])


@pytest.fixture
def d():
    return Driver(GroupSettings(consumer=ConsumerSettings(regex_refresh_interval_ms=60_000)))


def resubscribe(member_id, epoch, names=(), regex=""):
    """A heartbeat that changes the member's subscription ("" drops its regex)."""
    return ConsumerHeartbeatRequest("g", member_id, epoch, None, None, -1, tuple(names), regex, None, None)


def regex_member(d, regex):
    """Member "a" joins with `regex`, the resolution lands, and a heartbeat takes the new epoch (2)."""
    d.consumer_heartbeat(join("a", topics=None, regex=regex), TOPICS)
    d.run_effects()
    assert d.consumer_heartbeat(hb("a", 1), TOPICS)["member_epoch"] == 2


def regex_records(d):
    return [r for r in d.written if isinstance(r.key, ConsumerGroupRegularExpressionKey)]


def epoch_records(d):
    return [r.value.epoch for r in d.written if isinstance(r.key, ConsumerGroupMetadataKey) and r.value]


def test_a_new_regex_matches_nothing_until_its_resolution_lands(d):
    r = d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    assert (r["member_epoch"], assigned(r)) == (1, {})
    assert [e.key for e, _ in d.effects] == [("consumer-regex", "g")]
    assert group(d).regexes == {} and regex_records(d) == []
    d.run_effects()
    [record] = regex_records(d)
    assert (record.value.topics, record.value.version, record.value.timestamp) == (("foo",), 1, d.clock.read().wall)
    assert group(d).group_epoch == 2  # the result changed the regex's topics: a new epoch
    r = d.consumer_heartbeat(hb("a", 1), TOPICS)
    assert (r["member_epoch"], assigned(r)) == (2, {FOO: {0, 1, 2, 3}})
    assert_replay_matches(d)


def test_at_most_one_resolution_is_in_flight_per_group(d):
    d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    r = d.consumer_heartbeat(join("b", topics=None, regex="b.*"), TOPICS)
    assert r["member_epoch"] == 1  # a member whose only subscription is unresolved bumps nothing
    d.consumer_heartbeat(hb("a", 1), TOPICS)
    assert len(d.effects) == 1  # b's regex waits for the resolution in flight
    d.run_effects()
    assert set(group(d).regexes) == {"f.*"}
    d.advance(9_000)
    assert d.consumer_heartbeat(hb("b", 1), TOPICS)["member_epoch"] == 2
    assert d.effects == []  # the last resolution is younger than 10 s
    d.advance(1_001)
    d.consumer_heartbeat(hb("b", 2), TOPICS)
    d.run_effects()  # the unresolved regex: every regex of the group, resolved together
    assert {r: v.topics for r, v in group(d).regexes.items()} == {"f.*": ("foo",), "b.*": ("bar",)}
    assert len({v.timestamp for v in group(d).regexes.values()}) == 1
    assert_replay_matches(d)


def test_created_topics_are_picked_up_not_more_often_than_every_10_s(d):
    regex_member(d, "f.*|baz")
    created = TopicsImage.of(2, [Topic("foo", 4, FOO), Topic("bar", 2, BAR), Topic("baz", 1, BAZ)])
    d.advance(5_000)
    r = d.consumer_heartbeat(hb("a", 2), created)
    assert d.effects == [] and assigned(r) is None
    d.advance(5_001)
    d.consumer_heartbeat(hb("a", 2), created)
    d.run_effects()
    assert group(d).regexes["f.*|baz"].topics == ("baz", "foo")
    r = d.consumer_heartbeat(hb("a", 2), created)
    assert (r["member_epoch"], assigned(r)) == (3, {FOO: {0, 1, 2, 3}, BAZ: {0}})
    assert_replay_matches(d)


def test_growth_and_deletion_need_no_resolution(d):
    regex_member(d, "f.*|bar")
    d.advance(20_000)
    grown = TopicsImage.of(2, [Topic("foo", 6, FOO), Topic("bar", 2, BAR)], created_version=1)
    r = d.consumer_heartbeat(hb("a", 2), grown)
    assert d.effects == []
    assert (r["member_epoch"], assigned(r)) == (3, {FOO: set(range(6)), BAR: {0, 1}})
    deleted = TopicsImage.of(3, [Topic("foo", 6, FOO)], created_version=1)
    r = d.consumer_heartbeat(hb("a", 3), deleted)
    assert d.effects == []
    assert (group(d).group_epoch, assigned(r)) == (4, {FOO: set(range(6))})
    assert_replay_matches(d)


def test_the_refresh_interval_re_resolves_and_an_unchanged_result_keeps_the_epoch(d):
    regex_member(d, "f.*")
    d.advance(30_000)
    d.consumer_heartbeat(hb("a", 2), TOPICS)
    assert d.effects == []  # nothing new, and younger than group.consumer.regex.refresh.interval.ms
    d.advance(30_001)
    d.consumer_heartbeat(hb("a", 2), TOPICS)
    d.run_effects()
    assert len(regex_records(d)) == 2  # rewritten with the time of this resolution
    assert group(d).regexes["f.*"].timestamp == d.clock.read().wall
    assert group(d).group_epoch == 2


def test_a_regex_already_resolved_takes_effect_at_once_and_dropping_one_too(d):
    d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    d.run_effects()
    r = d.consumer_heartbeat(join("b", topics=None, regex="f.*"), TOPICS)
    assert d.effects == [] and group(d).group_epoch == 3
    assert r["member_epoch"] == 3
    d.consumer_heartbeat(hb("a", 1), TOPICS)
    d.consumer_heartbeat(resubscribe("b", 3, names=("bar",)), TOPICS)  # names instead of the regex
    assert d.effects == [] and group(d).group_epoch == 4
    assert_replay_matches(d)


def test_a_result_for_a_regex_nobody_uses_any_more_is_dropped(d):
    d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    d.consumer_heartbeat(resubscribe("a", 1, names=("bar",)), TOPICS)
    d.run_effects()
    assert group(d).regexes == {} and regex_records(d) == []
    assert_replay_matches(d)


def test_a_result_for_a_deleted_group_writes_nothing(d):
    d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    d.consumer_heartbeat(hb("a", -1), TOPICS)
    d.delete_group("g")
    assert "g" not in d.shard.groups
    written = len(d.written)
    d.run_effects()
    assert len(d.written) == written


def test_a_failed_resolution_is_reported_and_retried_on_a_later_heartbeat(d, monkeypatch):
    import groupd.coordinator.core.consumer.regex_resolution as regex_resolution

    def broken(regex):
        raise RuntimeError("boom")

    d.consumer_heartbeat(join("a", topics=("bar",), regex="f.*"), TOPICS)
    monkeypatch.setattr(regex_resolution, "compile_topic_regex", broken)
    d.run_effects()
    assert [type(e).__name__ for e in d.events].count("ConsumerRegexResolutionFailed") == 1
    assert group(d).regexes == {}
    monkeypatch.undo()
    d.consumer_heartbeat(hb("a", 1), TOPICS)  # still unresolved, no resolution in flight: again
    d.run_effects()
    assert group(d).regexes["f.*"].topics == ("foo",)
    assert_replay_matches(d)


def test_a_failed_write_of_the_result_reverts_it_and_the_next_heartbeat_asks_again(d):
    d.consumer_heartbeat(join("a", topics=None, regex="f.*"), TOPICS)
    d.fail_next_write(E.not_coordinator)
    d.run_effects()
    assert group(d).regexes == {} and group(d).group_epoch == 1
    d.consumer_heartbeat(hb("a", 1), TOPICS)
    d.run_effects()
    assert group(d).regexes["f.*"].topics == ("foo",) and group(d).group_epoch == 2
    assert_replay_matches(d)


def test_a_heartbeat_that_fails_after_asking_for_a_resolution_does_not_block_the_next_one(d, monkeypatch):
    import groupd.coordinator.core.consumer.machine as machine

    def failing(*args, **kwargs):
        raise machine.PartitionAssignorError("boom")

    d.consumer_heartbeat(join("a"), TOPICS)
    with monkeypatch.context() as m:
        m.setattr(machine, "build_target_assignment", failing)
        r = d.consumer_heartbeat(join("b", topics=("foo",), regex="b.*"), TOPICS)  # new names: a new target
    assert r["error_code"] == E.unknown_server_error and d.effects == []
    d.consumer_heartbeat(join("b", topics=("foo",), regex="b.*"), TOPICS)
    assert [e.key for e, _ in d.effects] == [("consumer-regex", "g")]
