"""What one hostile or careless client can do to a real groupd process (issue 10): crash it, make it
hold memory, starve the other clients, hold a connection open forever, flood its log."""

from __future__ import annotations

import datetime
import logging
import os
import re
import socket
import struct
import subprocess
import threading
import time
import urllib.request

import pytest

from groupd.coordinator.observability.log_limit import LimitedLog
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import decode_response
from tests.support.harness import wait_until
from tests.support.process import GroupdProcess, WireClient, established_peers, free_port

BIG = 240 * 1024  # member metadata and assignment: a DescribeGroups answer of ~480 KB
PARTITIONS = 20000


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def api_versions_seconds(bootstrap: str) -> float:
    """A fresh client's ApiVersions round trip, connection included."""
    started = time.monotonic()
    with WireClient(bootstrap, timeout=30) as c:
        assert c.request(ApiKey.API_VERSIONS, 0, {}).error_code is ErrorCode.none
    return time.monotonic() - started


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    metrics_port = free_port()
    g = GroupdProcess(str(tmp_path_factory.mktemp("hardening")), f"topics=big:{PARTITIONS},t:1",
                      f"topic.max.partitions={PARTITIONS}",
                      "group.initial.rebalance.delay.ms=0", "socket.request.arrival.timeout.ms=1500",
                      f"metrics.listener=http://127.0.0.1:{metrics_port}/metrics").start()
    g.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    yield g
    assert g.stop() == 0, g.log()[-3000:]


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def raw_frame(hex_body: str) -> bytes:
    body = bytes.fromhex(hex_body)
    return struct.pack(">i", len(body)) + body


# -- items 1-3 over the wire -----------------------------------------------------------------------


def test_listgroups_with_a_count_of_2_32_minus_2_closes_only_its_connection(server):
    with WireClient(server.bootstrap) as c:
        c.send_raw(raw_frame("0010000500000003000c676f6c64656e2d61646d696e0001ffffffff0f00"))
        assert c.closed_by_server()
    assert server.alive()
    assert api_versions_seconds(server.bootstrap) < 5


def test_heartbeat_with_unknown_tagged_fields_is_answered(server):
    with WireClient(server.bootstrap) as c:
        _, frame = c.frame(ApiKey.HEARTBEAT, 4, {"group_id": "nobody", "generation_id": 1, "member_id": "m",
                                                 "group_instance_id": None})
        assert frame.endswith(b"\x00")  # the body's empty tag buffer
        tagged = frame[:-1] + bytes.fromhex("02" "0a0161" "e8070100")  # tags 10 and 1000
        c.send_raw(struct.pack(">i", len(tagged) - 4) + tagged[4:])
        _, reply = decode_response(ApiKey.HEARTBEAT, 4, c.read_frame())
        assert reply.error_code is ErrorCode.unknown_member_id


def test_a_null_group_id_closes_the_connection_with_one_line_and_no_traceback(server):
    with WireClient(server.bootstrap) as c:
        # DescribeGroups v0 whose groups array is null (-1): the schema has no null there
        c.send_raw(raw_frame("000f" "0000" "00000007" "0004" "77697265" "ffffffff"))
        assert c.closed_by_server()
    log = wait_until(lambda: "array groups is null" in server.log() and server.log(), what="the log line")
    assert "Traceback" not in log
    assert api_versions_seconds(server.bootstrap) < 5


def test_metadata_v10_null_topic_name_answers_invalid_request_over_the_wire(server):
    with WireClient(server.bootstrap) as c:
        reply = c.request(ApiKey.METADATA, 10, {"topics": [{"name": None, "topic_id": None}],
                                                "allow_auto_topic_creation": False,
                                                "include_cluster_authorized_operations": False,
                                                "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in reply.topics] == [("", ErrorCode.invalid_request)]
    assert "Traceback" not in server.log()


# -- item 4: replies nobody reads ------------------------------------------------------------------


def _stable_group_with_a_big_member(bootstrap: str, group: str) -> None:
    with WireClient(bootstrap) as c:
        joined = c.request(ApiKey.JOIN_GROUP, 3, {
            "group_id": group, "session_timeout": datetime.timedelta(minutes=5),
            "rebalance_timeout": datetime.timedelta(seconds=30), "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m" * BIG}]})
        assert joined.error_code is ErrorCode.none
        synced = c.request(ApiKey.SYNC_GROUP, 1, {
            "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
            "assignments": [{"member_id": joined.member_id, "assignment": b"a" * BIG}]})
        assert synced.error_code is ErrorCode.none


