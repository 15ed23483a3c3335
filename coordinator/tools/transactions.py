"""`groupd transactions list|describe`: a running groupd's transactions through ListTransactions and
DescribeTransactions (Kafka's `kafka-transactions.sh list|describe`, which works against groupd too).

DescribeTransactions is read by hand: an Empty transaction's start time is -1, a timestamp the
codec library refuses to decode (Kafka's admin client turns it into "no start time")."""

from __future__ import annotations

import argparse
import struct
import time
from typing import Any

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage.wire import Reader

from .client import AdminConnection, check
from .commands import common, report
from .render import table

LIST_V, DESCRIBE_V = 1, 0
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    txns = sub.add_parser("transactions", help="list and describe the transactions of a running groupd")
    txns_sub = txns.add_subparsers(dest="transactions_command", required=True)
    listing = txns_sub.add_parser("list", help="transactional ids, producer ids and states (ListTransactions)")
    listing.add_argument("--state", action="append", choices=STATES, default=[], help="only these states (repeatable)")
    listing.add_argument("--producer-id", action="append", type=int, default=[], help="only these producer ids")
    listing.add_argument("--duration-ms", type=int, default=-1,
                         help="only transactions running longer than this (ms)")
    common(listing)
    describe = txns_sub.add_parser("describe", help="transactions' state, producer, timeout and partitions "
                                                    "(DescribeTransactions)")
    describe.add_argument("transactional_id", nargs="+")
    common(describe)


def list_transactions(conn: AdminConnection, args: argparse.Namespace) -> list[dict]:
    r = conn.request(ApiKey.LIST_TRANSACTIONS, LIST_V, {"state_filters": args.state,
                                                        "producer_id_filters": args.producer_id,
                                                        "duration_filter": args.duration_ms})
    check(r.error_code, "ListTransactions")
    return sorted(({"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                    "state": t.transaction_state} for t in r.transaction_states), key=lambda t: t["transactional_id"])


def describe_transactions(conn: AdminConnection, ids: list[str]) -> list[dict]:
    cid, data = conn.frame(ApiKey.DESCRIBE_TRANSACTIONS, DESCRIBE_V, {"transactional_ids": ids})
    conn.send_raw(data)
    r = Reader(conn.read_frame())
    if r.i32() != cid:
        raise ConnectionError("correlation id mismatch")
    r.skip_tags()  # the response header (flexible)
    r.i32()  # throttle time
    out = []
    for _ in range(r.ccount()):
        error, txn_id, state = r.i16(), r.cstr(), r.cstr()
        timeout_ms, start_ms, producer_id, epoch = r.unpack(struct.Struct(">iqqh"))
        partitions = []
        for _ in range(r.ccount()):
            topic = r.cstr()
            partitions += [f"{topic}-{p}" for p in r.int32s(r.ccount())]
            r.skip_tags()
        r.skip_tags()
        out.append({"transactional_id": txn_id, "error": _error_name(error), "state": state or None,
                    "producer_id": producer_id, "producer_epoch": epoch, "timeout_ms": timeout_ms,
                    "start_ms": start_ms if start_ms >= 0 else None, "partitions": partitions})
    return out


def _error_name(code: int) -> str | None:
    return None if code == 0 else ErrorCode(code).name.upper()


def run(args: argparse.Namespace) -> int:
    def work(bootstrap: str, security) -> tuple[int, Any, str]:
        with AdminConnection(bootstrap, timeout=args.timeout, security=security) as conn:
            if args.transactions_command == "list":
                rows = list_transactions(conn, args)
                return 0, rows, table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"],
                                      [[t["transactional_id"], t["producer_id"], t["state"]] for t in rows]) \
                    if rows else "no transactions"
            rows = describe_transactions(conn, list(dict.fromkeys(args.transactional_id)))
        now = int(time.time() * 1000)
        text = table(["TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "DURATION-MS", "PARTITIONS"],
                     [[t["transactional_id"], t["state"] or f"Error: {t['error']}", t["producer_id"],
                       t["producer_epoch"], t["timeout_ms"],
                       None if t["start_ms"] is None else now - t["start_ms"], ",".join(t["partitions"]) or None]
                      for t in rows])
        return (1 if any(t["error"] for t in rows) else 0), rows, text

    return report(args, work)
