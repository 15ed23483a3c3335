"""Share groups assign only share-partitions whose state is initialized (Kafka 4.x's
GroupMetadataManager: maybeCreateInitializeShareGroupStateRequest, initializeShareGroupState,
uninitializeShareGroupState, initializedAssignmentPending), through the runner with a fake clock:
a heartbeat records the subscribed partitions as initializing, the runtime's `share-initialize`
effect completes them, and the next heartbeat bumps the group epoch to assign them."""

import uuid

import pytest

from groupd.coordinator.core import events as ev
from groupd.coordinator.core.consumer.machine import TopicsImage
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.core.share.group import ShareGroup
from groupd.coordinator.core.share.machine import INITIALIZE_RETRY_INTERVAL_MS, ShareHeartbeatRequest, ShareSettings
from groupd.protocol import ErrorCode
from groupd.storage.catalog import Topic
from groupd.storage.share_records import ShareGroupStatePartitionMetadataKey

from .driver import Driver

E = ErrorCode
FOO = uuid.UUID(int=1)
BAR = uuid.UUID(int=2)
TOPICS = TopicsImage.of(1, [Topic("foo", 4, FOO), Topic("bar", 2, BAR)])


def join(member_id, topics=("foo",)):
    return ShareHeartbeatRequest("g", member_id, 0, None, tuple(topics), "client", "/127.0.0.1")


def hb(member_id, epoch):
    return ShareHeartbeatRequest("g", member_id, epoch, None, None, "client", "/127.0.0.1")


def assigned(reply):
    a = reply["assignment"]
    return None if a is None else {tp["topic_id"]: set(tp["partitions"]) for tp in a["topic_partitions"]}


def initializing(group: ShareGroup) -> dict:
    s = group.state_partitions
    return {} if s is None else {t.topic_id: frozenset(t.partitions) for t in s.initializing_topics}


def state_writes(d) -> int:
    return sum(isinstance(r.key, ShareGroupStatePartitionMetadataKey) for r in d.written)


@pytest.fixture
def d():
    return Driver(GroupSettings(share=ShareSettings()))


def group(d) -> ShareGroup:
    return d.shard.groups["g"]


def assert_replay_matches(d):
    def durable(g: ShareGroup) -> tuple:
        return g.group_epoch, g.assignment_epoch, g.targets, g.state_partitions, \
            {m.member_id: m.current for m in g.members.values()}
    assert durable(d.replay().groups["g"]) == durable(group(d))


def test_two_members_join_with_nothing_and_get_their_halves_once_initialized(d):
    a = d.share_heartbeat(join("a"), TOPICS)
    b = d.share_heartbeat(join("b"), TOPICS)
    assert (a["member_epoch"], assigned(a)) == (1, {})
    assert (b["member_epoch"], assigned(b)) == (2, {})
    assert initializing(group(d)) == {FOO: frozenset(range(4))} and group(d).initialized() == {}
    assert state_writes(d) == 1  # b's join finds foo initializing: nothing started twice
    assert d.run_effects() == 1
    assert initializing(group(d)) == {} and group(d).initialized() == {FOO: frozenset(range(4))}
    a = d.share_heartbeat(hb("a", 1), TOPICS)  # bumps the epoch: a target over the initialized partitions
    assert ev.ShareGroupEpochBumped("g", 3, "initialized") in d.events
    b = d.share_heartbeat(hb("b", 2), TOPICS)
    assert a["member_epoch"] == b["member_epoch"] == 3 == group(d).assignment_epoch
    assert len(assigned(a)[FOO]) == len(assigned(b)[FOO]) == 2
    assert assigned(a)[FOO] | assigned(b)[FOO] == set(range(4))
    steady = d.share_heartbeat(hb("a", 3), TOPICS)  # everything initialized is assigned: no further epoch
    assert steady["member_epoch"] == 3 and steady["assignment"] is None
    assert_replay_matches(d)


def test_initializing_and_initialized_survive_a_restart(d):
    d.share_heartbeat(join("a", topics=("foo", "bar")), TOPICS)
    fresh = d.replay()
    assert initializing(fresh.groups["g"]) == {FOO: frozenset(range(4)), BAR: frozenset(range(2))}
    d.run_effects()
    fresh = d.replay()
    assert initializing(fresh.groups["g"]) == {}
    assert fresh.groups["g"].initialized() == {FOO: frozenset(range(4)), BAR: frozenset(range(2))}


def test_a_failed_initialization_leaves_initializing_and_the_next_heartbeat_retries(d):
    d.share_heartbeat(join("a"), TOPICS)
    effect, completed = d.effects.pop(0)
    assert effect.key == ("share-initialize", "g")
    completed(None, RuntimeError("leader unreachable"))  # Kafka's uninitializeShareGroupState
    assert initializing(group(d)) == {} and group(d).initialized() == {}
    reply = d.share_heartbeat(hb("a", 1), TOPICS)
    assert reply["member_epoch"] == 1 and reply["assignment"] is None
    assert initializing(group(d)) == {FOO: frozenset(range(4))}
    d.run_effects()
    assert assigned(d.share_heartbeat(hb("a", 1), TOPICS)) == {FOO: set(range(4))}
    assert_replay_matches(d)


def test_an_initialization_lost_in_a_restart_is_retried_after_the_retry_interval(d):
    d.share_heartbeat(join("a"), TOPICS)
    d.effects.clear()  # the process stopped before the initialization completed
    d.shard = d.replay()
    writes = state_writes(d)
    d.advance(INITIALIZE_RETRY_INTERVAL_MS - 1)
    d.share_heartbeat(hb("a", 1), TOPICS)
    assert state_writes(d) == writes and not d.effects  # still initializing: not started again yet
    d.advance(1)
    d.share_heartbeat(hb("a", 1), TOPICS)
    assert state_writes(d) == writes + 1 and len(d.effects) == 1
    d.run_effects()
    assert assigned(d.share_heartbeat(hb("a", 1), TOPICS)) == {FOO: set(range(4))}


def test_a_failed_write_of_initializing_starts_nothing(d):
    d.fail_next_write(E.not_coordinator)
    reply = d.share_heartbeat(join("a"), TOPICS)
    assert reply["error_code"] == E.not_coordinator
    assert "g" not in d.shard.groups and not d.effects


def test_a_topic_deleted_while_initializing_is_dropped(d):
    d.share_heartbeat(join("a", topics=("foo", "bar")), TOPICS)
    d.effects.clear()
    d.advance(INITIALIZE_RETRY_INTERVAL_MS)
    without_bar = TopicsImage.of(2, [Topic("foo", 4, FOO)])
    d.share_heartbeat(hb("a", 1), without_bar)
    assert initializing(group(d)) == {FOO: frozenset(range(4))}
    d.run_effects()
    assert group(d).initialized() == {FOO: frozenset(range(4))}


def test_altering_offsets_of_an_empty_group_initializes_what_was_initializing(d):
    d.share_heartbeat(join("a", topics=("foo", "bar")), TOPICS)
    d.effects.clear()  # the initialization has not completed when the member leaves
    d.share_heartbeat(ShareHeartbeatRequest("g", "a", -1, None, None, "client", "/127.0.0.1"), TOPICS)
    d._op(None, lambda t: d.shard.share_set_initialized("g", {FOO: [0, 1]}, [BAR], TOPICS, d.clock.read(), False))
    assert group(d).initialized() == {FOO: frozenset({0, 1})}
    assert initializing(group(d)) == {FOO: frozenset({2, 3})}  # bar's state was deleted: nothing to initialize
    assert_replay_matches(d)
