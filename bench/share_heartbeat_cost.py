"""CPU per steady ShareGroupHeartbeat in a large share group, in process and sans-IO: the partition's
`GroupShard` driven through the runner by the core tests' driver (fake log and timers, no sockets), so
the figure is the coordinator's own work per heartbeat, whatever else the machine is doing.

    python bench/share_heartbeat_cost.py [--members 1000] [--partitions 1000] [-n 20000] [--repeat 3]

The members join one share group subscribed to one topic (group.share.max.size raised to fit), the
share state of its partitions is initialized, every member takes its target; then each member in
turn sends its steady heartbeat (its epoch, no subscription) and a reply is checked for error 0.
Printed: µs of process CPU per heartbeat, median of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from groupd.coordinator.core.consumer.machine import TopicsImage  # noqa: E402
from groupd.coordinator.core.partition import GroupSettings  # noqa: E402
from groupd.coordinator.core.share.machine import ShareHeartbeatRequest, ShareSettings  # noqa: E402
from groupd.protocol import ErrorCode  # noqa: E402
from groupd.storage.catalog import Topic  # noqa: E402
from tests.core.driver import Driver  # noqa: E402


def one(members: int, partitions: int, n: int) -> float:
    d = Driver(GroupSettings(share=ShareSettings(max_size=members)))
    topics = TopicsImage.of(1, [Topic("t", partitions, uuid.UUID(int=1))])
    ids = [f"member-{i}" for i in range(members)]
    epochs = {}
    for m in ids:
        epochs[m] = d.share_heartbeat(
            ShareHeartbeatRequest("g", m, 0, None, ("t",)), topics)["member_epoch"]
    d.run_effects()  # the share state's initialization completes
    for _ in range(3):  # the next heartbeat bumps the epoch (initialized partitions unassigned); all catch up
        for m in ids:
            epochs[m] = d.share_heartbeat(ShareHeartbeatRequest("g", m, epochs[m]), topics)["member_epoch"]
    group = d.shard.groups["g"]
    assert all(e == group.assignment_epoch for e in epochs.values()) and group.targets, "the group did not settle"
    requests = [ShareHeartbeatRequest("g", m, epochs[m]) for m in ids]
    written = len(d.written)
    t0 = time.process_time()
    for i in range(n):
        reply = d.share_heartbeat(requests[i % members], topics)
    used = time.process_time() - t0
    assert reply["error_code"] == ErrorCode.none and len(d.written) == written, reply
    return used / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("-n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = sorted(one(args.members, args.partitions, args.n) for _ in range(args.repeat))
    each = ", ".join(f"{r:.1f}" for r in runs)
    print(f"share-heartbeat {statistics.median(runs):8.1f} CPU µs/request (runs: {each}; {args.members:,} members, "
          f"{args.partitions:,} partitions, {args.n:,} heartbeats each)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
