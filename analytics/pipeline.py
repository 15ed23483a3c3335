"""The pipeline: the records of a data directory (`groupd_offsets`) → five tables.

- `commits`: every offset commit, oldest first by log position.
- `latest_offsets`: the compacted view, what OffsetFetch answers for the same log: the last
  record per (group, topic, partition), tombstones applied, and only for groups the server would
  have (a group tombstone drops the group; an offset commit after it creates it again).
- `generations`: one row per (group, incarnation, generation) that reached the log: when it
  started, its members, protocol and leader, who joined and who left since the previous
  generation, and how it ended (the next generation, or the group's deletion).
- `commit_rates`: offset commits per group per minute.
- `partition_status`: Burrow's evaluation rules over the last `window` commits of each partition
  that has a committed offset (see `partition_status` for the rules).

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
from .segments import GROUP_METADATA, OFFSET_COMMIT, TOMBSTONE, list_data_dir, with_records
from .source import register

DEFAULT_WINDOW = 10  # commits per partition that Burrow-style evaluation looks at (Burrow's `intervals`)



def _offset_key() -> F.Column:
    return F.col("key_type").isin(0, 1)


def _group_key() -> F.Column:
    return F.col("key_type") == 2


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


def generations(records: DataFrame) -> DataFrame:
    """Per group generation. A group deleted and created again starts a new `incarnation`
    (its generations count from 0 again). Members are identified by their group instance id when
    they have one (a restarted static member is the same member), else by member id; `members`
    are as of the generation's last record (a static member's replacement rewrites it)."""
    g = records.where(_group_key())
    upto = (Window.partitionBy("group").orderBy("log_offset", "offsets_partition")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    g = g.withColumn("incarnation", F.sum(F.when(F.col("kind") == TOMBSTONE, 1).otherwise(0)).over(upto))
    per = g.where(F.col("kind") == GROUP_METADATA).groupBy("group", "incarnation", "generation").agg(
        F.min("timestamp").alias("started_at"),
        F.max("timestamp").alias("last_update"),
        F.min("log_offset").alias("_first"),
        F.count(F.lit(1)).alias("records"),
        F.max_by(F.struct("protocol_type", "protocol", "leader", "state_timestamp", "members"),
                 "log_offset").alias("_last"))
    deletions = (g.where(F.col("kind") == TOMBSTONE)
                 .select("group", (F.col("incarnation") - 1).alias("incarnation"),
                         F.col("timestamp").alias("_deleted_at")))
    order = Window.partitionBy("group", "incarnation").orderBy("_first")
    no_ids = F.array().cast("array<string>")
    per = (per.withColumn("_ids", F.transform("_last.members",
                                              lambda m: F.coalesce(m["group_instance_id"], m["member_id"])))
           .withColumn("_prev_ids", F.coalesce(F.lag("_ids").over(order), no_ids))
           .withColumn("previous_generation", F.lag("generation").over(order))
           .withColumn("_next_start", F.lead("started_at").over(order))
           .join(deletions, ["group", "incarnation"], "left"))
    return per.select(
        "group", "incarnation", "generation", "started_at",
        F.coalesce("_next_start", "_deleted_at").alias("ended_at"),
        F.when(F.col("_next_start").isNotNull(), "next_generation")
         .when(F.col("_deleted_at").isNotNull(), "deleted").alias("ended_by"),
        F.col("_last.protocol_type").alias("protocol_type"), F.col("_last.protocol").alias("protocol"),
        F.col("_last.leader").alias("leader"), F.size("_last.members").alias("member_count"),
        F.col("_last.members").alias("members"),
        F.array_sort(F.array_except("_ids", "_prev_ids")).alias("joined"),
        F.array_sort(F.array_except("_prev_ids", "_ids")).alias("left"),
        "previous_generation", "records", "last_update",
        _ts("_last.state_timestamp").alias("state_time"))


def commit_rates(commit_history: DataFrame) -> DataFrame:
    return (commit_history.groupBy("group", F.date_trunc("minute", "timestamp").alias("minute"))
            .agg(F.count(F.lit(1)).alias("commits"),
                 F.count_distinct("topic", "partition").alias("partitions"))
            .withColumn("commits_per_second", F.col("commits") / F.lit(60.0)))


def partition_status(records: DataFrame, commit_history: DataFrame, latest: DataFrame,
                     window: int = DEFAULT_WINDOW) -> DataFrame:
    """Burrow's partition rules, on commit history alone (groupd has no log-end offsets, so the
    lag-based rules become offset-based). For each partition with a committed offset, the window
    is its last `window` commits (since its offsets were last deleted), and `now` is the newest
    commit in the data (of any group). In Burrow's order:

    1. REWIND: the committed offset went backwards inside the window.
    2. STOPPED: the time since the partition's last commit (to `now`) is longer than the window
       spans (its first to last commit): commits stopped (Burrow: "the consumer is not committing").
    3. STALLED: at least two commits in the window and the offset never moved: commits continue,
       consumption does not (Burrow: offsets not changing while lag is non-zero; a consumer that
       is caught up on an idle topic looks the same without log-end offsets).
    4. OK otherwise.
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
    status = (F.when(F.col("_rewind") == 1, "REWIND")
              .when(F.col("idle_ms") > F.col("window_span_ms"), "STOPPED")
              .when((F.col("window_commits") >= 2) & (F.col("_min") == F.col("_max")), "STALLED")
              .otherwise("OK"))
    return w.select(*_KEY, status.alias("status"), "committed_offset",
                    (F.col("committed_offset") - F.col("_first_offset")).alias("offset_advance"),
                    "last_commit", "window_start", "window_commits", "idle_ms", "window_span_ms",
                    "evaluated_at")


def tables(records: DataFrame, since_ms: int | None = None, window: int = DEFAULT_WINDOW) -> dict[str, DataFrame]:
    """The five tables from a records DataFrame. `since_ms` limits the history tables (commits,
    commit rates, the commits partition status looks at, generations started) to records at or
    after that time; `latest_offsets` always replays the whole log it is given."""
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
        "partition_status": partition_status(records, history, latest, window),
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


def run(spark: SparkSession, data_dir: str, out: str, since_ms: int | None = None, until_ms: int | None = None,
        window: int = DEFAULT_WINDOW, progress: Callable[[str], None] = print) -> Summary:
    """Read `data_dir` once (cached), write every table as Parquet under `out/<table>`."""
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
        for name, df in tables(records, since_ms, window).items():
            t = time.monotonic()
            path = os.path.join(out, name)
            df.write.mode("overwrite").parquet(path)
            rows[name] = spark.read.parquet(path).count()
            progress(f"wrote {name}: {rows[name]} rows in {time.monotonic() - t:.1f}s -> {path}")
    finally:
        records.unpersist()
    return Summary(len(segments), partitions, total, groups, rows, time.monotonic() - start)
