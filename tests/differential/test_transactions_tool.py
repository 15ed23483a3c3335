"""Kafka's `kafka-transactions.sh` (org.apache.kafka.tools.TransactionsCommand, 4.3.1) and groupd's own
`groupd transactions` against Apache Kafka and against groupd, outputs compared.

On each server a confluent-kafka transactional producer commits one transaction ("tool-done") and
leaves another open ("tool-open", records on partition 0 of txn-tool); then the tools list and
describe the transactions, describe the partition's producers, abort the open transaction from the
partition's side (WriteTxnMarkers, as an operator ends a hanging one) and describe the producers
again. What legitimately differs is replaced before comparing: producer ids (by the transactional id
they serve), wall-clock times and durations; coordinator node ids stay (both servers are node 1).
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from collections import Counter

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.kafka import java_command
from tests.support.process import WireClient

from .diff import assert_same_output, on_both

pytestmark = pytest.mark.differential

TOPIC = "txn-tool"
TOOL = "org.apache.kafka.tools.TransactionsCommand"
KAFKA_TOOL, GROUPD_TOOL = "kafka-transactions", "groupd transactions"
BOTH = (KAFKA_TOOL, GROUPD_TOOL)
# name → (the tools that run it, the arguments both take), in this order on each server
COMMANDS: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "txn-list": (BOTH, ["list"]),
    "txn-list-long-running": (BOTH, ["list", "--duration-filter", "3600000"]),
    "txn-describe-open": (BOTH, ["describe", "--transactional-id", "tool-open"]),
    "txn-describe-done": (BOTH, ["describe", "--transactional-id", "tool-done"]),
    "txn-describe-unknown": (BOTH, ["describe", "--transactional-id", "tool-none"]),
    "txn-describe-producers": (BOTH, ["describe-producers", "--topic", TOPIC, "--partition", "0"]),
    "txn-describe-producers-idle": (BOTH, ["describe-producers", "--topic", TOPIC, "--partition", "1"]),
    "txn-abort-unknown-offset": (BOTH, ["abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "99"]),
    # each tool ends one of the two open transactions from the partition's side
    "txn-abort-kafka-tool": ((KAFKA_TOOL,), ["abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "0"]),
    "txn-abort-groupd-tool": ((GROUPD_TOOL,), ["abort", "--topic", TOPIC, "--partition", "2",
                                                "--start-offset", "0"]),
    "txn-describe-producers-after-abort": (BOTH, ["describe-producers", "--topic", TOPIC, "--partition", "0"]),
    "txn-describe-producers-after-groupd-abort": (BOTH, ["describe-producers", "--topic", TOPIC,
                                                         "--partition", "2"]),
}
# columns whose values differ by nature: producer ids named by their transactional id, times dropped
_VARIABLE = {"ProducerId": "PID", "LastTimestamp": "TIME", "CurrentTransactionStartTimeMs": "TIME",
             "TransactionDurationMs": "DURATION"}


def _transactions(bootstrap: str) -> list:
    """Commit tool-done (partition 1), leave tool-open (partition 0) and tool-open-2 (partition 2)
    open; the open producers are returned (kept alive: a closed one would end its transaction)."""
    from confluent_kafka import Producer

    with WireClient(bootstrap, timeout=60) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": TOPIC, "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": datetime.timedelta(seconds=60), "validate_only": False})
        assert r.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists), r
    opened = []
    for transactional_id, partition in (("tool-open", 0), ("tool-done", 1), ("tool-open-2", 2)):
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                      "transaction.timeout.ms": 600000})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(2):
            p.produce(TOPIC, value=f"{transactional_id}-{i}".encode(), partition=partition)
        assert p.flush(60) == 0
        if transactional_id == "tool-done":
            p.commit_transaction(60)
        else:
            opened.append(p)
    return opened


def run_kafka_tool(bootstrap: str, args: list[str]) -> list[str]:
    out = subprocess.run(java_command(TOOL, "--bootstrap-server", bootstrap, *args), capture_output=True,
                         text=True, timeout=180)
    return [f"rc={out.returncode}"] + out.stdout.splitlines() + [
        "stderr: " + line for line in out.stderr.splitlines() if not line.startswith(("\tat ", "SLF4J"))]


def run_groupd_tool(bootstrap: str, args: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "transactions", *args, "--bootstrap",
                          bootstrap, "--json"], capture_output=True, text=True, timeout=60)
    return [f"rc={out.returncode}", out.stdout.strip()] + ["stderr: " + line for line in out.stderr.splitlines()]


def normalise_table(lines: list[str], pids: dict[str, str]) -> Counter:
    """kafka-transactions.sh's tables (tab-separated, padded): the variable columns replaced, rows
    counted (their order is free)."""
    out: Counter = Counter()
    header: list[str] | None = None
    for line in lines:
        cells = [c.strip() for c in line.rstrip("\t").split("\t")]
        if cells[0] in ("TransactionalId", "CoordinatorId", "ProducerId"):
            header = cells
        elif header is not None and len(cells) == len(header):
            if header[0] == "TransactionalId" and not _ours(cells[0]):
                continue
            cells = [_variable(column, cell, pids) for column, cell in zip(header, cells)]
        line = " | ".join(cells)
        line = re.sub(r"producerId=(\d+)", lambda m: "producerId=" + _pid(m.group(1), pids), line)
        if line:
            out[line] += 1
    return out


def normalise_json(lines: list[str], pids: dict[str, str]) -> Counter:
    """`groupd transactions --json`: the same replacements, by key."""
    out: Counter = Counter()
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            out[re.sub(r"producer \d+", "producer PID", line)] += 1
            continue
        out[json.dumps(_json(data, pids), sort_keys=True)] += 1
    return out


def _ours(transactional_id: str) -> bool:
    """A transactional id of this test's: the reference broker lives for the whole session, and other
    tests' ids (the differential corpus's) are listed too."""
    return transactional_id.startswith("tool-")


def _json(data, pids):
    if isinstance(data, list):
        return sorted((_json(d, pids) for d in data
                       if not (isinstance(d, dict) and "transactional_id" in d and not _ours(d["transactional_id"]))),
                      key=json.dumps)
    if isinstance(data, dict):
        keys = {"producer_id": "ProducerId", "last_timestamp": "LastTimestamp", "start_time_ms":
                "CurrentTransactionStartTimeMs", "duration_ms": "TransactionDurationMs"}
        return {k: _variable(keys[k], v, pids) if k in keys and v is not None else _json(v, pids)
                for k, v in data.items()}
    return data


def _variable(column: str, value, pids: dict[str, str]):
    kind = _VARIABLE.get(column)
    if kind is None or value == "None":
        return value
    return _pid(str(value), pids) if kind == "PID" else kind


def _pid(value: str, pids: dict[str, str]) -> str:
    return pids.get(value, "PID?")


def _producer_ids(bootstrap: str) -> dict[str, str]:
    """{producer id: the transactional id it serves}, as the server's DescribeTransactions says."""
    names = ("tool-open", "tool-done", "tool-open-2")
    with WireClient(bootstrap, timeout=60) as c:
        r = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": list(names)})
    return {str(s.producer_id): f"PID({s.transactional_id})" for s in r.transaction_states}


def run_all(server) -> dict[tuple[str, str], Counter]:
    """{(command, tool): normalised output} of one server."""
    opened = _transactions(server.bootstrap)  # noqa: F841 (kept open while the tools run)
    pids = _producer_ids(server.bootstrap)
    out = {}
    for name, (tools, args) in COMMANDS.items():
        if KAFKA_TOOL in tools:
            out[name, KAFKA_TOOL] = normalise_table(run_kafka_tool(server.bootstrap, args), pids)
        if GROUPD_TOOL in tools:
            out[name, GROUPD_TOOL] = normalise_json(run_groupd_tool(server.bootstrap, args), pids)
    return out


@pytest.fixture(scope="module")
def outputs(servers):
    """Per server, {(command, tool): normalised output}."""
    return on_both(run_all, *servers)


@pytest.mark.parametrize("name,tool", [(n, t) for n, (tools, _) in COMMANDS.items() for t in tools])
def test_transactions_tool(name, tool, outputs):
    """kafka-transactions.sh, and groupd's own command (a Kafka client too), print the same against
    Kafka and against groupd."""
    kafka, groupd = (o[name, tool] for o in outputs)
    assert_same_output(name, f"{tool} {' '.join(COMMANDS[name][1])}", kafka, groupd)
