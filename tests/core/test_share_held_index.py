"""A share group's inverted target assignment (ShareGroup.held: topic → partition → how many members'
targets hold it), which the heartbeat reads to find initialized partitions no target holds: it must
equal the count taken from every member's target after any sequence of joins, leaves, expiries,
initializations, topic growth and failed writes (reverted), and after replaying the log."""

import random
import uuid

import pytest

from groupd.coordinator.core.consumer.machine import TopicsImage
from groupd.coordinator.core.partition import GroupSettings
from groupd.coordinator.core.share.group import ShareGroup
from groupd.coordinator.core.share.machine import ShareHeartbeatRequest, ShareSettings
from groupd.protocol import ErrorCode
from groupd.storage.catalog import Topic

from .driver import Driver

FOO, BAR = uuid.UUID(int=1), uuid.UUID(int=2)


def counted(group: ShareGroup) -> dict:
    held: dict = {}
    for target in group.targets.values():
        for t, ps in target.items():
            for p in ps:
                held.setdefault(t, {}).setdefault(p, 0)
                held[t][p] += 1
    return held


def assert_index_matches(shard) -> None:
    for group in shard.groups.values():
        if isinstance(group, ShareGroup):
            assert group.held == counted(group), group.group_id


@pytest.mark.parametrize("seed", range(4))
def test_the_index_counts_what_the_targets_hold(seed):
    rng = random.Random(seed)
    d = Driver(GroupSettings(share=ShareSettings(max_size=50)))
    version, foo, bar = 1, 4, 2
    topics = TopicsImage.of(version, [Topic("foo", foo, FOO), Topic("bar", bar, BAR)])
    epochs: dict[tuple[str, str], int] = {}
    for _ in range(600):
        gid, m = rng.choice(("g", "h")), f"m{rng.randrange(8)}"
        roll = rng.random()
        if roll < 0.05:
            d.fail_next_write(ErrorCode.not_coordinator)  # the next write fails and is reverted
        if (gid, m) not in epochs:
            req = ShareHeartbeatRequest(gid, m, 0, None, tuple(rng.choice([("foo",), ("bar",), ("foo", "bar")])))
        elif roll < 0.1:
            req = ShareHeartbeatRequest(gid, m, -1)
        elif roll < 0.15:
            req = ShareHeartbeatRequest(gid, m, epochs[(gid, m)], None, (rng.choice(["foo", "bar"]),))
        else:
            req = ShareHeartbeatRequest(gid, m, epochs[(gid, m)])
        reply = d.share_heartbeat(req, topics)
        if reply is None or reply["error_code"] != ErrorCode.none or req.member_epoch == -1:
            epochs.pop((gid, m), None)
        else:
            epochs[(gid, m)] = reply["member_epoch"]
        roll = rng.random()
        if roll < 0.2 and d.effects:
            d.run_effects()  # initializations complete
        elif roll < 0.23:
            version += 1
            foo += 1
            topics = TopicsImage.of(version, [Topic("foo", foo, FOO), Topic("bar", bar, BAR)])
        elif roll < 0.25:
            d.advance(50_000)  # idle sessions expire
        assert_index_matches(d.shard)
    assert any(isinstance(g, ShareGroup) and g.held for g in d.shard.groups.values())
    assert_index_matches(d.replay())
