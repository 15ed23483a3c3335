"""CPU of a KIP-848 group formed by joins one at a time, as bench/consumers.py's join phase drives
the server: each join bumps the group epoch and recomputes the target with the uniform assignor
(`build_target_assignment`), and the changed targets are applied from the records, as the runtime
does. No server, no sockets: the target computation's share of the join, on its own.

    python bench/join_targets.py                         # 1,000 members, one topic of 1,000 partitions
    python bench/join_targets.py --members 100 --partitions 100
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # this checkout's code, not the editable install's
    sys.path.insert(0, ROOT)

from groupd.coordinator.core.consumer.assignors import TopicMetadata, uniform  # noqa: E402
from groupd.coordinator.core.consumer.target_assignment import TargetMember, build_target_assignment  # noqa: E402
from groupd.storage.consumer_records import assignment_of  # noqa: E402


def form(members: int, partitions: int) -> tuple[float, int]:
    """CPU seconds of `members` joins, and how many target records they wrote."""
    topic_id = uuid.uuid4()
    topics = {topic_id: TopicMetadata(topic_id, "t", partitions)}
    subscription = TargetMember(frozenset({"t"}))
    group: dict[str, TargetMember] = {}
    targets: dict = {}
    written = 0
    start = time.process_time()
    for epoch in range(1, members + 1):
        joining = str(uuid.uuid4())
        result = build_target_assignment("bench", epoch, uniform, group, targets, topics,
                                         updated_members={joining: subscription})
        group[joining] = subscription
        for record in result.records[:-1]:  # the last one is the target assignment epoch
            targets[record.key.member_id] = assignment_of(record.value.topic_partitions)
        written += len(result.records) - 1
    return time.process_time() - start, written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="best of")
    args = ap.parse_args()
    runs = [form(args.members, args.partitions) for _ in range(args.repeat)]
    cpu, written = min(runs)
    print(f"{args.members:,} joins, one topic of {args.partitions:,} partitions: {cpu:.2f} s CPU "
          f"({1000 * cpu / args.members:.2f} ms per epoch bump, best of {args.repeat}), {written:,} target records")


if __name__ == "__main__":
    main()