def test_a_client_that_pipelines_big_answers_and_never_reads_holds_bounded_memory(server):
    _stable_group_with_a_big_member(server.bootstrap, "big-members")
    pid = server.proc.pid
    before = rss_mb(pid)
    flooder = socket.create_connection(("127.0.0.1", server.port))
    flooder.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    with WireClient(server.bootstrap) as w:
        _, describe = w.frame(ApiKey.DESCRIBE_GROUPS, 0, {"groups": ["big-members"]})
        _, commit = w.frame(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": "plain-commits", "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                     "committed_metadata": ""}]}]})
    # 600 answers of ~480 KB (~280 MB unbounded), commits (parked until durable) in between
    burst = (describe + commit) * 300
    sender = threading.Thread(target=lambda: _send_quietly(flooder, burst), daemon=True)
    sender.start()
    try:
        peak = before
        for _ in range(20):  # sample while the server does what it will with the burst
            assert api_versions_seconds(server.bootstrap) < 5
            peak = max(peak, rss_mb(pid))
            time.sleep(0.1)
        assert peak - before < 64, f"RSS grew from {before:.0f} MB to {peak:.0f} MB"
        assert server.alive()
    finally:
        flooder.close()
        sender.join(10)


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass  # the test closes the socket while the kernel buffers are full


# -- item 5: one connection must not stall the others -----------------------------------------------


def _commit_many(bootstrap: str, group: str) -> None:
    with WireClient(bootstrap) as c:
        for start in range(0, PARTITIONS, 2000):
            r = c.request(ApiKey.OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": "big", "partitions": [
                    {"partition_index": p, "committed_offset": p, "committed_leader_epoch": -1,
                     "committed_metadata": ""} for p in range(start, start + 2000)]}]})
            assert {p.error_code for t in r.topics for p in t.partitions} == {ErrorCode.none}


def test_pipelined_offset_fetch_of_every_offset_does_not_starve_another_client(server):
    _commit_many(server.bootstrap, "many-offsets")
    flooder = socket.create_connection(("127.0.0.1", server.port))
    with WireClient(server.bootstrap) as w:
        _, fetch_all = w.frame(ApiKey.OFFSET_FETCH, 7, {"group_id": "many-offsets", "topics": None,
                                                         "require_stable": False})
    reader = threading.Thread(target=_drain, args=(flooder,), daemon=True)  # reads, so nothing backs up
    reader.start()
    flooder.sendall(fetch_all * 300)  # ~30 s of encoding for the server, one loop turn at a time
    try:
        waits = []
        with WireClient(server.bootstrap, timeout=30) as other:
            for _ in range(10):
                started = time.monotonic()
                other.request(ApiKey.API_VERSIONS, 2, {})
                other.request(ApiKey.HEARTBEAT, 0, {"group_id": "nobody", "generation_id": 1, "member_id": "m"})
                waits.append(time.monotonic() - started)
        assert max(waits) < 2, waits  # a starvation check, not a benchmark
    finally:
        flooder.close()


