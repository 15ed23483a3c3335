"""Never a silent skip (issue 22): whatever the records plane, after a restart no partition's log end
lies below an offset a group committed. The issue's kcat sequence with real clients: produce 3, a
group consumes them and commits 3, groupd restarts (SIGTERM, kill -9), 3 more are produced, the group
consumes the 3 new ones. The disk plane keeps the records; the memory plane resumes each partition,
empty, at its last log end (or past it, after kill -9: offsets reserved ahead)."""

from __future__ import annotations

import datetime
import signal
import time
import uuid

import pytest

from tests.support.process import GroupdProcess

pytestmark = pytest.mark.clients
MS = datetime.timedelta(milliseconds=1)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list = []
    for v in values:
        p.produce(topic, value=v.encode(), partition=0,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors


def consume(bootstrap: str, topic: str, group: str, count: int, timeout: float = 60.0) -> list[tuple[int, str]]:
    """(offset, value) of `count` records read in group `group`, committed synchronously."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe([topic])
    got: list[tuple[int, str]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append((m.offset(), m.value().decode()))
            c.commit(m, asynchronous=False)
    finally:
        c.close()
    return got


@pytest.mark.parametrize("plane", ["disk", "memory"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_a_group_never_skips_new_records_after_a_restart(tmp_path, plane, sig):
    topic, group = f"skip-{uuid.uuid4().hex[:8]}", "g"
    s = GroupdProcess(str(tmp_path), f"records.plane={plane}", f"topics={topic}:1",
                      "group.initial.rebalance.delay.ms=0").start()
    try:
        produce(s.bootstrap, topic, ["m1", "m2", "m3"])
        first = consume(s.bootstrap, topic, group, 3)
        assert [v for _, v in first] == ["m1", "m2", "m3"]
        s.stop(sig)
        s.start()
        produce(s.bootstrap, topic, ["m4", "m5", "m6"])
        after = consume(s.bootstrap, topic, group, 3)
        assert [v for _, v in after] == ["m4", "m5", "m6"], after
        if plane == "disk":  # the records themselves survived: offsets go on from 3
            assert [o for o, _ in after] == [3, 4, 5]
        elif sig == signal.SIGTERM:  # a clean stop stored the exact log end
            assert [o for o, _ in after] == [3, 4, 5]
    finally:
        s.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_producer_ids_are_never_handed_out_again_after_a_restart(tmp_path, sig):
    """InitProducerId reserves its ids in blocks in the data dir (producer-ids-<node>.json), as Kafka's
    producer-id blocks: a restarted groupd starts past every id it may have handed out."""
    from groupd.protocol import ErrorCode
    from groupd.protocol.apis import ApiKey
    from tests.support.process import WireClient

    def init_ids(bootstrap: str, n: int) -> list[int]:
        with WireClient(bootstrap) as c:
            out = []
            for _ in range(n):
                r = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60_000 * MS,
                                                           "producer_id": -1, "producer_epoch": -1})
                assert r.error_code is ErrorCode.none
                out.append(r.producer_id)
            return out

    s = GroupdProcess(str(tmp_path)).start()
    try:
        before = init_ids(s.bootstrap, 3)
        s.stop(sig)
        s.start()
        after = init_ids(s.bootstrap, 3)
        assert min(after) > max(before), (before, after)
        assert len(set(after)) == 3
    finally:
        s.stop()


@pytest.mark.parametrize("plane", ["disk", "memory"])
def test_the_issues_kcat_sequence_prints_the_new_records_after_a_restart(tmp_path, plane):
    """Issue 22's reproduction, as written there: kcat -P three, kcat -G reads and commits them,
    groupd restarts, kcat -P three more, kcat -G prints exactly the three new ones."""
    import subprocess

    s = GroupdProcess(str(tmp_path), f"records.plane={plane}", "topics=t:1", "group.initial.rebalance.delay.ms=0").start()

    def kcat(*args: str, stdin: str = "") -> list[str]:
        out = subprocess.run(["kcat", "-b", s.bootstrap, *args], input=stdin, capture_output=True, text=True,
                             timeout=90)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    group = ["-G", "g", "t", "-e", "-X", "session.timeout.ms=6000", "-X", "auto.offset.reset=earliest"]
    try:
        kcat("-P", "-t", "t", stdin="m1\nm2\nm3\n")
        assert kcat(*group, "-o", "beginning") == ["m1", "m2", "m3"]
        s.stop()
        s.start()
        kcat("-P", "-t", "t", stdin="m4\nm5\nm6\n")
        assert kcat(*group) == ["m4", "m5", "m6"]
    finally:
        s.stop()
