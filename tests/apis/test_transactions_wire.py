"""The transaction coordinator over the wire (issue 23): FindCoordinator key type 1, InitProducerId
with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, ListTransactions and
DescribeTransactions against a real `groupd serve`, and its state across a restart (SIGTERM and
kill -9: every acknowledged transition is in `__transaction_state`)."""

from __future__ import annotations

import datetime
import json
import signal
import time

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.process import GroupdProcess, WireClient
from tests.support.process import groupd_cli as groupd

E = ErrorCode
MINUTE = datetime.timedelta(minutes=1)


@pytest.fixture
def server(tmp_path):
    # "groupd ready": the transaction log is loaded before the listeners open
    s = GroupdProcess(str(tmp_path), "topics=t:2", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200").start()
    yield s
    if s.alive():
        assert s.stop() == 0, s.log()


def init(c: WireClient, txn: str = "tx", version: int = 4, timeout=MINUTE, expected=(-1, -1)):
    return c.request(ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": txn, "transaction_timeout": timeout,
                                                        "producer_id": expected[0], "producer_epoch": expected[1]})


def add(c: WireClient, pid: int, epoch: int, txn: str = "tx", parts=(("t", 0),), version: int = 3):
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end(c: WireClient, pid: int, epoch: int, commit: bool, txn: str = "tx", version: int = 3):
    return c.request(ApiKey.END_TXN, version, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                                               "committed": commit}).error_code


def describe(c: WireClient, txn: str = "tx"):
    (state,) = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}).transaction_states
    return state


def state(c: WireClient, txn: str = "tx") -> str | None:
    """Through ListTransactions (DescribeTransactions of an Empty one carries start time -1, which the
    test client's decoder refuses)."""
    listed = c.request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
    return next((t.transaction_state for t in listed.transaction_states if t.transactional_id == txn), None)


def wait_state(c: WireClient, label: str, txn: str = "tx") -> None:
    deadline = time.monotonic() + 30
    while state(c, txn) != label:
        assert time.monotonic() < deadline, state(c, txn)
        time.sleep(0.05)


def test_find_coordinator_key_type_1_answers_this_node(server):
    with WireClient(server.bootstrap) as c:
        r = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx", "other"]})
        assert [(k.error_code, k.port) for k in r.coordinators] == [(E.none, server.port)] * 2
        r = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
        assert (r.error_code, r.port) == (E.none, server.port)


def test_a_committed_transaction_end_to_end_on_the_coordinator(server):
    with WireClient(server.bootstrap) as c:
        assert init(c, timeout=datetime.timedelta(milliseconds=900_001)).error_code == E.invalid_transaction_timeout
        r = init(c)
        assert r.error_code == E.none and r.producer_epoch == 0
        pid = r.producer_id
        assert end(c, pid, 0, True) == E.invalid_txn_state  # nothing to end
        assert add(c, pid, 0, parts=[("t", 0), ("nope", 0)]) == {("t", 0): E.operation_not_attempted,
                                                                  ("nope", 0): E.unknown_topic_or_partition}
        assert add(c, pid + 1, 0) == {("t", 0): E.invalid_producer_id_mapping}
        assert add(c, pid, 1) == {("t", 0): E.producer_fenced}
        assert add(c, pid, 1, version=1) == {("t", 0): E.invalid_producer_epoch}
        assert add(c, pid, 0, parts=[("t", 0), ("t", 1)]) == {("t", 0): E.none, ("t", 1): E.none}
        r = c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                     "producer_epoch": 0, "group_id": "g"})
        assert r.error_code == E.none
        d = describe(c)
        assert (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch) == (E.none, "Ongoing", pid, 0)
        assert {t.topic: list(t.partitions) for t in d.topics}.keys() == {"t", "__consumer_offsets"}
        listed = c.request(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing", "Bogus"],
                                                         "producer_id_filters": [], "duration_filter": -1})
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [("tx", "Ongoing")]
        assert list(listed.unknown_state_filters) == ["Bogus"]
        assert end(c, pid, 0, True) == E.none
        wait_state(c, "CompleteCommit")
        assert end(c, pid, 0, True) == E.none  # a retry
        assert end(c, pid, 0, False) == E.invalid_txn_state
        assert describe(c, "unknown").error_code == E.transactional_id_not_found
        assert describe(c, "").error_code == E.invalid_request


