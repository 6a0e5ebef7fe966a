"""Events/s of Nexmark bids written to object storage through Arroyo (planner + runner) and
written by hand in PySpark with each system's own streaming sink, side by side in one JVM on
the same S3 server (versitygw, arroyo.testing.s3):

- ``parquet_s3``: the filesystem sink (Parquet) / Spark's file sink (``format("parquet")``);
- ``delta_s3``: the delta sink / Delta's streaming sink (``format("delta")``);
- ``iceberg_s3``: the iceberg sink in a Hadoop catalog on S3 / Iceberg's streaming sink
  (``toTable``) in the same catalog.

For Parquet a third row shows the plain write in a Python foreachBatch function (``df.write``,
neither exactly once for plain readers nor named per batch): what a sink that runs Python per
micro-batch pays before doing anything of its own.

Both sides read fixed-size micro-batches of the same generator (bench/side_by_side.py) and
commit every batch; each runs twice, interleaved, after one unmeasured run, on fresh paths.

    .venv/bin/python bench/storage.py [--batches 20] [--batch-rows 200000] [--paths ...]
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from side_by_side import Measured, compare, hand_bids, header, measure, print_rows

from arroyo.connectors.storage import configure, parse_location
from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.testing.s3 import S3Server

PATHS = ("parquet_s3", "delta_s3", "iceberg_s3")
SELECT = (
    "SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price, "
    "bid.datetime AS datetime FROM nexmark WHERE bid IS NOT NULL"
)
CATALOG = "bench_ice"
ZSTD = "zstd"


def _sink(path: str, prefix: str, storage: str) -> str:
    columns = "(auction BIGINT, bidder BIGINT, price BIGINT, datetime TIMESTAMP)"
    if path == "parquet_s3":
        return (
            f"CREATE TABLE out {columns} WITH (connector = 'filesystem', "
            f"path = '{prefix}', format = 'parquet', type = 'sink'{storage});"
        )
    if path == "delta_s3":
        return (
            f"CREATE TABLE out {columns} WITH (connector = 'delta', path = '{prefix}', "
            f"format = 'parquet', type = 'sink'{storage});"
        )
    return (
        f"CREATE TABLE out {columns} WITH (connector = 'iceberg', 'catalog.type' = 'hadoop', "
        f"'catalog.warehouse' = '{prefix}', table_name = 'bids', type = 'sink', "
        f"format = 'parquet'{storage});"
    )


def ours(spark: SparkSession, sql: str, tmp: str, rows: int) -> list[StreamingQuery]:
    program = spark_planner(spark, parallelism=2, state_dir=Path(tmp) / "plan").plan(sql)
    runner = PipelineRunner(
        spark, program, Path(tempfile.mkdtemp(dir=tmp)), max_records_per_batch=rows
    )
    runner.start()
    return runner.queries


def theirs(
    spark: SparkSession, path: str, prefix: str, tmp: str, args: argparse.Namespace
) -> list[StreamingQuery]:
    bids: DataFrame = hand_bids(spark, args).select(
        F.col("bid.auction").alias("auction"),
        F.col("bid.bidder").alias("bidder"),
        F.col("bid.price").alias("price"),
        F.col("bid.datetime").alias("datetime"),
    )
    # Parquet compressed as the sinks compress it by default (zstd, Arroyo's default; Spark's
    # is snappy, which costs less CPU): the same files on both sides.
    writer = (
        bids.writeStream.option("checkpointLocation", tempfile.mkdtemp(dir=tmp))
        .option("compression", ZSTD)
        .trigger(processingTime="0 seconds")
    )  # fmt: skip
    target = parse_location(prefix).uri.replace("s3://", "s3a://")
    if path == "parquet_s3":
        return [writer.format("parquet").option("path", target).start()]
    if path == "delta_s3":
        return [writer.format("delta").option("path", target).start()]
    table = f"{CATALOG}.hand.t{uuid.uuid4().hex[:8]}"
    spark.sql(
        f"CREATE TABLE {table} (auction BIGINT, bidder BIGINT, price BIGINT, "
        "datetime TIMESTAMP) USING iceberg"
    )
    return [writer.format("iceberg").toTable(table)]


def by_hand_foreach_batch(
    spark: SparkSession, prefix: str, tmp: str, args: argparse.Namespace
) -> list[StreamingQuery]:
    """Each micro-batch appended to the directory by ``df.write`` in a Python foreachBatch
    function: neither exactly once for plain readers nor named per batch, Spark's committer
    renaming (on S3, copying) each file out of ``_temporary``."""
    bids: DataFrame = hand_bids(spark, args).select(
        F.col("bid.auction").alias("auction"),
        F.col("bid.bidder").alias("bidder"),
        F.col("bid.price").alias("price"),
        F.col("bid.datetime").alias("datetime"),
    )
    target = parse_location(prefix).uri

    def write(df: DataFrame, _batch: int) -> None:
        df.write.mode("append").option("compression", ZSTD).parquet(target)

    writer = bids.writeStream.option("checkpointLocation", tempfile.mkdtemp(dir=tmp))
    return [writer.trigger(processingTime="0 seconds").foreachBatch(write).start()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-rows", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=1_000_000, help="event time rate")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated")
    args = parser.parse_args()
    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    with tempfile.TemporaryDirectory() as tmp, S3Server.start(Path(tmp) / "s3") as s3:
        s3.create_bucket("bench")
        storage = s3.with_clause()
        options = dict(s3.storage_options())
        base = parse_location(
            "s3://bench/x", {k.removeprefix("storage."): v for k, v in options.items()}
        )
        configure(spark, base)
        spark.conf.set(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
        spark.conf.set(f"spark.sql.catalog.{CATALOG}.warehouse", "s3a://bench/hand-iceberg")
        print(f"S3 server: versitygw at {s3.endpoint}; {args.batch_rows:,} events per batch")
        print(header(12))
        for path in args.paths.split(","):

            def fresh(side: str, path: str = path) -> str:
                return f"s3://bench/{side}-{path}-{uuid.uuid4().hex[:8]}"

            def ours_run(path: str = path) -> list[StreamingQuery]:
                sql = (
                    f"CREATE TABLE nexmark WITH (connector = 'nexmark', "
                    f"event_rate = '{args.rate}');\n"
                    f"{_sink(path, fresh('ours'), storage)}\nINSERT INTO out {SELECT};"
                )
                return ours(spark, sql, tmp, args.batch_rows)

            results = compare(
                ours_run,
                lambda path=path: theirs(spark, path, fresh("theirs"), tmp, args),  # type: ignore[misc]
                args.batches,
            )
            print_rows(path, 12, results, args.parallelism)
            if path == "parquet_s3":
                # The cost of a sink that is Python code per micro-batch (as ours is), apart
                # from what the sink does: the plain write in a foreachBatch function.
                by_batch = [
                    measure(lambda: by_hand_foreach_batch(spark, fresh("fb"), tmp, args), n)
                    for n in (2, args.batches, args.batches)
                ][1:]
                m = Measured.mean(by_batch)
                print(
                    f"{path:<12} {'pyspark, foreachBatch + df.write':<8} "
                    f"{m.events_per_s:>12,.0f} {m.events_per_s / args.parallelism:>12,.0f} "
                    f"{m.planning_ms:>12,.0f}"
                )


if __name__ == "__main__":
    main()
