"""`groupd_offsets`: a Spark Python Data Source (pyspark 4, `pyspark.sql.datasource`) over a
groupd data directory.

    from groupd.analytics.source import register
    register(spark)
    records = spark.read.format("groupd_offsets").load("/var/lib/groupd/data")

One input partition per segment file that holds bytes (empty segments, which the server creates
for every partition it loads, cost no Spark task), so segments are decoded in parallel; each executor reads
its segment with `analytics.segments.read_segment` (the server's codec and CRC checks, torn tails
and vanished segments handled as the server would) and hands Spark Arrow record batches, which
skips Spark's per-value Python conversion. The schema is `SCHEMA` (one row per record, see
`analytics.segments.COLUMNS`).

Options: `path` (or `load(path)`): the data directory; `batchRows` (default 16384): rows per
Arrow batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from . import SOURCE_NAME
from .segments import COLUMNS, MEMBER_FIELDS, Segment, list_data_dir, read_segment, with_records

MEMBER = StructType([
    StructField("member_id", StringType()),
    StructField("group_instance_id", StringType()),
    StructField("client_id", StringType()),
    StructField("client_host", StringType()),
    StructField("rebalance_timeout", IntegerType()),
    StructField("session_timeout", IntegerType()),
    StructField("subscription", ArrayType(StringType())),
    StructField("assignment", ArrayType(StructType([
        StructField("topic", StringType()),
        StructField("partitions", ArrayType(IntegerType())),
    ]))),
    StructField("subscription_bytes", BinaryType()),
    StructField("assignment_bytes", BinaryType()),
])

SCHEMA = StructType([
    StructField("offsets_partition", IntegerType()),
    StructField("log_offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("kind", StringType()),
    StructField("key_type", ShortType()),
    StructField("group", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("committed_offset", LongType()),
    StructField("leader_epoch", IntegerType()),
    StructField("metadata", StringType()),
    StructField("commit_timestamp", LongType()),
    StructField("expire_timestamp", LongType()),
    StructField("generation", IntegerType()),
    StructField("protocol_type", StringType()),
    StructField("protocol", StringType()),
    StructField("leader", StringType()),
    StructField("state_timestamp", LongType()),
    StructField("members", ArrayType(MEMBER)),
])
assert tuple(SCHEMA.fieldNames()) == COLUMNS and tuple(MEMBER.fieldNames()) == MEMBER_FIELDS


class SegmentPartition(InputPartition):
    """One segment file (None: a data directory without records)."""

    def __init__(self, segment: Segment | None) -> None:
        super().__init__(segment)
        self.segment = segment


class GroupdOffsetsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"{SOURCE_NAME}: no data directory given: .load(<data.dir>) or .option('path', ...)")
        return GroupdOffsetsReader(path, int(self.options.get("batchRows", 16384)))


class GroupdOffsetsReader(DataSourceReader):
    def __init__(self, data_dir: str, batch_rows: int) -> None:
        self.data_dir = data_dir
        self.batch_rows = batch_rows

    def partitions(self) -> Sequence[InputPartition]:
        try:
            segments = list_data_dir(self.data_dir)
        except (FileNotFoundError, NotADirectoryError) as e:
            raise FileNotFoundError(f"{SOURCE_NAME}: {e}") from None
        return [SegmentPartition(s) for s in with_records(segments)] or [SegmentPartition(None)]

    def read(self, partition: InputPartition) -> Iterator:
        segment = partition.segment
        if segment is None:
            return
        yield from arrow_batches(read_segment(segment), self.batch_rows)


_ARROW = None


def _arrow():
    """(pyarrow, the Arrow schema Spark expects for SCHEMA, the timestamp column's index)."""
    global _ARROW
    if _ARROW is None:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        _ARROW = pa, to_arrow_schema(SCHEMA, timezone="UTC"), COLUMNS.index("timestamp")
    return _ARROW


def arrow_batches(rows: Iterator[tuple], batch_rows: int = 16384) -> Iterator:
    """Arrow record batches of at most `batch_rows` rows (SCHEMA's Arrow form)."""
    pa, schema, ts = _arrow()
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= batch_rows:
            yield _batch(pa, schema, ts, chunk)
            chunk = []
    if chunk:
        yield _batch(pa, schema, ts, chunk)


def _batch(pa, schema, ts: int, rows: list[tuple]):
    columns = list(zip(*rows))
    arrays = []
    for i, (field, values) in enumerate(zip(schema, columns)):
        if i == ts:  # milliseconds → Spark's microsecond UTC timestamps
            arrays.append(pa.array(values, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(field.type))
        else:
            arrays.append(pa.array(values, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def register(spark) -> None:
    """Make `spark.read.format("groupd_offsets")` available in this session (once per session)."""
    if not getattr(spark, "_groupd_offsets_registered", False):
        spark.dataSource.register(GroupdOffsetsDataSource)
        spark._groupd_offsets_registered = True