def test_init_fences_an_ongoing_transaction(server):
    with WireClient(server.bootstrap) as c:
        pid = init(c).producer_id
        assert add(c, pid, 0) == {("t", 0): E.none}
        deadline = time.monotonic() + 30
        while (r := init(c)).error_code == E.concurrent_transactions:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid, 2)
        assert state(c) == "Empty"
        assert end(c, pid, 0, True) == E.producer_fenced
        assert end(c, pid, 0, True, version=1) == E.invalid_producer_epoch


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(server):
    with WireClient(server.bootstrap) as c:
        pid = init(c, timeout=datetime.timedelta(milliseconds=300)).producer_id
        assert add(c, pid, 0) == {("t", 0): E.none}
        wait_state(c, "CompleteAbort")
        assert describe(c).producer_epoch == 1
        assert end(c, pid, 0, True) == E.producer_fenced


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_state_survives_a_restart(server, sig):
    with WireClient(server.bootstrap) as c:
        committed = init(c, "done").producer_id
        assert add(c, committed, 0, "done") == {("t", 0): E.none}
        assert end(c, committed, 0, True, "done") == E.none
        wait_state(c, "CompleteCommit", "done")
        pid = init(c).producer_id
        assert add(c, pid, 0) == {("t", 0): E.none}
    server.stop(sig)
    server.start()
    with WireClient(server.bootstrap) as c:
        d = describe(c)
        assert (d.transaction_state, d.producer_id, d.producer_epoch, [t.topic for t in d.topics]) == \
            ("Ongoing", pid, 0, ["t"])
        assert describe(c, "done").transaction_state == "CompleteCommit"
        assert end(c, pid, 0, False) == E.none
        wait_state(c, "CompleteAbort")
        r = init(c)
        assert (r.producer_id, r.producer_epoch) == (pid, 1)
        fresh = init(c, "new")
        assert fresh.producer_id not in (pid, committed)  # ids are never handed out twice


def test_transaction_state_is_never_a_data_topic(server):
    """Its directories are the transaction log's: CreateTopics finds it there, Metadata answers it as
    the internal topic it is once a transactional id was used (as Kafka), never auto-creating it."""
    with WireClient(server.bootstrap) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "__transaction_state", "num_partitions": 1,
                                                            "replication_factor": 1, "assignments": [], "configs": []}],
                                                "timeout": MINUTE, "validate_only": False})
        assert r.topics[0].error_code == E.topic_already_exists
        assert init(c).error_code == E.none  # the coordinator's log is untouched
        m = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "__transaction_state", "topic_id": None}],
                                            "allow_auto_topic_creation": True,
                                            "include_topic_authorized_operations": False})
        (topic,) = m.topics
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (E.none, True, 50)
        assert {p.leader_id for p in topic.partitions} == {m.brokers[0].node_id}
        everything = c.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False})
        assert {t.name: t.is_internal for t in everything.topics if t.name.startswith("__")} == {
            "__consumer_offsets": True, "__transaction_state": True}


def test_groupd_transactions_list_and_describe(server):
    """The CLI: `groupd transactions list|describe` (an Empty transaction has no start time)."""
    with WireClient(server.bootstrap) as c:
        pid = init(c, "cli-open").producer_id
        assert add(c, pid, 0, "cli-open", parts=[("t", 1)]) == {("t", 1): E.none}
        empty = init(c, "cli-empty").producer_id
    b = ["--bootstrap", server.bootstrap]
    listed = groupd("transactions", "list", "--state", "Ongoing", *b, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [{"transactional_id": "cli-open", "coordinator": 1, "producer_id": pid,
                                          "state": "Ongoing"}]
    by_producer = groupd("transactions", "list", "--producer-id", str(empty), *b, "--json")
    assert [t["transactional_id"] for t in json.loads(by_producer.stdout)] == ["cli-empty"]
    opened = json.loads(groupd("transactions", "describe", "--transactional-id", "cli-open", *b, "--json").stdout)
    assert (opened["state"], opened["partitions"], opened["timeout_ms"]) == ("Ongoing", ["t-1"], 60_000)
    assert opened["start_time_ms"] is not None and opened["duration_ms"] >= 0
    described = groupd("transactions", "describe", "--transactional-id", "cli-empty", *b, "--json")
    assert described.returncode == 0, described.stderr
    assert {k: json.loads(described.stdout)[k] for k in ("state", "start_time_ms", "duration_ms", "partitions")} == \
        {"state": "Empty", "start_time_ms": None, "duration_ms": None, "partitions": []}
    missing = groupd("transactions", "describe", "--transactional-id", "cli-nobody", *b)
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    text = groupd("transactions", "list", *b)
    assert text.returncode == 0 and text.stdout.split("\n")[0].split() == [
        "TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