def test_a_large_answer_built_off_the_loop_carries_every_offset_in_request_order(server):
    """Answers over LARGE_ANSWER_ROWS are built on the answer thread; pipelined small requests behind
    one still come back in order, and the large one is complete."""
    _commit_many(server.bootstrap, "offsets-off-loop")
    with WireClient(server.bootstrap) as c:
        for version in (7, 8):  # one group (v7) and the batched form (v8)
            body = ({"group_id": "offsets-off-loop", "topics": None, "require_stable": False} if version == 7 else
                    {"groups": [{"group_id": "offsets-off-loop", "topics": None}], "require_stable": False})
            sent = [(ApiKey.OFFSET_FETCH, version, body), (ApiKey.API_VERSIONS, 2, {}),
                    (ApiKey.OFFSET_FETCH, version, body)]
            frames = [c.frame(*request) for request in sent]
            c.send_raw(b"".join(frame for _, frame in frames))
            answers = []
            for (cid, _), (api_key, v, _) in zip(frames, sent):
                got, response = decode_response(api_key, v, c.read_frame())
                assert got == cid  # in request order
                answers.append(response)
            first, second, third = answers
            assert second.error_code is ErrorCode.none
            for r in (first, third):
                topics = r.topics if version == 7 else r.groups[0].topics
                assert {(p.partition_index, p.committed_offset) for t in topics for p in t.partitions} == \
                    {(p, p) for p in range(PARTITIONS)}


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(1 << 20):
            pass
    except OSError:
        pass


# -- item 7: slowloris -------------------------------------------------------------------------------


def test_a_frame_trickled_a_byte_at_a_time_is_closed_after_the_arrival_timeout(server):
    with WireClient(server.bootstrap) as c:
        _, frame = c.frame(ApiKey.API_VERSIONS, 0, {})
        c.sock.settimeout(0.2)
        closed = False
        deadline = time.monotonic() + 30
        i = 0
        while time.monotonic() < deadline and not closed:
            try:
                c.sock.send(frame[i % (len(frame) - 1):i % (len(frame) - 1) + 1])
                i += 1
                closed = c.sock.recv(1) == b""
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                closed = True
        assert closed, "a trickling client kept its connection for 30 s"
    assert "reason=slow_frame" in server.log()
    assert scrape(server.metrics_url)['groupd_bad_frames_total{reason="slow_frame"}'] >= 1


# -- item 12: bad-frame log lines are limited, the metric counts each --------------------------------


def test_a_flood_of_bad_frames_logs_a_bounded_number_of_lines_and_counts_every_one(server):
    before = scrape(server.metrics_url).get('groupd_bad_frames_total{reason="unknown_api"}', 0)
    lines_before = server.log().count("reason=unknown_api")
    for _ in range(200):
        with WireClient(server.bootstrap) as c:
            c.send_raw(raw_frame("03e7000100000001ffff"))  # api key 999
            assert c.closed_by_server()
    assert scrape(server.metrics_url)['groupd_bad_frames_total{reason="unknown_api"}'] - before == 200
    assert server.log().count("reason=unknown_api") - lines_before <= 20


