"""`groupd transactions list|describe|describe-producers|abort`: a running groupd's (or any Kafka
cluster's) transactions, as Kafka's `kafka-transactions.sh` shows them (the same columns), through
ListTransactions (every broker), DescribeTransactions (the transactional id's coordinator), DescribeProducers and
WriteTxnMarkers (the partition's leader). `abort` ends a hanging transaction on one partition the
way Kafka's tool does: an ABORT marker for the producer whose open transaction starts at
`--start-offset` (or for the producer id, epoch and coordinator epoch given)."""

from __future__ import annotations

import argparse
import struct
import time
from typing import Any

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage.wire import Reader

from .client import (
    DESCRIBE_PRODUCERS_V,
    DESCRIBE_TRANSACTIONS_V,
    LIST_TRANSACTIONS_V,
    TRANSACTION_KEY,
    WRITE_TXN_MARKERS_V,
    AdminConnection,
    AdminError,
    Brokers,
    check,
)
from .commands import common, report
from .render import table

# Kafka's TransactionState names, as ListTransactions' state filter takes them
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
          "PrepareEpochFence", "Dead")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    txns = sub.add_parser("transactions", help="list, describe and abort transactions of a running groupd")
    txns_sub = txns.add_subparsers(dest="transactions_command", required=True)
    listing = txns_sub.add_parser("list", help="every transactional id: coordinator, producer id, state "
                                              "(ListTransactions)")
    listing.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                         help="only transactions open longer than MS milliseconds (default: all)")
    listing.add_argument("--state", action="append", default=[], choices=STATES, metavar="STATE",
                         help="only transactions in this state (repeatable)")
    listing.add_argument("--producer-id", action="append", type=int, default=[], metavar="ID",
                         help="only transactions of this producer id (repeatable)")
    common(listing)
    describe = txns_sub.add_parser("describe", help="one transactional id's state, epoch, timeout and partitions "
                                                    "(DescribeTransactions)")
    describe.add_argument("--transactional-id", required=True, metavar="ID")
    common(describe)
    producers = txns_sub.add_parser("describe-producers", help="the active producers of a partition and their "
                                                               "open transactions (DescribeProducers)")
    abort = txns_sub.add_parser("abort", help="abort a hanging transaction on one partition (WriteTxnMarkers)")
    for sp in (producers, abort):
        sp.add_argument("--topic", required=True)
        sp.add_argument("--partition", required=True, type=int)
    abort.add_argument("--start-offset", type=int, metavar="OFFSET",
                       help="the first offset of the open transaction to abort (describe-producers shows it)")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    common(producers)
    common(abort)


def list_transactions(cluster: Brokers, states: list[str], producer_ids: list[int],
                      duration_ms: int) -> list[dict[str, Any]]:
    rows = []
    for node_id, conn in _by_node(cluster):
        r = conn.request(ApiKey.LIST_TRANSACTIONS, LIST_TRANSACTIONS_V, {
            "state_filters": states, "producer_id_filters": producer_ids, "duration_filter": duration_ms})
        check(r.error_code, "ListTransactions")
        rows += [{"transactional_id": t.transactional_id, "coordinator": node_id, "producer_id": t.producer_id,
                  "state": t.transaction_state} for t in r.transaction_states]
    return sorted(rows, key=lambda row: row["transactional_id"])


def _by_node(cluster: Brokers):
    if len(cluster.addresses) <= 1:
        return [(next(iter(cluster.addresses), -1), cluster.bootstrap)]
    return [(node_id, cluster._at(address)) for node_id, address in sorted(cluster.addresses.items())]


def describe_transaction(cluster: Brokers, transactional_id: str) -> dict[str, Any]:
    node_id, conn = cluster.find_coordinator(transactional_id, TRANSACTION_KEY)
    state = _describe(conn, transactional_id)
    check(state["error"], f"DescribeTransactions of transactional id {transactional_id!r}")
    start_ms = state["start_ms"]
    return {"coordinator": node_id, "transactional_id": transactional_id, "producer_id": state["producer_id"],
            "producer_epoch": state["producer_epoch"], "state": state["state"], "timeout_ms": state["timeout_ms"],
            "start_time_ms": start_ms, "duration_ms": None if start_ms is None else int(time.time() * 1000) - start_ms,
            "partitions": state["partitions"]}


