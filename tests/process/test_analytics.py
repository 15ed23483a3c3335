"""The analytics pipeline (analytics/) and its Spark data source, on an offsets log written by the
real server for real clients: rebalances, a static member's restart, a deleted group, commits from
two client libraries, and one group whose partitions advance, stall and stop.

Spark starts twice in this module: once in the `groupd analytics run` child process (the CLI,
local[2]) and once in this process (the `spark` fixture) for the data-source tests. pyspark is
imported at the top: without the `spark` extra this module errors, it never skips.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pyarrow.parquet as pq
import pyspark  # noqa: F401 — the `spark` extra is part of the test install; a missing one is an error
import pytest

from groupd.analytics import SOURCE_NAME, TABLES, pipeline, segments
from groupd.analytics import cli as analytics_cli
from groupd.analytics.source import SCHEMA, GroupdOffsetsDataSource
from groupd.coordinator.cli import main as groupd_main
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.storage import compaction, inspect
from groupd.storage.log import PartitionLog, list_segments, partition_dir
from groupd.storage.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from tests.support.harness import ClientProcess, wait_until
from tests.support.process import ROOT, GroupdProcess, WireClient

# the first test also pays for the scenario and the CLI run (about 45 s on an idle 2-core machine)
pytestmark = pytest.mark.timeout(600)

SIX = {f"t6-{p}" for p in range(6)}
SETTINGS = ("topics=t6:6", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
GROUPS = ["an-rebalance", "an-static", "an-deleted", "an-commits", "an-status"]
ROUNDS = 12  # commit rounds of an-status: p0 advances, p1 stays, p2 stops after STOP_AFTER rounds
STOP_AFTER = 4


def balanced(members: list[ClientProcess], partitions: set[str]) -> bool:
    assignments = [m.assignment() for m in members]
    if any(a is None for a in assignments):
        return False
    flat = [p for a in assignments for p in a]
    return len(flat) == len(set(flat)) and set(flat) == partitions


def member_id(client: ClientProcess) -> str:
    return [e for e in client.events if e["event"] == "assigned"][-1]["member_id"]


def now_ms() -> int:
    return int(time.time() * 1000)


class Committer:
    """A confluent-kafka (librdkafka) consumer that only commits offsets it is given, as a
    standalone (simple) consumer does: generation -1, no membership."""

    def __init__(self, bootstrap: str, group: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})

    def commit(self, offsets: dict[int, int], leader_epoch: int = -1, metadata: str = "") -> None:
        from confluent_kafka import TopicPartition

        tps = [TopicPartition("t6", p, o, metadata=metadata, leader_epoch=leader_epoch) for p, o in offsets.items()]
        for tp in self.consumer.commit(offsets=tps, asynchronous=False):
            assert tp.error is None, tp

    def close(self) -> None:
        self.consumer.close()


def offset_fetch(bootstrap: str, groups: list[str]) -> dict[tuple[str, str, int], tuple[int, int, str]]:
    with WireClient(bootstrap) as w:
        r = w.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": g, "topics": None} for g in groups],
                                               "require_stable": True})
    out = {}
    for g in r.groups:
        assert g.error_code is ErrorCode.none, g
        for t in g.topics:
            for p in t.partitions:
                out[(g.group_id, t.name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch, p.metadata)
    return out


# ---------------------------------------------------------------------------------------------
# The log: written by the real server for real clients, then analysed by `groupd analytics run`


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    root = tmp_path_factory.mktemp("analytics")
    data_dir = str(root / "data")
    server = GroupdProcess(data_dir, *SETTINGS).start()
    started: list[ClientProcess] = []
    committers: list[Committer] = []
    facts: dict = {"data_dir": data_dir, "root": root}

    def consumer(group: str, **extra) -> ClientProcess:
        opts = {"topic": "t6", "group": group, "seconds": 0, "session.ms": 6000, "heartbeat.interval.ms": 500}
        c = ClientProcess("confluent", "subscribe", server.bootstrap, {**opts, **extra})
        started.append(c)
        return c

    def committer(group: str) -> Committer:
        c = Committer(server.bootstrap, group)
        committers.append(c)
        return c

    def logged(pattern: str) -> bool:
        return re.search(pattern, server.log()) is not None

    try:
        # 1. rebalances: a alone, a + b, b alone (a left), nobody (b left: the group is Empty)
        a = consumer("an-rebalance")
        wait_until(lambda: a.assignment() == sorted(SIX), 60, "a owns t6")
        b = consumer("an-rebalance")
        wait_until(lambda: balanced([a, b], SIX), 90, "a and b share t6")
        facts["a"], facts["b"] = member_id(a), member_id(b)
        assert a.close() == 0
        wait_until(lambda: b.assignment() == sorted(SIX), 60, "b owns t6 after a left")
        assert b.close() == 0
        wait_until(lambda: logged(r"rebalance completed group=an-rebalance generation=\d+ state=Empty"), 30, "empty")

        # 2. static membership: s1's process is killed and restarted with the same instance id
        s1 = consumer("an-static", instance="s1", **{"session.ms": 30000})
        s2 = consumer("an-static", instance="s2", **{"session.ms": 30000})
        wait_until(lambda: balanced([s1, s2], SIX), 90, "two static members assigned")
        time.sleep(1)
        facts["s1_old"] = member_id(s1)
        s1.kill()
        s1b = consumer("an-static", instance="s1", **{"session.ms": 30000})
        wait_until(lambda: s1b.assignment() is not None, 60, "the restarted static member assigned")
        wait_until(lambda: logged("static member replaced group=an-static instance=s1"), 30, "replacement")
        facts["s1_new"], facts["s2"] = member_id(s1b), member_id(s2)

        # 3. a consumer group that empties, gets offsets, is deleted, and is committed to again
        d = consumer("an-deleted")
        wait_until(lambda: d.assignment() == sorted(SIX), 60, "d owns t6")
        facts["d"] = member_id(d)
        assert d.close() == 0
        wait_until(lambda: logged(r"rebalance completed group=an-deleted generation=\d+ state=Empty"), 30, "empty")
        deleted = committer("an-deleted")
        deleted.commit({0: 5, 1: 6, 2: 7})
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.delete_consumer_groups(["an-deleted"])["an-deleted"].result(10)
        deleted.commit({5: 9}, metadata="after-delete")

        # 4. commits from kafka-python (a process of its own): the second one wins
        for offset, metadata in ((42, "first"), (43, "second")):
            c = ClientProcess("kafka-python", "commit", server.bootstrap,
                              {"group": "an-commits", "topic": "t6", "partition": 3, "offset": offset,
                               "metadata": metadata})
            started.append(c)
            assert c.wait() == 0, c.events

        # 5. the last commits in the log: p0 advances, p1 is committed but never moves, p2 stops
        status = committer("an-status")
        rounds = []
        for i in range(ROUNDS):
            offsets = {0: 100 + 10 * i, 1: 50}
            if i < STOP_AFTER:
                offsets[2] = 200 + i
            before = now_ms()
            status.commit(offsets, leader_epoch=7, metadata=f"round-{i}")
            rounds.append((before, now_ms()))
            time.sleep(0.25)
        facts["rounds"] = rounds
    finally:
        for c in committers:
            c.close()
        for c in started:
            c.close(timeout=20)
        rc = server.stop()
    assert rc == 0, server.log()
    facts["server_log"] = server.log()

    out = str(root / "tables")
    groupd = [sys.executable, "-m", "groupd.coordinator"]  # `groupd`, from this checkout (cwd)
    start = time.monotonic()
    run = subprocess.run([*groupd, "analytics", "run", "--data-dir", data_dir, "--out", out, "--master", "local[2]",
                          "--conf", "spark.sql.shuffle.partitions=2"],
                         cwd=ROOT, capture_output=True, text=True, timeout=420)
    facts["cli_seconds"] = time.monotonic() - start
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr[-5000:]}"
    facts["cli_stdout"] = run.stdout
    facts["tables"] = {name: pq.read_table(os.path.join(out, name)).to_pylist() for name in TABLES}
    facts["report"] = str(root / "report.html")
    report = subprocess.run([*groupd, "analytics", "report", "--tables", out, "--out", facts["report"]],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    facts["report_stdout"] = report.stdout
    return facts


def rows(scenario, table: str, group: str | None = None) -> list[dict]:
    return [r for r in scenario["tables"][table] if group is None or r["group"] == group]


def test_cli_reports_progress_and_a_summary(scenario):
    out = scenario["cli_stdout"]
    listed = segments.list_data_dir(scenario["data_dir"])
    full = segments.with_records(listed)
    assert len(full) < len(listed), "the server leaves an empty segment in every partition without groups"
    assert re.search(rf"reading .*: {len(full)} segments in \d+ offsets partitions, [\d.]+ MB "
                     rf"\({len(listed) - len(full)} empty segments skipped", out), out
    read = [int(n) for n in re.findall(rf"^reading: (\d+) of {len(full)} segments$", out, re.M)]
    assert read and read == sorted(set(read)) and read[-1] == len(full), out  # grows, and ends with all
    for name in TABLES:
        assert f"wrote {name}: " in out, out
    summary = re.search(r"done: (\d+) records, (\d+) groups", out)
    assert summary, out
    assert int(summary.group(1)) > 0 and int(summary.group(2)) == len(GROUPS), out


def test_latest_offsets_equal_offset_fetch_after_a_restart(scenario):
    latest = {(r["group"], r["topic"], r["partition"]): (r["committed_offset"], r["leader_epoch"], r["metadata"])
              for r in rows(scenario, "latest_offsets")}
    server = GroupdProcess(scenario["data_dir"], *SETTINGS).start()
    try:
        fetched = offset_fetch(server.bootstrap, GROUPS)
    finally:
        assert server.stop() == 0
    assert latest == fetched
    # what the scenario did, spelled out
    assert latest[("an-commits", "t6", 3)][0] == 43
    assert {k for k in latest if k[0] == "an-deleted"} == {("an-deleted", "t6", 5)}, "deleted offsets stay deleted"
    last = ROUNDS - 1
    assert latest[("an-status", "t6", 0)][:2] == (100 + 10 * last, 7)
    assert latest[("an-status", "t6", 2)][0] == 200 + STOP_AFTER - 1


def logged_generations(log: str, group: str) -> tuple[set[int], set[int]]:
    """From the server's log: the generations whose record must be in the log (each completed
    rebalance: to an assignment or to Empty), and those whose record may be (a join phase that
    completed: its leader's assignment may have been written just as a new rebalance overtook it)."""
    g = re.escape(group)
    completed = {int(n) for n in re.findall(rf"rebalance completed group={g} generation=(\d+) ", log)}
    joined = {int(n) for n in re.findall(rf"join phase completed group={g} generation=(\d+) ", log)}
    return completed, completed | joined


def test_generations_match_the_rebalances(scenario):
    log = scenario["server_log"]
    by_group = {g: sorted(rows(scenario, "generations", g), key=lambda r: (r["incarnation"], r["generation"]))
                for g in ("an-rebalance", "an-static", "an-deleted")}
    for group, gens in by_group.items():
        # generation 0 is the record of the group's creation by its first JoinGroup
        numbers = [r["generation"] for r in gens]
        required, allowed = logged_generations(log, group)
        assert numbers[0] == 0 and numbers == sorted(set(numbers)), group
        assert required <= set(numbers[1:]) <= allowed, (group, numbers, required, allowed)
        assert all(r["incarnation"] == 0 for r in gens)
        assert [r["previous_generation"] for r in gens] == [None] + [r["generation"] for r in gens[:-1]]
        assert all(r["ended_by"] == "next_generation" and r["ended_at"] == n["started_at"]
                   for r, n in zip(gens, gens[1:])), group

    a, b = scenario["a"], scenario["b"]
    gens = by_group["an-rebalance"]
    assert gens[0]["member_count"] == 0 and gens[0]["joined"] == []
    first = next(r for r in gens if r["member_count"])  # a alone
    assert first["joined"] == [a] and {m["member_id"] for m in first["members"]} == {a}
    assert first["protocol_type"] == "consumer" and first["protocol"] == "range" and first["leader"] == a
    member = first["members"][0]
    assert member["subscription"] == ["t6"]
    assert sorted(p for t in member["assignment"] for p in t["partitions"]) == list(range(6))
    both = next(r for r in gens if r["member_count"] == 2)
    assert both["joined"] == [b] and both["left"] == []
    assert sorted(p for m in both["members"] for t in m["assignment"] for p in t["partitions"]) == list(range(6))
    alone = next(r for r in gens if r["generation"] > both["generation"] and r["member_count"] == 1)
    assert alone["left"] == [a] and alone["joined"] == [] and alone["leader"] == b
    empty = gens[-1]
    assert (empty["member_count"], empty["left"], empty["protocol"], empty["ended_by"]) == (0, [b], None, None)

    gens = by_group["an-static"]
    replaced = [r for r in gens if r["records"] > 1]
    assert len(replaced) == 1, "the restart rewrote one generation's record, without a rebalance"
    (gen,) = replaced
    assert gen is gens[-1] and gen["left"] == [], "the replaced member did not leave"
    assert set(gen["joined"]) <= {"s1", "s2"}, "static members are known by their instance ids"
    members = {m["group_instance_id"]: m["member_id"] for m in gen["members"]}
    assert members == {"s1": scenario["s1_new"], "s2": scenario["s2"]}
    assert scenario["s1_old"] != scenario["s1_new"]

    gens = by_group["an-deleted"]
    assert gens[-1]["ended_by"] == "deleted" and gens[-1]["ended_at"] is not None
    assert gens[-1]["member_count"] == 0 and gens[-1]["left"] == [scenario["d"]]


def test_commits_and_commit_rates(scenario):
    status = rows(scenario, "commits", "an-status")
    assert len(status) == 2 * ROUNDS + STOP_AFTER
    # librdkafka sends the C string's terminating NUL with the metadata; groupd stores the bytes
    assert {r["metadata"] for r in status} == {f"round-{i}\x00" for i in range(ROUNDS)}
    assert all(r["leader_epoch"] == 7 for r in status)
    p0 = [r["committed_offset"] for r in sorted(status, key=lambda r: r["log_offset"]) if r["partition"] == 0]
    assert p0 == [100 + 10 * i for i in range(ROUNDS)]
    assert [r["metadata"] for r in rows(scenario, "commits", "an-commits")] == ["first", "second"]
    per_group: dict[str, int] = {}
    for r in rows(scenario, "commits"):
        per_group[r["group"]] = per_group.get(r["group"], 0) + 1
    rates: dict[str, int] = {}
    for r in rows(scenario, "commit_rates"):
        rates[r["group"]] = rates.get(r["group"], 0) + r["commits"]
        assert r["minute"].second == 0 and r["commits_per_second"] == pytest.approx(r["commits"] / 60)
    assert rates == per_group
    assert per_group.keys() == {"an-deleted", "an-commits", "an-status"}


def test_partition_status_flags_the_partition_that_stopped_committing(scenario):
    status = {r["partition"]: r for r in rows(scenario, "partition_status", "an-status")}
    assert {p: r["status"] for p, r in status.items()} == {0: "OK", 1: "STALLED", 2: "STOPPED"}
    assert status[0]["window_commits"] == pipeline.DEFAULT_WINDOW and status[0]["offset_advance"] == 90
    assert status[1]["offset_advance"] == 0
    assert status[2]["window_commits"] == STOP_AFTER and status[2]["idle_ms"] > status[2]["window_span_ms"]
    # every partition that has an offset gets a status; a deleted one does not
    assert {(r["group"], r["partition"]) for r in rows(scenario, "partition_status")} == {
        (r["group"], r["partition"]) for r in rows(scenario, "latest_offsets")}


# ---------------------------------------------------------------------------------------------
# `groupd analytics report` on the scenario's tables: what it draws, and how it looks


class Marks(html.parser.HTMLParser):
    """The report's marks: every element with a `class` and `data-*` attributes, by class."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.marks: dict[str, list[dict]] = {}
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "class" in a and any(k.startswith("data-") for k in a):
            self.marks.setdefault(a["class"], []).append(a)


def ms(moment) -> int:
    return int(moment.timestamp() * 1000)


def report_marks(scenario) -> dict[str, list[dict]]:
    with open(scenario["report"], encoding="utf-8") as f:
        return Marks(f.read()).marks


def test_report_draws_the_tables_data(scenario):
    marks = report_marks(scenario)
    gens = rows(scenario, "generations")
    end = max([ms(r["timestamp"]) for r in rows(scenario, "commits")] + [ms(g["last_update"]) for g in gens]
              + [ms(g["ended_at"]) for g in gens if g["ended_at"]])  # a current generation lasts until then
    assert sorted((m["data-group"], int(m["data-incarnation"]), int(m["data-generation"]), int(m["data-start"]),
                   int(m["data-end"]), int(m["data-members"])) for m in marks["generation"]) == sorted(
        (g["group"], g["incarnation"], g["generation"], ms(g["started_at"]),
         ms(g["ended_at"]) if g["ended_at"] else end, g["member_count"]) for g in gens)
    assert [m["data-group"] for m in marks["deletion"]] == ["an-deleted"]
    # one time scale for the whole timeline: width per millisecond is the same for every bar
    wide = [m for m in marks["generation"] if float(m["width"]) > 20]
    per_ms = [float(m["width"]) / (int(m["data-end"]) - int(m["data-start"])) for m in wide]
    assert len(wide) >= 3 and max(per_ms) / min(per_ms) < 1.01, per_ms
    rates = rows(scenario, "commit_rates")
    assert sorted((m["data-group"], int(m["data-minute"]), int(m["data-commits"])) for m in marks["rate"]) == sorted(
        (r["group"], ms(r["minute"]), r["commits"]) for r in rates)
    for group in {r["group"] for r in rates}:  # bar heights are proportional to commits, per chart
        ratios = [float(m["height"]) / int(m["data-commits"]) for m in marks["rate"] if m["data-group"] == group]
        assert max(ratios) - min(ratios) < 0.01, (group, ratios)
    assert sorted((m["data-group"], m["data-topic"], int(m["data-partition"]), m["data-status"])
                  for m in marks["status"]) == sorted(
        (r["group"], r["topic"], r["partition"], r["status"]) for r in rows(scenario, "partition_status"))
    assert re.fullmatch(rf"wrote .*report.html: {len(GROUPS)} groups, {len(gens)} generations, "
                        rf"{len(rates)} commit minutes, \d+ partitions\n", scenario["report_stdout"])


def test_report_renders_in_headless_chromium(scenario, tmp_path):
    """A screenshot of the page shows the timeline's bars, the commit-rate bars and the status
    colours of the an-status partitions (OK, STALLED, STOPPED), each over a visible area."""
    from PIL import Image

    from groupd.analytics.report import GENERATION_COLOURS, STATUS_COLOURS

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is installed by .ci/install-clients"
    shot = tmp_path / "report.png"
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,3000",
                        f"--screenshot={shot}", "file://" + scenario["report"]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    counts = {colour: n for n, colour in image.getcolors(maxcolors=1 << 20)}

    def pixels(hex_colour: str) -> int:
        return counts.get(tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)), 0)

    assert pixels("#ffffff") < image.width * image.height, "not a blank page"
    for colour in (*GENERATION_COLOURS, "#00838f", *(STATUS_COLOURS[s] for s in ("OK", "STALLED", "STOPPED"))):
        assert pixels(colour) > 300, (colour, pixels(colour))
    assert pixels(STATUS_COLOURS["REWIND"]) == 0, "no partition went backwards"


# ---------------------------------------------------------------------------------------------
# In this process: one local[2] session for the rest of the module


@pytest.fixture(scope="module")
def spark():  # first used after the scenario's tests, so after the CLI's JVM has exited
    from groupd.analytics import session

    s = session.build("local[2]", app_name="groupd-tests",
                      conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"})
    yield s
    session.shutdown(s)  # the JVM too: the rest of the suite runs without it


def test_until_answers_offsets_at_a_past_time_and_since_limits_history(spark, scenario):
    rounds = scenario["rounds"]
    until = (rounds[5][1] + rounds[6][0]) // 2  # between the 6th and the 7th round
    records = pipeline.records_of(spark, scenario["data_dir"], until_ms=until)
    latest = {r["partition"]: r["committed_offset"] for r in
              pipeline.latest_offsets(records).where("group = 'an-status'").collect()}
    assert latest == {0: 150, 1: 50, 2: 200 + STOP_AFTER - 1}

    since = rounds[6][0]
    records = pipeline.records_of(spark, scenario["data_dir"]).cache()
    t = pipeline.tables(records, since_ms=since)
    assert t["commits"].where("group = 'an-status'").count() == 2 * (ROUNDS - 6)
    assert t["commits"].where("group <> 'an-status'").count() == 0
    assert t["generations"].count() == 0, "every generation started before the status rounds"
    assert t["latest_offsets"].count() == len(scenario["tables"]["latest_offsets"]), "the whole log, always"
    status = {r["partition"]: r["status"] for r in t["partition_status"].where("group = 'an-status'").collect()}
    assert status == {0: "OK", 1: "STALLED"}, "p2 has no commit since then"
    records.unpersist()


def test_parse_time():
    assert analytics_cli.parse_time("1717236000000") == 1717236000000
    assert analytics_cli.parse_time("2024-06-01T10:00:00Z") == 1717236000000
    assert analytics_cli.parse_time("2024-06-01T10:00:00") == 1717236000000  # UTC unless a zone is given
    assert analytics_cli.parse_time("2024-06-01T12:00:00+02:00") == 1717236000000
    assert analytics_cli.parse_time("15m", now_ms=1_000_000_000) == 1_000_000_000 - 900_000
    with pytest.raises(ValueError):
        analytics_cli.parse_time("yesterday")


def build_log(data_dir: str, partitions: int = 2, batches: int = 40, segment_bytes: int = 2048) -> int:
    """A synthetic log written with the server's own PartitionLog; returns the record count."""
    member = MemberMetadata("m-1", "i-1", "c", "/127.0.0.1", 30000, 10000, b"\x00\x00\x00\x00\x00\x01\x00\x02t6"
                            b"\x00\x00\x00\x00", b"")
    n = 0
    for p in range(partitions):
        log = PartitionLog(data_dir, p, segment_bytes)
        log.load(lambda r: None)
        for i in range(batches):
            records = [Record(OffsetCommitKey(f"g{p}", "t6", j), OffsetCommitValue(i, -1, "", 1000 + i))
                       for j in range(3)]
            if i % 10 == 0:
                records.append(Record(GroupMetadataKey(f"g{p}"), GroupMetadataValue(
                    "consumer", i, "range", "m-1", 5, (member,))))
            log.append(records, fsync=False)
            n += len(records)
        log.close()
    return n


def dumped(data_dir: str) -> list[tuple]:
    """(partition, offset, kind, group, topic, partition, committed offset) per record, as the
    server's own `groupd log dump` reads them."""
    out = []
    for line in inspect.dump(data_dir):
        d = json.loads(line)
        if "error" in d:
            continue
        kind = "tombstone" if d.get("tombstone") else d["type"]
        out.append((d["log_partition"], d["log_offset"], kind, d.get("group"), d.get("topic"),
                    d.get("partition"), d.get("offset")))
    return sorted(out)


def source_rows(spark, data_dir: str) -> list[tuple]:
    df = spark.read.format(SOURCE_NAME).load(data_dir)
    return sorted(tuple(r) for r in df.select("offsets_partition", "log_offset", "kind", "group", "topic",
                                              "partition", "committed_offset").collect())


def test_source_reads_a_partition_per_segment_with_the_servers_codec_and_stops_at_a_torn_tail(spark, tmp_path):
    data_dir = str(tmp_path / "data")
    total = build_log(data_dir)
    for p in (7, 8):  # partitions the server loaded that hold no group: one empty segment each
        empty = PartitionLog(data_dir, p, 2048)
        empty.load(lambda r: None)
        empty.close()
    segs = segments.list_data_dir(data_dir)
    full = segments.with_records(segs)
    assert len(full) > 4 and len(segs) == len(full) + 2
    df = spark.read.format(SOURCE_NAME).load(data_dir)
    assert df.rdd.getNumPartitions() == len(full), "no Spark task for an empty segment"
    assert df.schema == SCHEMA
    assert df.count() == total
    # tear the last segment of partition 0 in the middle of its last batch, as a crash would
    last = [s for s in segs if s.partition == 0][-1].path
    size = os.path.getsize(last)
    with open(last, "r+b") as f:
        f.truncate(size - 20)
    # a compaction's leftover rewrite is not a segment
    shutil.copy(segs[0].path, segs[0].path + ".cleaned")
    got = source_rows(spark, data_dir)
    assert got == dumped(data_dir)
    assert total - 4 <= len(got) < total  # the torn batch (3 or 4 records) is not read
    group = df.where("kind = 'group_metadata'").first()
    assert group["members"][0]["group_instance_id"] == "i-1" and group["members"][0]["subscription"] == ["t6"]


def test_corrupt_closed_segment_is_read_around_as_the_server_loads_it(spark, tmp_path):
    """One copy of the log: the valid batches after corrupt bytes are read, in the source as in the
    server's load and `groupd log dump`; only the damaged batch is missing."""
    data_dir = str(tmp_path / "data")
    total = build_log(data_dir)
    closed = segments.list_data_dir(data_dir)[0]
    assert not closed.last
    with open(closed.path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    stats = segments.ReadStats()
    rows = list(segments.read_segment(closed, stats))
    assert len(stats.corrupt) == 1 and closed.path in stats.corrupt[0]
    assert rows and rows[-1][1] > rows[0][1]  # batches after the damaged one are read
    got = source_rows(spark, data_dir)
    assert got == dumped(data_dir)
    assert total - 4 <= len(got) < total  # the damaged batch (3 or 4 records) is not read


def test_cli_refuses_a_bad_path_before_starting_spark(tmp_path, capsys):
    assert groupd_main(["analytics", "run", "--data-dir", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert groupd_main(["analytics", "run", "--data-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "no offsets log here" in capsys.readouterr().err
    assert groupd_main(["analytics", "run", "--data-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "o"),
                        "--since", "last tuesday"]) == 2
    assert "is not a time" in capsys.readouterr().err


def test_a_segment_that_vanishes_or_is_compacted_after_listing_is_read_as_it_is_then(tmp_path):
    data_dir = str(tmp_path / "data")
    build_log(data_dir, partitions=1, batches=60)
    reader = GroupdOffsetsDataSource({"path": data_dir}).reader(SCHEMA)
    parts = reader.partitions()
    assert len(parts) > 3

    def read(part) -> list[dict]:
        return [r for batch in reader.read(part) for r in batch.to_pylist()]

    before = [read(p) for p in parts]
    os.remove(parts[0].segment.path)  # compaction removed a segment whose records were all superseded
    assert read(parts[0]) == []
    result = compaction.compact(partition_dir(data_dir, 0), now_ms(), 86_400_000)
    assert result.segments_cleaned > 0
    for p, rows_before in zip(parts[1:], before[1:]):
        after = read(p)
        assert {r["log_offset"] for r in after} <= {r["log_offset"] for r in rows_before}, "offsets are kept"
    # the active segment, appended to meanwhile, is read up to where it is complete
    log = PartitionLog(data_dir, 0, 1 << 20)
    log.load(lambda r: None)
    log.append([Record(OffsetCommitKey("g0", "t6", 0), OffsetCommitValue(999, -1, "", 1))], fsync=False)
    log.close()
    assert read(parts[-1])[-1]["committed_offset"] == 999


LIVE_APPENDS = 1500  # about 3 s of appends on an idle machine: the first read runs while they land


def test_reading_a_live_data_dir_while_the_log_grows_and_compacts(spark, tmp_path):
    data_dir = str(tmp_path / "data")
    build_log(data_dir, partitions=1, batches=20)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        log = PartitionLog(data_dir, 0, 2048)
        log.load(lambda r: None)
        i = 0
        try:
            # bounded: on a loaded machine the reads are slow, and an unbounded writer would grow
            # the log (and the reads' task count) for as long as they take
            while not stop.is_set() and i < LIVE_APPENDS:
                i += 1
                log.append([Record(OffsetCommitKey("g0", "t6", j), OffsetCommitValue(1000 + i, -1, "", now_ms()))
                            for j in range(3)], fsync=False)
                if i % 25 == 0:
                    compaction.compact(log.directory, now_ms(), 86_400_000)
                time.sleep(0.002)
        except BaseException as e:  # noqa: BLE001 — reported by the test
            errors.append(e)
        finally:
            log.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(3):
            df = spark.read.format(SOURCE_NAME).load(data_dir)
            assert df.count() > 0
            pipeline.latest_offsets(df).collect()
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors
    # stopped: the compacted view equals the server's replay of the same log
    replay: dict = {}
    PartitionLog(data_dir, 0, 2048).load(lambda r: replay.__setitem__(r.key, r.value))
    expected = {(k.group, k.topic, k.partition): v.offset for k, v in replay.items()
                if isinstance(k, OffsetCommitKey) and v is not None}
    got = {(r["group"], r["topic"], r["partition"]): r["committed_offset"]
           for r in pipeline.latest_offsets(spark.read.format(SOURCE_NAME).load(data_dir)).collect()}
    assert got == expected
