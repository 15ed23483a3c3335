"""Control-plane writes run off the event loop (design.md): the topic catalog's and the ACL file's
writes (two fsyncs each) are held here, in a server running in this process, while heartbeats keep
being answered; the request that wrote is answered once its write is done, a failed write changes
nothing and fails nothing else, and two changes of one document at once both hold (no lost update).
Cluster mode's etcd writes: tests/cluster/test_cluster_etcd.py."""

from __future__ import annotations

import asyncio
import datetime
import errno
import os
import select
import threading

import pytest

from groupd.coordinator.observability import readiness
from groupd.coordinator.server.server import Server
from groupd.coordinator.settings import Settings
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import decode_response
from tests.support.authz import GROUP, READ, acl, authorizer_settings
from tests.support.process import WireClient, free_port, join_and_sync, wait_for

TIMEOUT = datetime.timedelta(seconds=30)
HELD_S = 120  # how long a held write waits for the test to release it: far past any bound below


class HeldFsync:
    """`os.fsync` that holds the fsync of `<file>.tmp` (storage/files.atomic_write) until `release`,
    then fails it with `fail` if given; every other fsync (the offsets log's) runs as always."""

    def __init__(self, monkeypatch, file: str, fail: OSError | None = None) -> None:
        self.entered, self.release, self.fail = threading.Event(), threading.Event(), fail
        self.calls = 0
        real = os.fsync

        def fsync(fd: int) -> None:
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                path = ""
            if path.endswith(f"/{file}.tmp"):
                self.calls += 1
                self.entered.set()
                self.release.wait(HELD_S)
                if self.fail is not None:
                    raise self.fail
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)


class Pending:
    """A request sent on its own connection whose answer is read later."""

    def __init__(self, bootstrap: str, api_key: int, version: int, body: dict) -> None:
        self.api_key, self.version = api_key, version
        self.conn = WireClient(bootstrap, timeout=HELD_S)
        self.cid, data = self.conn.frame(api_key, version, body)
        self.conn.send_raw(data)

    def answered(self) -> bool:
        """Whether its answer has arrived (without waiting)."""
        return bool(select.select([self.conn.sock], [], [], 0)[0])

    def answer(self):
        got, response = decode_response(self.api_key, self.version, self.conn.read_frame())
        assert got == self.cid
        self.conn.close()
        return response


@pytest.fixture
async def server(tmp_path):
    port = free_port()
    settings = Settings.load(env={}, overrides=[
        f"listeners=PLAINTEXT://127.0.0.1:{port}", f"data.dir={tmp_path}", "metrics.listener=", "topics=t:2",
        "offsets.topic.num.partitions=2", "group.initial.rebalance.delay.ms=0",
        *authorizer_settings(allow_everyone=True)])
    s = Server(settings)
    await s.startup()
    await wait_for(lambda: readiness.is_ready(s.node.coordinator), 60)
    s.bootstrap = f"127.0.0.1:{port}"
    yield s
    await s.shutdown()


def create_topic_request(name: str) -> dict:
    return {"topics": [{"name": name, "num_partitions": 3, "replication_factor": -1, "assignments": [],
                        "configs": []}], "timeout": TIMEOUT, "validate_only": False}


def metadata_request(name: str, auto_create: bool) -> dict:
    return {"topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": auto_create,
            "include_topic_authorized_operations": False}


def heartbeats_while(held: HeldFsync, pending: Pending, bootstrap: str, count: int = 3) -> list[ErrorCode]:
    """A member joins; once `held` holds the write `pending` asked for, `count` heartbeats, each
    answered while that write is still held and its request unanswered; then the write goes on."""
    try:
        with WireClient(bootstrap, timeout=30) as member:  # bound: a loop held by the write never answers
            member_id, generation = join_and_sync(member, "g")
            assert held.entered.wait(60), "the write never reached its fsync"
            errors = []
            for _ in range(count):
                errors.append(member.request(ApiKey.HEARTBEAT, 4, {
                    "group_id": "g", "generation_id": generation, "member_id": member_id,
                    "group_instance_id": None}).error_code)
                assert not pending.answered(), "answered before its write was done"
            return errors
    finally:
        held.release.set()