def _describe(conn: AdminConnection, transactional_id: str) -> dict[str, Any]:
    """DescribeTransactions v0, read by hand: a transaction with none open (Empty, or never begun)
    has start time -1, a timestamp the codec library refuses to decode."""
    cid, data = conn.frame(ApiKey.DESCRIBE_TRANSACTIONS, DESCRIBE_TRANSACTIONS_V,
                           {"transactional_ids": [transactional_id]})
    conn.send_raw(data)
    r = Reader(conn.read_frame())
    if r.i32() != cid:
        raise AdminError("DescribeTransactions: the answer's correlation id is not the request's")
    r.skip_tags()  # the response header (flexible)
    r.i32()  # throttle time
    if r.ccount() != 1:
        raise AdminError("DescribeTransactions: not one answer for one transactional id")
    error, _, state = ErrorCode(r.i16()), r.cstr(), r.cstr()
    timeout_ms, start_ms, producer_id, epoch = r.unpack(_TIMES)
    partitions = []
    for _ in range(r.ccount()):
        topic = r.cstr()
        partitions += [f"{topic}-{p}" for p in r.int32s(r.ccount())]
        r.skip_tags()
    return {"error": error, "state": state, "timeout_ms": timeout_ms, "start_ms": start_ms if start_ms >= 0 else None,
            "producer_id": producer_id, "producer_epoch": epoch, "partitions": partitions}


_TIMES = struct.Struct(">iqqh")  # timeout ms, start time ms, producer id, producer epoch


def describe_producers(cluster: Brokers, topic: str, partition: int) -> list[dict[str, Any]]:
    r = cluster.leader(topic, partition).request(ApiKey.DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_V, {
        "topics": [{"name": topic, "partition_indexes": [partition]}]})
    p = r.topics[0].partitions[0]
    check(p.error_code, f"DescribeProducers of {topic}-{partition}", p.error_message)
    return [{"producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
             "coordinator_epoch": s.coordinator_epoch, "last_sequence": s.last_sequence,
             "last_timestamp": s.last_timestamp,
             "transaction_start_offset": s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None}
            for s in p.active_producers]


def abort_transaction(cluster: Brokers, args: argparse.Namespace) -> dict[str, Any]:
    """An ABORT marker on the partition, for the producer found as Kafka's tool finds it."""
    topic, partition = args.topic, args.partition
    if args.start_offset is not None:
        found = [s for s in describe_producers(cluster, topic, partition)
                 if s["transaction_start_offset"] == args.start_offset]
        if not found:
            raise AdminError(f"could not find any open transaction starting at offset {args.start_offset} "
                             f"on partition {topic}-{partition}")
        producer_id, epoch, coordinator_epoch = (found[0]["producer_id"], found[0]["producer_epoch"],
                                                 found[0]["coordinator_epoch"])
    elif None in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        raise AdminError("the transaction to abort is given by --start-offset, or by --producer-id, "
                         "--producer-epoch and --coordinator-epoch")
    else:
        producer_id, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    coordinator_epoch = max(coordinator_epoch, 0)  # -1: never ended one; 0 is at most any real epoch (Kafka's)
    r = cluster.leader(topic, partition).request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V, {"markers": [{
        "producer_id": producer_id, "producer_epoch": epoch, "transaction_result": False,
        "coordinator_epoch": coordinator_epoch, "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
    error = r.markers[0].topics[0].partitions[0].error_code
    check(error, f"aborting the transaction of producer {producer_id} on {topic}-{partition}")
    return {"topic": topic, "partition": partition, "producer_id": producer_id, "producer_epoch": epoch,
            "coordinator_epoch": coordinator_epoch, "aborted": error is ErrorCode.none}


def _text(command: str, data: Any) -> str:
    if command == "list":
        return table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                     [[t["transactional_id"], t["coordinator"], t["producer_id"], t["state"]] for t in data])
    if command == "describe":
        return table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                      "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"],
                     [[data["coordinator"], data["transactional_id"], data["producer_id"], data["producer_epoch"],
                       data["state"], data["timeout_ms"], _none(data["start_time_ms"]), _none(data["duration_ms"]),
                       ",".join(data["partitions"])]])
    if command == "describe-producers":
        return table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"],
                     [[s["producer_id"], s["producer_epoch"], s["coordinator_epoch"], s["last_sequence"],
                       s["last_timestamp"], _none(s["transaction_start_offset"])] for s in data])
    return (f"aborted the transaction of producer {data['producer_id']} (epoch {data['producer_epoch']}) "
            f"on {data['topic']}-{data['partition']}")


def _none(value: Any) -> Any:
    return "None" if value is None else value  # kafka-transactions.sh's spelling of an absent value


def run(args: argparse.Namespace) -> int:
    command = args.transactions_command

    def work(bootstrap: str, security) -> tuple[int, Any, str]:
        with Brokers(bootstrap, args.timeout, security) as cluster:
            if command == "list":
                data: Any = list_transactions(cluster, args.state, args.producer_id, args.duration_filter)
            elif command == "describe":
                data = describe_transaction(cluster, args.transactional_id)
            elif command == "describe-producers":
                data = describe_producers(cluster, args.topic, args.partition)
            else:
                data = abort_transaction(cluster, args)
        return 0, data, _text(command, data)

    return report(args, work)

