"""Analytics over the offsets log: a Spark Python Data Source (`groupd_offsets`) that reads a
data directory's `__consumer_offsets` segments with the server's own codec, and a pipeline that
turns them into Parquet tables (commit history, the compacted offsets, rebalance history, commit
rates, Burrow-style partition status).

Installed with the `spark` extra (`.ci/install-python spark` in groupd's clone); the server never imports this
package. Entry points:

    groupd analytics run --data-dir D --out OUT [--master URL] [--since TIME] [--until TIME]
    groupd analytics report --tables OUT [--out FILE]     (HTML, from the tables; no Spark)

    from groupd.analytics.source import register
    register(spark)
    spark.read.format("groupd_offsets").load("/var/lib/groupd/data")

`analytics.segments` (listing and decoding segments) needs neither pyspark nor pyarrow.
"""

SOURCE_NAME = "groupd_offsets"
TABLES = ("commits", "latest_offsets", "generations", "commit_rates", "partition_status")
