"""Cluster mode: how long a group is without a coordinator after its node dies, from a client's view.

    python bench/cluster_failover.py                     # 3 kills, cluster.lease.ms=2000
    python bench/cluster_failover.py --trials 5 --lease-ms 10000

Starts etcd (Debian's etcd-server) and two groupd nodes on one temporary data dir. Each trial: a
client commits to a group whose coordinator is the victim (FindCoordinator, then OffsetCommit, as
a Kafka client does, every 20 ms), the victim is killed (SIGKILL), and the client goes on until a
commit is acknowledged again, by the survivor. Printed per trial: when the survivor's FindCoordinator
first names itself (the partition is claimed), when the first commit is acknowledged (loaded and
serving), and that the offset acknowledged before the kill was read back. The victim is restarted
between trials. Expect about lease (etcd expires the lease) + lease (the new owner waits out the
deposed one's) + the load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from groupd.protocol import ErrorCode  # noqa: E402
from tests.cluster.test_cluster_etcd import commit, fetch  # noqa: E402
from tests.support.etcd_server import EtcdServer, cluster_node, coordinators  # noqa: E402
from tests.support.harness import wait_until  # noqa: E402

GROUPS = [f"bench-{i}" for i in range(64)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--lease-ms", type=int, default=2000)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="groupd-failover-")
    etcd = EtcdServer(os.path.join(tmp, "etcd")).start()
    settings = ("offsets.topic.num.partitions=16", "topics=t:4", f"cluster.lease.ms={args.lease_ms}")
    nodes = [cluster_node(os.path.join(tmp, "data"), etcd, n, *settings) for n in (1, 2)]
    claimed, served = [], []
    try:
        for node in nodes:
            node.start()
        for trial in range(args.trials):
            victim, survivor = nodes[trial % 2], nodes[1 - trial % 2]
            victim_id, survivor_id = 1 + trial % 2, 2 - trial % 2
            owner = wait_until(lambda: (o := coordinators(survivor.bootstrap, GROUPS)) and victim_id in o.values()
                               and o, 60 + 3 * args.lease_ms / 1000, "the cluster settles")
            group = next(g for g in GROUPS if owner[g] == victim_id)
            wait_until(lambda: commit(victim.bootstrap, group, {0: trial}) == {0: ErrorCode.none}, 30, "loaded")
            victim.stop(signal.SIGKILL)
            killed = time.monotonic()
            claim = None
            while True:
                at = coordinators(survivor.bootstrap, [group]).get(group)
                if at == survivor_id and claim is None:
                    claim = time.monotonic() - killed
                if at == survivor_id and commit(survivor.bootstrap, group, {1: trial}) == {1: ErrorCode.none}:
                    break
                time.sleep(0.02)
            serve = time.monotonic() - killed
            intact = fetch(survivor.bootstrap, group)[1].get(0) == trial
            claimed.append(claim)
            served.append(serve)
            print(f"trial {trial + 1}: node {victim_id} killed; node {survivor_id} claims the group's partition "
                  f"after {claim:.2f} s, acknowledges commits after {serve:.2f} s; offset before the kill "
                  f"{'read back' if intact else 'LOST'}", flush=True)
            victim.start(timeout=60)
    finally:
        for node in nodes:
            if node.alive():
                node.stop()
        etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"lease {args.lease_ms} ms, {args.trials} kills: claimed median {statistics.median(claimed):.2f} s, "
          f"serving median {statistics.median(served):.2f} s (max {max(served):.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
