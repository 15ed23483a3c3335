"""Fault injection on the wire: `groupd chaos ...` (the real CLI) arms faults on the admin endpoint of
the real server process, and a wire client sees each one do what it says."""

from __future__ import annotations

import datetime
import socket

import pytest

from groupd.coordinator.tools.chaos_client import ChaosClient, ChaosError
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, free_port, join_and_sync
from tests.support.process import groupd_cli as groupd

E = ErrorCode


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = GroupdProcess(str(tmp_path_factory.mktemp("chaos")), "topics=t:2", "group.initial.rebalance.delay.ms=0",
                      f"admin.listener=http://127.0.0.1:{free_port()}").start()
    s.admin = next(a.split("=", 1)[1] for a in s.settings if a.startswith("admin.listener="))
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture
def chaos(server):
    client = ChaosClient(server.admin)
    yield client
    client.clear()


def heartbeat(c: WireClient, group: str, member: str, generation: int) -> ErrorCode:
    return c.request(ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": generation, "member_id": member,
                                           "group_instance_id": None}).error_code


def test_an_error_fault_answers_count_requests_then_is_gone(server, chaos):
    with WireClient(server.bootstrap) as c:
        member, generation = join_and_sync(c, "err")
        r = groupd("chaos", "error", "--api", "Heartbeat", "--code", "REBALANCE_IN_PROGRESS", "--group", "err",
                   "--count", "2", "--admin", server.admin)
        assert r.returncode == 0 and "2 request(s) left" in r.stdout, r.stderr
        assert heartbeat(c, "other", member, generation) == E.unknown_member_id  # another group: not hit
        assert [heartbeat(c, "err", member, generation) for _ in range(3)] == [
            E.rebalance_in_progress, E.rebalance_in_progress, E.none]
        assert chaos.faults() == []
        assert "fault consumed" in server.log()


def test_an_injected_commit_error_writes_nothing(server, chaos):
    chaos.error("OffsetCommit", "COORDINATOR_NOT_AVAILABLE", "commits", count=1)
    commit = {"group_id": "commits", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    fetch = {"group_id": "commits", "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": True}
    with WireClient(server.bootstrap) as c:
        r = c.request(ApiKey.OFFSET_COMMIT, 8, commit)
        assert r.topics[0].partitions[0].error_code is E.coordinator_not_available
        assert c.request(ApiKey.OFFSET_FETCH, 7, fetch).topics[0].partitions[0].committed_offset == -1
        r = c.request(ApiKey.OFFSET_COMMIT, 8, commit)
        assert r.topics[0].partitions[0].error_code is E.none
        assert c.request(ApiKey.OFFSET_FETCH, 7, fetch).topics[0].partitions[0].committed_offset == 7


def test_move_coordinator_answers_not_coordinator_while_find_coordinator_names_this_node(server, chaos):
    with WireClient(server.bootstrap) as c:
        member, generation = join_and_sync(c, "moved")
        r = groupd("chaos", "move-coordinator", "--group", "moved", "--for", "3s", "--admin", server.admin)
        assert r.returncode == 0, r.stderr
        assert heartbeat(c, "moved", member, generation) == E.not_coordinator
        found = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["moved"]})
        assert (found.coordinators[0].error_code, found.coordinators[0].port) == (E.none, server.port)
        join_and_sync(c, "unmoved")  # other groups are served
        wait_until(lambda: heartbeat(c, "moved", member, generation) == E.none, timeout=30)
        assert chaos.faults() == []
        assert "fault expired" in server.log()


def test_a_delay_holds_the_request_back_then_handles_it(server, chaos):
    chaos.delay("Heartbeat", 300, "slow", count=1)
    with WireClient(server.bootstrap) as c:
        member, generation = join_and_sync(c, "slow")
        assert heartbeat(c, "slow", member, generation) == E.none
        assert chaos.faults() == []
        assert "fault consumed id=" in server.log()