def test_limited_log_says_how_many_lines_it_suppressed(caplog, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    limited = LimitedLog(logging.getLogger("test.limited"), "bad-frame", per_interval=3, interval_s=10)
    with caplog.at_level(logging.INFO, logger="test.limited"):
        for i in range(10):
            limited.log(logging.WARNING, "bad frame %d", i)
        limited.tick()  # the window is not over: nothing to say yet
        now[0] += 10
        limited.tick()
    assert [r.getMessage() for r in caplog.records] == [
        "bad frame 0", "bad frame 1", "bad frame 2", "suppressed 7 bad-frame lines in the last 10 s"]


# -- item 8: file descriptors run out; the metrics endpoint holds few, briefly ----------------------


def test_accept_out_of_file_descriptors_is_logged_and_the_server_keeps_going(start_groupd):
    metrics_port = free_port()
    g = start_groupd(f"metrics.listener=http://127.0.0.1:{metrics_port}/metrics")
    pid = g.proc.pid
    in_use = len(os.listdir(f"/proc/{pid}/fd"))
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={in_use + 10}:{in_use + 10}"], check=True)
    held = [socket.create_connection(("127.0.0.1", g.port)) for _ in range(40)]  # the kernel queues them
    try:
        wait_until(lambda: "accept failed listener=PLAINTEXT error=EMFILE" in g.log(), what="the EMFILE line")
        assert g.alive()
    finally:
        for s in held:
            s.close()
    assert wait_until(lambda: _answers(g.bootstrap), what="a fresh client's answer")
    assert scrape(f"http://127.0.0.1:{metrics_port}/metrics")["groupd_accept_failed_total"] >= 1
    assert g.log().count("accept failed") <= 5 + g.log().count("suppressed")


def _answers(bootstrap: str) -> bool:
    try:
        return api_versions_seconds(bootstrap) < 30
    except OSError:
        return False


def test_the_metrics_endpoint_bounds_and_closes_idle_connections(start_groupd):
    metrics_port = free_port()
    g = start_groupd(f"metrics.listener=http://127.0.0.1:{metrics_port}/metrics")
    idle = [socket.create_connection(("127.0.0.1", metrics_port)) for _ in range(50)]
    try:
        assert "groupd_connections_open" in scrape(f"http://127.0.0.1:{metrics_port}/metrics")
        wait_until(lambda: len(established_peers(metrics_port)) <= 32, what="at most 32 held connections")
        wait_until(lambda: not established_peers(metrics_port), timeout=30, what="idle connections closed")
    finally:
        for s in idle:
            s.close()


# -- item 4: queued.max.request.bytes bounds every connection's unhandled request bytes together -----


def _padded_api_versions(size: int) -> bytes:
    """An ApiVersions v0 request of `size` bytes in all (Kafka ignores bytes after the body)."""
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, 1, 4) + b"test"
    return struct.pack(">i", size - 4) + header + bytes(size - 4 - len(header))


def _unread_by_server(server_port: int, client: socket.socket) -> int | None:
    """Bytes the client sent that sit in the server socket's receive queue (from /proc/net/tcp)."""
    client_port = client.getsockname()[1]
    with open("/proc/net/tcp") as f:
        for row in f.read().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == server_port and \
                    int(fields[2].rsplit(":", 1)[1], 16) == client_port:
                return int(fields[4].split(":")[1], 16)
    return None


def test_partial_frames_over_queued_max_request_bytes_wait_until_the_total_drops(start_groupd):
    g = start_groupd("queued.max.request.bytes=1024")
    frame = _padded_api_versions(1500)
    first = socket.create_connection(("127.0.0.1", g.port), timeout=10)
    second = socket.create_connection(("127.0.0.1", g.port), timeout=10)
    try:
        first.sendall(frame[:1000])
        wait_until(lambda: _unread_by_server(g.port, first) == 0, what="the first partial frame read")
        second.sendall(frame[:1000])  # 2000 bytes held in all: the second one stops being read
        wait_until(lambda: _unread_by_server(g.port, second) == 0, what="the second partial frame read")
        second.sendall(frame[1000:])
        wait_until(lambda: _unread_by_server(g.port, second) == 500, what="the rest left unread")
        first.sendall(frame[1000:])
        assert len(first.recv(4)) == 4
        assert len(second.recv(4)) == 4  # the first frame was handled: the second is read again
        assert _unread_by_server(g.port, second) == 0
    finally:
        first.close()
        second.close()


def test_connections_max_idle_ms_closes_only_the_connection_that_sent_nothing(start_groupd):
    # every read moves the connection's last-active time (connection.py data_received): a client
    # that keeps asking stays connected past the idle limit, one that sends nothing is closed
    server = start_groupd("connections.max.idle.ms=2000")
    with WireClient(server.bootstrap, timeout=30) as idle, WireClient(server.bootstrap, timeout=30) as busy:
        assert idle.request(ApiKey.API_VERSIONS, 0, {}).error_code is ErrorCode.none
        ends = time.monotonic() + 5  # two and a half idle limits
        while time.monotonic() < ends:  # paces the busy client; nothing here waits for the server
            assert busy.request(ApiKey.API_VERSIONS, 0, {}).error_code is ErrorCode.none
            time.sleep(0.4)
        assert idle.closed_by_server(timeout=30)
        assert busy.request(ApiKey.API_VERSIONS, 0, {}).error_code is ErrorCode.none
