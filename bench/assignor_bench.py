"""Assignor benchmark: time to compute a consumer group's target assignment (spec §3.3–3.4).

    python bench/assignor_bench.py                                  # 1000 members x 100 topics x 10 partitions
    python bench/assignor_bench.py --members 200 --topics 50 --partitions 4 --repeat 5

Per assignor, three cases: a fresh group (no current targets), the same group again with its
targets (a settled group: nothing moves), and one member joining the settled group. Homogeneous
(everyone subscribes to every topic) and heterogeneous (member i subscribes to the topics whose
index is not congruent to i mod 3) subscriptions. Best of --repeat runs, wall time.
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

from groupd.coordinator.core.consumer.assignors import ASSIGNORS, MemberSubscription, TopicMetadata  # noqa: E402


def _best(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    topic_ids = [uuid.UUID(int=i + 1) for i in range(args.topics)]
    topics = {t: TopicMetadata(t, f"topic-{i}", args.partitions) for i, t in enumerate(topic_ids)}
    subscriptions = {
        "homogeneous": lambda i: frozenset(topic_ids),
        "heterogeneous": lambda i: frozenset(t for j, t in enumerate(topic_ids) if j % 3 != i % 3),
    }
    print(f"{args.members} members x {args.topics} topics x {args.partitions} partitions, "
          f"best of {args.repeat}")
    for shape, subscribed in subscriptions.items():
        fresh = {f"member-{i:05d}": MemberSubscription(subscribed(i)) for i in range(args.members)}
        for name, assign in ASSIGNORS.items():
            t_fresh, target = _best(lambda: assign(fresh, topics), args.repeat)
            settled = {m: MemberSubscription(s.subscribed_topic_ids, target[m]) for m, s in fresh.items()}
            t_settled, _ = _best(lambda: assign(settled, topics), args.repeat)
            joined = {**settled, "member-new": MemberSubscription(subscribed(args.members))}
            t_join, _ = _best(lambda: assign(joined, topics), args.repeat)
            print(f"{name:8} {shape:13}  fresh {t_fresh * 1000:8.1f} ms   settled {t_settled * 1000:8.1f} ms"
                  f"   one joins {t_join * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
