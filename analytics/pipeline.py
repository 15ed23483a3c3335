"""The pipeline: the records of a data directory (`groupd_offsets`) → five tables.

- `commits`: every offset commit, oldest first by log position.
- `latest_offsets`: the compacted view, what OffsetFetch answers for the same log: the last
  record per (group, topic, partition), tombstones applied, and only for groups the server would
  have (a group tombstone drops the group; an offset commit after it creates it again).
- `generations`: one row per (group, incarnation, generation) that reached the log (a consumer
  group's epochs count as its generations): when it started, its members, protocol and leader,
  who joined and who left since the previous generation, and how it ended (the next generation,
  or the group's deletion).
- `commit_rates`: offset commits per group per minute.
- `partition_status`: Burrow's evaluation rules over the last `window` commits of each partition
  that has a committed offset and its lag, when log ends are given (see `partition_status`).

Every function takes and returns DataFrames, so the tables can also be built in a notebook:
`tables(spark.read.format("groupd_offsets").load(d))`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import SOURCE_NAME, TABLES
from .progress import ReadProgress
from .segments import (
    CONSUMER_GROUP_EPOCH,
    CONSUMER_MEMBER,
    GROUP_METADATA,
    OFFSET_COMMIT,
    TOMBSTONE,
    list_data_dir,
    with_records,
)
from .source import register

DEFAULT_WINDOW = 10  # commits per partition that Burrow-style evaluation looks at (Burrow's `intervals`)
GROUP_KEY_TYPE, CONSUMER_GROUP_KEY_TYPE, CONSUMER_MEMBER_KEY_TYPE = 2, 3, 5  # record types of the group records


def _offset_key() -> F.Column:
    return F.col("key_type").isin(0, 1)


def _group_key() -> F.Column:
    return F.col("key_type") == GROUP_KEY_TYPE


_KEY = ["group", "topic", "partition"]


def _ts(col: str) -> F.Column:
    """A millisecond column (-1 = none) as a timestamp (null for none)."""
    return F.when(F.col(col) >= 0, F.timestamp_millis(F.col(col)))


def commits(records: DataFrame) -> DataFrame:
    return (records.where(F.col("kind") == OFFSET_COMMIT)
            .select("group", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
                    _ts("commit_timestamp").alias("commit_time"), _ts("expire_timestamp").alias("expire_time"),
                    "timestamp", "offsets_partition", "log_offset"))


def latest_offsets(records: DataFrame) -> DataFrame:
    """The server's replay (`GroupShard.apply`) in SQL: last value per offset key wins, a
    tombstone deletes; OffsetFetch answers nothing for a group the log deleted, unless offsets
    were committed to it again afterwards (a commit re-creates a group)."""
    keyed = records.where(_offset_key() & F.col("kind").isin(OFFSET_COMMIT, TOMBSTONE))
    newest_first = Window.partitionBy(*_KEY).orderBy(F.desc("log_offset"), F.desc("offsets_partition"))
    last = keyed.withColumn("_rn", F.row_number().over(newest_first)).where(
        (F.col("_rn") == 1) & (F.col("kind") == OFFSET_COMMIT))
    groups = records.where(_offset_key() | _group_key()).groupBy("group").agg(
        F.max(F.when(_group_key() & (F.col("kind") == TOMBSTONE), F.col("log_offset"))).alias("_deleted"),
        F.max(F.when(_group_key() & (F.col("kind") == GROUP_METADATA), F.col("log_offset"))).alias("_metadata"),
        F.max(F.when(F.col("kind") == OFFSET_COMMIT, F.col("log_offset"))).alias("_commit"))
    live = groups.where(F.col("_deleted").isNull() | (F.col("_metadata") > F.col("_deleted"))
                        | (F.col("_commit") > F.col("_deleted"))).select("group")
    return (last.join(live, "group", "left_semi")
            .select("group", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
                    _ts("commit_timestamp").alias("commit_time"), _ts("expire_timestamp").alias("expire_time"),
                    "timestamp", "offsets_partition", "log_offset"))


def _group_deleted() -> F.Column:
    """The tombstone of a classic group's record or of a consumer group's epoch record."""
    return F.col("key_type").isin(GROUP_KEY_TYPE, CONSUMER_GROUP_KEY_TYPE) & (F.col("kind") == TOMBSTONE)


def generations(records: DataFrame) -> DataFrame:
    """Per group generation (classic groups) or epoch (consumer groups, KIP-848; `group_type` says
    which). A group deleted and created again starts a new `incarnation` (its generations count
    from 0 again). Classic members are identified by their group instance id when they have one (a
    restarted static member is the same member), else by member id; `members` are as of the
    generation's last record (a static member's replacement rewrites it). See `_consumer_epochs`
    for consumer groups."""
    g = records.where(F.col("key_type").isin(GROUP_KEY_TYPE, CONSUMER_GROUP_KEY_TYPE, CONSUMER_MEMBER_KEY_TYPE))
    upto = (Window.partitionBy("group").orderBy("log_offset", "offsets_partition")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    g = g.withColumn("incarnation", F.sum(F.when(_group_deleted(), 1).otherwise(0)).over(upto))
    members_type = records.schema["members"].dataType
    per = _classic_generations(g).unionByName(_consumer_epochs(g, members_type))
    deletions = (g.where(_group_deleted())
                 .select("group", (F.col("incarnation") - 1).alias("incarnation"),
                         F.col("timestamp").alias("_deleted_at")))
    order = Window.partitionBy("group", "incarnation").orderBy("_first")
    per = (per.withColumn("previous_generation", F.lag("generation").over(order))
           .withColumn("_next_start", F.lead("started_at").over(order))
           .join(deletions, ["group", "incarnation"], "left"))
    return per.select(
        "group", "incarnation", "generation", "started_at",
        F.coalesce("_next_start", "_deleted_at").alias("ended_at"),
        F.when(F.col("_next_start").isNotNull(), "next_generation")
         .when(F.col("_deleted_at").isNotNull(), "deleted").alias("ended_by"),
        "protocol_type", "protocol", "leader", "member_count", "members", "joined", "left",
        "previous_generation", "records", "last_update", "state_time", "group_type")


def _classic_generations(g: DataFrame) -> DataFrame:
    per = g.where(F.col("kind") == GROUP_METADATA).groupBy("group", "incarnation", "generation").agg(
        F.min("timestamp").alias("started_at"),
        F.max("timestamp").alias("last_update"),
        F.min("log_offset").alias("_first"),
        F.count(F.lit(1)).alias("records"),
        F.max_by(F.struct("protocol_type", "protocol", "leader", "state_timestamp", "members"),
                 "log_offset").alias("_last"))
    order = Window.partitionBy("group", "incarnation").orderBy("_first")
    no_ids = F.array().cast("array<string>")
    per = (per.withColumn("_ids", F.transform("_last.members",
                                              lambda m: F.coalesce(m["group_instance_id"], m["member_id"])))
           .withColumn("_prev_ids", F.coalesce(F.lag("_ids").over(order), no_ids)))
    return per.select(
        "group", "incarnation", "generation", "started_at", "last_update", "_first", "records",
        F.col("_last.protocol_type").alias("protocol_type"), F.col("_last.protocol").alias("protocol"),
        F.col("_last.leader").alias("leader"), F.size("_last.members").alias("member_count"),
        F.col("_last.members").alias("members"),
        F.array_sort(F.array_except("_ids", "_prev_ids")).alias("joined"),
        F.array_sort(F.array_except("_prev_ids", "_ids")).alias("left"),
        _ts("_last.state_timestamp").alias("state_time"), F.lit("classic").alias("group_type"))


def _consumer_epochs(g: DataFrame, members_type) -> DataFrame:
    """Per consumer-group epoch, from its epoch records and its members' metadata records: a
    member joins with its first metadata record and leaves with the tombstone of it (both written
    just before the epoch record they cause, as Kafka does). `member_count` counts the members
    alive at the epoch's last record; `joined`/`left` are the members (group instance id, else
    member id) that came or went since the previous epoch record; `members` is empty (the member
    records carry no assignment), and protocol, leader and state_time are null."""
    c = g.where(F.col("key_type").isin(CONSUMER_GROUP_KEY_TYPE, CONSUMER_MEMBER_KEY_TYPE))
    is_member = F.col("key_type") == CONSUMER_MEMBER_KEY_TYPE
    member = F.get(F.col("members"), 0)  # null, not an error, where there is no member
    by_member = Window.partitionBy("group", "_member_id").orderBy("log_offset")
    c = (c.withColumn("_member_id", F.when(is_member, member["member_id"]))
         .withColumn("_was", F.lag("kind").over(by_member))
         # a static member by its instance id, which its tombstone does not carry: the one before it does
         .withColumn("_member", F.coalesce(member["group_instance_id"],
                                           F.lag(member["group_instance_id"]).over(by_member), member["member_id"])))
    c = c.withColumn("_delta", F.when(is_member & (F.col("kind") == CONSUMER_MEMBER)
                                      & (F.col("_was").isNull() | (F.col("_was") == TOMBSTONE)), 1)
                     .when(is_member & (F.col("kind") == TOMBSTONE) & (F.col("_was") == CONSUMER_MEMBER), -1)
                     .otherwise(0))
    upto = (Window.partitionBy("group", "incarnation").orderBy("log_offset")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    is_epoch = F.when(F.col("kind") == CONSUMER_GROUP_EPOCH, 1).otherwise(0)
    c = (c.withColumn("_live", F.sum("_delta").over(upto))
         .withColumn("_ord", F.sum(is_epoch).over(upto) - is_epoch + 1))  # the epoch record a row leads to
    changes = c.where(F.col("_delta") != 0).groupBy("group", "incarnation", "_ord").agg(
        F.collect_list(F.when(F.col("_delta") == 1, F.col("_member"))).alias("_joined"),
        F.collect_list(F.when(F.col("_delta") == -1, F.col("_member"))).alias("_left"))
    epochs = c.where(F.col("kind") == CONSUMER_GROUP_EPOCH).join(changes, ["group", "incarnation", "_ord"], "left")
    no_ids = F.array().cast("array<string>")
    per = epochs.groupBy("group", "incarnation", "generation").agg(
        F.min("timestamp").alias("started_at"),
        F.max("timestamp").alias("last_update"),
        F.min("log_offset").alias("_first"),
        F.count(F.lit(1)).alias("records"),
        F.max_by("_live", "log_offset").alias("member_count"),
        F.flatten(F.collect_list(F.coalesce("_joined", no_ids))).alias("_joined"),
        F.flatten(F.collect_list(F.coalesce("_left", no_ids))).alias("_left"))
    return per.select(
        "group", "incarnation", "generation", "started_at", "last_update", "_first", "records",
        F.lit("consumer").alias("protocol_type"), F.lit(None).cast("string").alias("protocol"),
        F.lit(None).cast("string").alias("leader"), F.col("member_count").cast("int").alias("member_count"),
        F.array().cast(members_type).alias("members"),
        F.array_sort(F.array_distinct("_joined")).alias("joined"),
        F.array_sort(F.array_distinct("_left")).alias("left"),
        F.lit(None).cast("timestamp").alias("state_time"), F.lit("consumer").alias("group_type"))


def commit_rates(commit_history: DataFrame) -> DataFrame:
    return (commit_history.groupBy("group", F.date_trunc("minute", "timestamp").alias("minute"))
            .agg(F.count(F.lit(1)).alias("commits"),
                 F.count_distinct("topic", "partition").alias("partitions"))
            .withColumn("commits_per_second", F.col("commits") / F.lit(60.0)))


def partition_status(records: DataFrame, commit_history: DataFrame, latest: DataFrame,
                     window: int = DEFAULT_WINDOW, log_ends: DataFrame | None = None) -> DataFrame:
    """Burrow's partition rules over each partition's commit history and, when `log_ends` (topic,
    partition, log_end) is given, its lag now: `lag` = log_end − committed offset (0 when the
    commit is ahead). The offsets log holds no log-end offsets (the records plane keeps its records
    in memory), so they come from outside (`groupd analytics run --log-ends`); without them `lag`
    is null and the lag conditions below are left out. For each partition with a committed
    offset, the window is its last `window` commits (since its offsets were last deleted), and
    `now` is the newest commit in the data (of any group). In Burrow's order:

    1. REWIND: the committed offset went backwards inside the window.
    2. OK when the lag is 0: the consumer is caught up (Burrow: a zero lag in the window is OK),
       however it commits.
    3. STOPPED: the time since the partition's last commit (to `now`) is longer than the window
       spans (its first to last commit): commits stopped (Burrow: "the consumer is not committing").
    4. STALLED: at least two commits in the window and the offset never moved: commits continue,
       consumption does not (Burrow: offsets not changing while lag is non-zero; without log ends
       a consumer that is caught up on an idle topic looks the same).
    5. LAGGING: the lag is larger than the offset advanced over the whole window: at the window's
       pace the consumer needs longer than the window to catch up (Burrow's WARN is "the lag grew
       over the window"; one log end per partition cannot show growth, this is the nearest rule).
    6. OK otherwise.
    """
    tombstoned = (records.where(_offset_key() & (F.col("kind") == TOMBSTONE)).groupBy(*_KEY)
                  .agg(F.max("log_offset").alias("_deleted")))
    c = (commit_history.join(latest.select(*_KEY), _KEY, "left_semi").join(tombstoned, _KEY, "left")
         .where(F.col("_deleted").isNull() | (F.col("log_offset") > F.col("_deleted"))))
    newest_first = Window.partitionBy(*_KEY).orderBy(F.desc("log_offset"))
    oldest_first = Window.partitionBy(*_KEY).orderBy("log_offset")
    c = (c.withColumn("_rn", F.row_number().over(newest_first))
         .withColumn("_prev", F.lag("committed_offset").over(oldest_first))
         .where(F.col("_rn") <= window))
    w = c.groupBy(*_KEY).agg(
        F.count(F.lit(1)).alias("window_commits"),
        F.min("timestamp").alias("window_start"),
        F.max("timestamp").alias("last_commit"),
        F.max_by("committed_offset", "log_offset").alias("committed_offset"),
        F.min_by("committed_offset", "log_offset").alias("_first_offset"),
        F.min("committed_offset").alias("_min"),
        F.max("committed_offset").alias("_max"),
        F.max(F.when((F.col("_rn") < window) & (F.col("committed_offset") < F.col("_prev")), 1)
              .otherwise(0)).alias("_rewind"))
    now = commit_history.agg(F.max("timestamp").alias("evaluated_at"))
    w = (w.crossJoin(F.broadcast(now))
         .withColumn("idle_ms", F.unix_millis("evaluated_at") - F.unix_millis("last_commit"))
         .withColumn("window_span_ms", F.unix_millis("last_commit") - F.unix_millis("window_start")))
    if log_ends is None:
        w = w.withColumn("log_end", F.lit(None).cast("bigint"))
    else:
        w = w.join(F.broadcast(log_ends.select("topic", "partition", F.col("log_end").cast("bigint"))),
                   ["topic", "partition"], "left")
    behind = F.greatest(F.col("log_end") - F.col("committed_offset"), F.lit(0))  # greatest() skips a null
    w = (w.withColumn("lag", F.when(F.col("log_end").isNotNull(), behind))
         .withColumn("offset_advance", F.col("committed_offset") - F.col("_first_offset")))
    status = (F.when(F.col("_rewind") == 1, "REWIND")
              .when(F.col("lag") == 0, "OK")
              .when(F.col("idle_ms") > F.col("window_span_ms"), "STOPPED")
              .when((F.col("window_commits") >= 2) & (F.col("_min") == F.col("_max")), "STALLED")
              .when(F.col("lag") > F.col("offset_advance"), "LAGGING")
              .otherwise("OK"))
    return w.select(*_KEY, status.alias("status"), "committed_offset", "offset_advance",
                    "last_commit", "window_start", "window_commits", "idle_ms", "window_span_ms",
                    "evaluated_at", "log_end", "lag")


def tables(records: DataFrame, since_ms: int | None = None, window: int = DEFAULT_WINDOW,
           log_ends: DataFrame | None = None) -> dict[str, DataFrame]:
    """The five tables from a records DataFrame. `since_ms` limits the history tables (commits,
    commit rates, the commits partition status looks at, generations started) to records at or
    after that time; `latest_offsets` always replays the whole log it is given. `log_ends`
    (topic, partition, log_end) gives partition status its lag (see `partition_status`)."""
    since = None if since_ms is None else F.timestamp_millis(F.lit(since_ms))
    history = commits(records)
    if since is not None:
        history = history.where(F.col("timestamp") >= since)
    latest = latest_offsets(records)
    gens = generations(records)
    if since is not None:
        gens = gens.where(F.col("started_at") >= since)
    out = {
        "commits": history,
        "latest_offsets": latest,
        "generations": gens,
        "commit_rates": commit_rates(history),
        "partition_status": partition_status(records, history, latest, window, log_ends),
    }
    assert tuple(out) == TABLES
    return out


@dataclasses.dataclass
class Summary:
    segments: int
    offsets_partitions: int
    records: int
    groups: int
    rows: dict[str, int]
    seconds: float


def records_of(spark: SparkSession, data_dir: str, until_ms: int | None = None) -> DataFrame:
    register(spark)
    records = spark.read.format(SOURCE_NAME).load(data_dir)
    if until_ms is not None:
        records = records.where(F.col("timestamp") <= F.timestamp_millis(F.lit(until_ms)))
    return records


def log_ends_frame(spark: SparkSession, log_ends: dict[str, dict[int, int]]) -> DataFrame:
    """{topic: {partition: log-end offset}} as a (topic, partition, log_end) DataFrame."""
    rows = [(topic, int(p), int(end)) for topic, ends in log_ends.items() for p, end in ends.items()]
    return spark.createDataFrame(rows, "topic string, partition int, log_end bigint")


def run(spark: SparkSession, data_dir: str, out: str, since_ms: int | None = None, until_ms: int | None = None,
        window: int = DEFAULT_WINDOW, progress: Callable[[str], None] = print,
        log_ends: dict[str, dict[int, int]] | None = None) -> Summary:
    """Read `data_dir` once (cached), write every table as Parquet under `out/<table>`; `log_ends`:
    see `partition_status`."""
    start = time.monotonic()
    listed = list_data_dir(data_dir)
    segments = with_records(listed)
    partitions = len({s.partition for s in segments})
    progress(f"reading {data_dir}: {len(segments)} segments in {partitions} offsets partitions, "
             f"{sum(s.size for s in segments) / 1e6:.3g} MB ({len(listed) - len(segments)} empty segments "
             f"skipped; master {spark.sparkContext.master})")
    records = records_of(spark, data_dir, until_ms).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with ReadProgress(spark, max(len(segments), 1), progress):
            total = records.count()
        groups = records.where(F.col("group").isNotNull()).select("group").distinct().count()
        progress(f"read {total} records of {groups} groups in {time.monotonic() - start:.1f}s")
        rows = {}
        ends = None if log_ends is None else log_ends_frame(spark, log_ends)
        for name, df in tables(records, since_ms, window, ends).items():
            t = time.monotonic()
            path = os.path.join(out, name)
            df.write.mode("overwrite").parquet(path)
            rows[name] = spark.read.parquet(path).count()
            progress(f"wrote {name}: {rows[name]} rows in {time.monotonic() - t:.1f}s -> {path}")
    finally:
        records.unpersist()
    return Summary(len(segments), partitions, total, groups, rows, time.monotonic() - start)