async def test_a_slow_catalog_write_holds_neither_heartbeats_nor_other_requests(server, monkeypatch):
    held = HeldFsync(monkeypatch, "topics.json")
    created = await asyncio.to_thread(Pending, server.bootstrap, ApiKey.CREATE_TOPICS, 5, create_topic_request("slow"))
    assert await asyncio.to_thread(heartbeats_while, held, created, server.bootstrap) == [ErrorCode.none] * 3
    answer = await asyncio.to_thread(created.answer)
    assert answer.topics[0].error_code == ErrorCode.none and answer.topics[0].num_partitions == 3
    assert server.node.catalog.get("slow").partitions == 3
    assert b'"slow"' in open(os.path.join(server.settings.data_dir, "topics.json"), "rb").read()


async def test_a_slow_auto_create_holds_no_heartbeat_and_answers_the_topic_once_written(server, monkeypatch):
    held = HeldFsync(monkeypatch, "topics.json")
    asked = await asyncio.to_thread(Pending, server.bootstrap, ApiKey.METADATA, 12, metadata_request("auto", True))
    assert await asyncio.to_thread(heartbeats_while, held, asked, server.bootstrap) == [ErrorCode.none] * 3
    topic = (await asyncio.to_thread(asked.answer)).topics[0]
    assert topic.error_code == ErrorCode.none and topic.topic_id == server.node.catalog.get("auto").topic_id


async def test_a_failed_catalog_write_changes_nothing_and_the_next_one_succeeds(server, monkeypatch):
    held = HeldFsync(monkeypatch, "topics.json", fail=OSError(errno.EIO, "Input/output error"))
    held.release.set()
    version = server.node.catalog.version

    def asked():
        with WireClient(server.bootstrap) as c:
            created = c.request(ApiKey.CREATE_TOPICS, 5, create_topic_request("lost")).topics[0]
            auto = c.request(ApiKey.METADATA, 12, metadata_request("lost-auto", True)).topics[0]
            grown = c.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "t", "count": 4, "assignments": None}],
                                                            "timeout": TIMEOUT, "validate_only": False}).results[0]
            deleted = c.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "t", "topic_id": None}],
                                                          "timeout": TIMEOUT}).responses[0]
            member_id, generation = join_and_sync(c, "g")  # a neighbour of the failed writes is served
            return created, auto, grown, deleted
    created, auto, grown, deleted = await asyncio.to_thread(asked)
    assert held.calls == 4
    assert created.error_code == ErrorCode.unknown_server_error and "Input/output error" in created.error_message
    assert auto.error_code == ErrorCode.leader_not_available  # as while Kafka creates it: the client asks again
    assert grown.error_code == ErrorCode.unknown_server_error
    assert deleted.error_code == ErrorCode.unknown_server_error
    catalog = server.node.catalog
    assert catalog.version == version and catalog.get("lost") is None and catalog.get("lost-auto") is None
    assert catalog.get("t").partitions == 2

    monkeypatch.undo()
    with_auto = await asyncio.to_thread(lambda: WireClient(server.bootstrap).request(
        ApiKey.METADATA, 12, metadata_request("lost-auto", True)).topics[0])
    assert with_auto.error_code == ErrorCode.none and catalog.get("lost-auto") is not None


async def test_two_acl_changes_at_once_are_written_one_after_the_other_and_both_hold(server, monkeypatch):
    held = HeldFsync(monkeypatch, "acls.json")
    first = await asyncio.to_thread(Pending, server.bootstrap, ApiKey.CREATE_ACLS, 3,
                                    {"creations": [acl(GROUP, "one", READ)]})
    assert await asyncio.to_thread(held.entered.wait, 60)
    second = await asyncio.to_thread(Pending, server.bootstrap, ApiKey.CREATE_ACLS, 3,
                                     {"creations": [acl(GROUP, "two", READ)]})
    errors = await asyncio.to_thread(heartbeats_while, held, first, server.bootstrap)
    assert errors == [ErrorCode.none] * 3 and not second.answered()
    answers = [await asyncio.to_thread(p.answer) for p in (first, second)]
    assert [[r.error_code for r in a.results] for a in answers] == [[ErrorCode.none]] * 2
    assert held.calls == 2
    stored = open(os.path.join(server.settings.data_dir, "acls.json"), encoding="utf-8").read()
    assert '"one"' in stored and '"two"' in stored
    assert {b.resource_name for b in server.node.access.authorizer} == {"one", "two"}
