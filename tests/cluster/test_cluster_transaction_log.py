"""`__transaction_state` compacted in cluster mode (storage/stamped_compaction.py) and read by
`groupd log`: many transactions of one transactional id over real nodes and etcd; the owner's cleaner
shrinks the partition; its state loads the same at the other node when the owner stops and again at
the owner when it comes back (the compacted segments are what they load); the producer carries on
from it; `groupd log dump --topic __transaction_state` shows the id's records, stamped, and `groupd log
verify` checks the partition."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from groupd.coordinator.core.partitioning import partition_for
from groupd.coordinator.tools.client import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.cluster.test_cluster_etcd import etcd, spread, two_nodes  # noqa: F401 (the fixture)
from tests.cluster.test_cluster_transactions import coordinator_of, transactional_id_on
from tests.support.harness import wait_until

pytestmark = pytest.mark.clients

TRANSACTIONS = 60
COMPACTED = re.compile(r"transaction log compacted directory=\S*__transaction_state-(\d+) "
                       r"records=(\d+)->(\d+) bytes=(\d+)->(\d+)")


@pytest.fixture
def nodes(tmp_path, etcd):  # noqa: F811
    yield from two_nodes(tmp_path, etcd, "records.plane=disk", "transaction.state.log.segment.bytes=2048",
                         "log.cleaner.backoff.ms=300")


def described(bootstrap: str, txn_id: str) -> tuple[str, int, int] | None:
    """(state, producer id, epoch) as `bootstrap` answers DescribeTransactions; None while it does not
    coordinate the id (or has not loaded it)."""
    try:
        with AdminConnection(bootstrap, "cluster-txn-log-test") as c:
            (s,) = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]}).transaction_states
    except OSError:
        return None
    return (s.transaction_state, s.producer_id, s.producer_epoch) if s.error_code == ErrorCode.none else None


def complete(bootstrap: str, txn_id: str) -> tuple[str, int, int] | None:
    """`described` once CompleteCommit (a commit's markers are written after commit_transaction returns)."""
    found = described(bootstrap, txn_id)
    return found if found is not None and found[0] == "CompleteCommit" else None


def groupd_log(data_dir: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", *args, "--data-dir", data_dir],
                          capture_output=True, text=True, timeout=120)


def test_many_transactions_compact_and_load_the_same_state_after_restarts(nodes, tmp_path):
    spread(nodes)
    txn_id = transactional_id_on(nodes, 1, "compacted")
    tp = partition_for(txn_id, 50)
    p = Producer({"bootstrap.servers": nodes[0].bootstrap, "transactional.id": txn_id})
    p.init_transactions(60)
    for i in range(TRANSACTIONS):
        p.begin_transaction()
        p.produce("t", f"v{i}".encode(), partition=i % 4)
        p.commit_transaction(60)
    del p

    def compacted():
        return [m for m in COMPACTED.finditer(nodes[0].log()) if int(m.group(1)) == tp] or None
    runs = wait_until(compacted, 90, f"__transaction_state-{tp} compacted at node 1")
    _, records_before, records_after, bytes_before, bytes_after = map(int, runs[0].groups())
    assert records_after < records_before and bytes_after < bytes_before
    state = wait_until(lambda: complete(nodes[0].bootstrap, txn_id), 60, "the last transaction complete")

    assert nodes[0].stop() == 0, nodes[0].log()  # node 2 takes the partition and loads it
    wait_until(lambda: coordinator_of(nodes[1].bootstrap, txn_id) == 2, 60, "node 2 coordinates the id")
    assert wait_until(lambda: described(nodes[1].bootstrap, txn_id), 60, "node 2 loaded the id") == state
    nodes[0].start()  # and back to node 1, which loads it again
    wait_until(lambda: all(coordinator_of(n.bootstrap, txn_id) == 1 for n in nodes), 60, "node 1 has it again")
    assert wait_until(lambda: described(nodes[0].bootstrap, txn_id), 60, "node 1 loaded the id") == state

    again = Producer({"bootstrap.servers": nodes[0].bootstrap, "transactional.id": txn_id})
    again.init_transactions(60)  # the loaded epoch, bumped
    again.begin_transaction()
    again.produce("t", b"after", partition=0)
    again.commit_transaction(60)
    bumped = ("CompleteCommit", state[1], state[2] + 1)
    assert wait_until(lambda: complete(nodes[0].bootstrap, txn_id), 60, "the next transaction complete") == bumped
    del again
    for node in nodes:
        assert node.stop() == 0, node.log()

    data = str(tmp_path / "data")
    dumped = groupd_log(data, "dump", "--topic", "__transaction_state", "--partition", str(tp))
    assert dumped.returncode == 0, dumped.stderr
    lines = [json.loads(line) for line in dumped.stdout.splitlines()]
    ours = [x for x in lines if x.get("transactional_id") == txn_id]
    assert ours and all(x["stamp"] > 0 for x in ours)
    counted = [x for x in ours if x["counted"]]
    assert (counted[-1]["state"], counted[-1]["producer_id"], counted[-1]["producer_epoch"]) == bumped
    assert len(ours) < 3 * TRANSACTIONS  # Ongoing, PrepareCommit, CompleteCommit per transaction, compacted
    verified = groupd_log(data, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert re.search(rf"partition __transaction_state-{tp}: OK ", verified.stdout), verified.stdout
    assert os.path.isdir(os.path.join(data, f"__transaction_state-{tp}"))
