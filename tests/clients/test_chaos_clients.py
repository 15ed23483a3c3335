"""Each injected fault as the Java consumer (kafka-clients 4.x, tests/clients/java) lives through it:
the revoke and the new assignment after a forced rebalance or expiry, the rejoin after a heartbeat's
REBALANCE_IN_PROGRESS, the retried SyncGroup after one held past the request timeout, and the
coordinator rediscovered after a failover. (confluent-kafka goes through the same faults in
examples/rebalance_app, run by tests/process/test_examples_chaos.py.) The server is the pytest plugin's."""

from __future__ import annotations

import re
import urllib.request

import pytest
from confluent_kafka import Producer

from groupd.coordinator.pytest_plugin import GroupdServer, free_port
from groupd.protocol.apis import ApiKey
from tests.support.harness import wait_until
from tests.support.process import WireClient

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    metrics_port = free_port()
    s = GroupdServer(str(tmp_path_factory.mktemp("chaos-clients")), {
        "topics": "t2:2", "metrics.listener": f"http://127.0.0.1:{metrics_port}/metrics"}).start()
    s.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    yield s
    assert s.stop() == 0, s.log()


def requests_answered(server, api: str, error: str) -> float:
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    match = re.search(rf'^groupd_requests_total{{api="{api}",error="{error}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


@pytest.fixture
def java(server, clients):
    def start(group: str, **opts):
        classic = {} if opts.get("group.protocol") == "consumer" else {"session.timeout.ms": 6000,
                                                                       "heartbeat.interval.ms": 500}
        member = clients("java", "subscribe", server.bootstrap_servers, topic="t2", group=group, seconds=0,
                         **{**classic, **opts})
        member.wait_for(lambda e: e["event"] == "assigned", timeout=90)
        return member

    yield start
    server.clear_faults()


def assignments(member) -> list[dict]:
    return [e for e in member.events if e["event"] == "assigned"]


def test_a_forced_rebalance_revokes_and_assigns_again_in_a_new_generation(server, java):
    member = java("chaos-rebalance")
    server.rebalance("chaos-rebalance")
    member.wait_for(lambda e: e["event"] == "revoked")
    again = member.wait_for(lambda e: e["event"] == "assigned" and e["generation"] == 2)
    assert sorted(again["assignment"]) == ["t2-0", "t2-1"]
    assert member.errors() == []


def test_an_expired_member_loses_its_partitions_and_rejoins(server, java):
    member = java("chaos-expire")
    first = assignments(member)[0]["member_id"]
    server.expire("chaos-expire")
    member.wait_for(lambda e: e["event"] in ("lost", "revoked"))
    again = member.wait_for(lambda e: e["event"] == "assigned" and e["member_id"] != first)
    assert sorted(again["assignment"]) == ["t2-0", "t2-1"]


def test_a_heartbeat_answered_rebalance_in_progress_makes_the_member_rejoin(server, java):
    member = java("chaos-heartbeat")
    server.error("Heartbeat", "REBALANCE_IN_PROGRESS", "chaos-heartbeat", count=1)
    member.wait_for(lambda e: e["event"] == "revoked")
    member.wait_for(lambda e: e["event"] == "assigned" and e["generation"] == 2)
    assert server.faults() == []


def test_a_sync_group_held_past_the_request_timeout_is_retried(server, java):
    member = java("chaos-sync", **{"request.timeout.ms": 2000})
    server.delay("SyncGroup", 5000, "chaos-sync", count=1)
    server.rebalance("chaos-sync")
    # the held SyncGroup times out on the client, which rejoins; its next SyncGroup is answered at once
    again = member.wait_for(lambda e: e["event"] == "assigned" and e["generation"] >= 3, timeout=90)
    assert sorted(again["assignment"]) == ["t2-0", "t2-1"]
    assert server.faults() == []


def test_after_a_coordinator_failover_the_member_finds_it_again_and_commits(server, java):
    member = java("chaos-move", commit="true")
    member.wait_for(lambda e: e["event"] == "committed")
    found_before = requests_answered(server, "find_coordinator", "none")
    server.move_coordinator("chaos-move", seconds=3)
    wait_until(lambda: requests_answered(server, "heartbeat", "not_coordinator") > 0, what="NOT_COORDINATOR")
    wait_until(lambda: not server.faults(), what="the failover's end")
    producer = Producer({"bootstrap.servers": server.bootstrap_servers})
    for i in range(3):
        producer.produce("t2", f"after {i}".encode(), partition=0)
    assert producer.flush(30) == 0
    member.wait_for(lambda e: e["event"] == "committed" and e["offsets"]["t2-0"]["offset"] == 3)
    assert requests_answered(server, "find_coordinator", "none") > found_before  # rediscovered
    assert member.errors() == []


def test_a_consumer_protocol_member_expired_is_fenced_and_rejoins(server, java):
    member = java("chaos-kip848", **{"group.protocol": "consumer"})
    server.expire("chaos-kip848")
    member.wait_for(lambda e: e["event"] in ("lost", "revoked"))
    again = member.wait_for(lambda e: e["event"] == "assigned" and len(assignments(member)) >= 2)
    assert sorted(again["assignment"]) == ["t2-0", "t2-1"]
    assert "member fenced group=chaos-kip848" in server.log() and "reason=forced" in server.log()


def test_a_forced_rebalance_of_a_consumer_group_is_a_new_epoch_the_member_acknowledges(server, java):
    member = java("chaos-kip848-epoch", **{"group.protocol": "consumer"})
    with WireClient(server.bootstrap_servers) as c:
        def epochs():
            g = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["chaos-kip848-epoch"],
                                                              "include_authorized_operations": False}).groups[0]
            return g.group_epoch, [m.member_epoch for m in g.members]

        before, _ = epochs()
        server.rebalance("chaos-kip848-epoch")
        wait_until(lambda: epochs() == (before + 1, [before + 1]), what="the member at the new epoch")
    assert "reason=forced" in server.log()
    assert member.assignment() == ["t2-0", "t2-1"] and member.errors() == []


@pytest.mark.parametrize("stack", ["java", "confluent"])
def test_a_commit_answered_coordinator_load_in_progress_is_retried(server, clients, stack):
    group = f"chaos-commit-{stack}"
    server.error("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", group, count=2)
    c = clients(stack, "commit", server.bootstrap_servers, group=group, topic="t2", partition=1, offset=42)
    assert c.wait(120) == 0, (c.events, c.stderr_tail())
    assert c.events[-1]["event"] != "error" and not c.errors()
    assert server.faults() == []  # both injected answers were met, then the retry was handled
    fetched = clients(stack, "fetch", server.bootstrap_servers, group=group, topic="t2")
    assert fetched.wait_for(lambda e: e["event"] == "offsets")["offsets"]["t2-1"]["offset"] == 42