def test_forced_rebalance_and_expiry_through_the_cli(server, chaos):
    with WireClient(server.bootstrap) as c:
        member, generation = join_and_sync(c, "forced", session=datetime.timedelta(seconds=30))
        r = groupd("chaos", "rebalance", "--group", "forced", "--admin", server.admin)
        assert r.returncode == 0, r.stderr
        assert heartbeat(c, "forced", member, generation) == E.rebalance_in_progress
        r = groupd("chaos", "expire", "--group", "forced", "--all", "--admin", server.admin)
        assert r.returncode == 0, r.stderr
        assert heartbeat(c, "forced", member, generation) == E.unknown_member_id
        assert "member expired group=forced" in server.log() and "reason=forced" in server.log()


def test_drop_connections_closes_only_that_client_ids(server, chaos):
    with WireClient(server.bootstrap, client_id="victim") as victim, WireClient(server.bootstrap) as other:
        join_and_sync(victim, "drop-a")
        join_and_sync(other, "drop-b")
        assert chaos.drop_connections("victim") == 1
        assert victim.closed_by_server()
        assert not other.closed_by_server(timeout=0.2)


def test_mistakes_are_one_line_and_arm_nothing(server, chaos):
    for args in (["error", "--api", "Nope", "--code", "NOT_COORDINATOR", "--count", "1"],
                 ["error", "--api", "Heartbeat", "--code", "NOPE", "--count", "1"],
                 ["error", "--api", "Metadata", "--code", "NOT_COORDINATOR", "--count", "1"],
                 ["rebalance", "--group", "no-such-group"],
                 ["expire", "--group", "no-such-group", "--member", "m"]):
        r = groupd("chaos", *args, "--admin", server.admin)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (args, r.stderr)
    r = groupd("chaos", "list")  # no --admin, no GROUPD_ADMIN_LISTENER
    assert r.returncode == 2 and "--admin" in r.stderr
    r = groupd("chaos", "list", "--admin", f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 1 and "cannot reach" in r.stderr
    assert chaos.faults() == []
    with pytest.raises(ChaosError, match="count of requests or a duration"):
        chaos.error("Heartbeat", "NOT_COORDINATOR")


def test_the_endpoint_answers_bad_requests_with_their_status_and_serves_on(server, chaos):
    for method, path, body, status in (("POST", "/chaos/error", {"api": "Heartbeat", "error": "NOT_COORDINATOR",
                                                                 "count": "2"}, 400),
                                       ("POST", "/chaos/delay", {"api": "Heartbeat", "count": 1}, 400),
                                       ("POST", "/chaos/nope", {}, 404),
                                       ("GET", "/nope", None, 404)):
        with pytest.raises(ChaosError, match=f"HTTP {status}"):
            chaos.request(method, path, body)
    with socket.create_connection(("127.0.0.1", int(server.admin.rsplit(":", 1)[1])), timeout=10) as s:
        s.sendall(b"POST /chaos/rebalance HTTP/1.1\r\nContent-Length: 5\r\n\r\n{nope")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    assert chaos.faults() == [] and "Traceback" not in server.log()


def test_with_sasl_users_the_endpoint_wants_one_of_them_by_http_basic(tmp_path):
    """A groupd with credentials (sasl.users) protects its admin endpoint with them: HTTP Basic of a
    user (a super user when super.users is set), checked as SASL/PLAIN checks a password."""
    admin_port = free_port()
    s = GroupdProcess(str(tmp_path), f"admin.listener=http://127.0.0.1:{admin_port}", "sasl.users=ops:pw,app:pw2",
                      "super.users=User:ops", "sasl.enabled.mechanisms=PLAIN").start()
    try:
        base = f"127.0.0.1:{admin_port}"
        for url in (f"http://{base}", f"http://ops:wrong@{base}", f"http://nobody:pw@{base}", f"http://app:pw2@{base}"):
            with pytest.raises(ChaosError, match="HTTP 401"):
                ChaosClient(url).faults()
        assert ChaosClient(f"http://ops:pw@{base}").faults() == []
    finally:
        assert s.stop() == 0, s.log()
