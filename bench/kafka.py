"""Events/s of Kafka -> projection -> Kafka and Kafka -> keyed tumble -> Kafka, through Arroyo
(planner + runner) and written by hand in PySpark, side by side in one JVM on the same broker.

A real broker (arroyo.testing.kafka, KRaft on loopback) is started, and the input topic is
filled once with JSON bids (written by Spark itself). Both sides read the same topic from the
beginning in fixed-size micro-batches (``maxOffsetsPerTrigger``) and write JSON to a topic of
their own through Spark's Kafka sink; throughput is rows in / time in micro-batches after the
warm-up ones, each side run twice, interleaved (bench/side_by_side.py).

    .venv/bin/python bench/kafka.py [--events 6000000] [--batch-rows 500000] [--batches 8]
        [--queries projection,tumble_count]
"""

from __future__ import annotations

import argparse
import tempfile
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from side_by_side import compare, header, print_rows

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.testing.kafka import KafkaBroker

SCHEMA = "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP"
QUERIES = {
    "projection": "SELECT auction, price * 100 AS cents FROM bids",
    "tumble_count": "SELECT tumble(interval '1 second') AS window, auction, count(*) AS n "
    "FROM bids GROUP BY 1, 2",
}


def fill(spark: SparkSession, servers: str, topic: str, events: int, partitions: int) -> None:
    """``events`` JSON bids, 100 K events per second of event time, in order."""
    bids = spark.range(0, events, numPartitions=partitions).select(
        (F.col("id") % 1000).alias("auction"),
        (F.col("id") % 10007).alias("bidder"),
        (F.col("id") % 997 + 1).alias("price"),
        F.timestamp_micros(F.lit(1_700_000_000_000_000) + F.col("id") * 10).alias("ts"),
    )
    bids.select(F.to_json(F.struct("*")).alias("value")).write.format("kafka").option(
        "kafka.bootstrap.servers", servers
    ).option("topic", topic).save()


def by_hand(spark: SparkSession, name: str, servers: str, topic: str, rows: int) -> DataFrame:
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", rows)
        .load()
    )
    bids = raw.select(F.from_json(F.col("value").cast("STRING"), SCHEMA).alias("b")).select("b.*")
    bids = bids.withWatermark("ts", "1 second")
    if name == "projection":
        out = bids.select("auction", (F.col("price") * 100).alias("cents"))
    else:
        out = bids.groupBy(F.window("ts", "1 second").alias("window"), "auction").agg(
            F.count("*").alias("n")
        )
    return out.select(F.to_json(F.struct("*")).alias("value"))


def theirs(df: DataFrame, servers: str, out: str, tmp: str) -> list[StreamingQuery]:
    return [
        df.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("topic", out)
        .option("checkpointLocation", tempfile.mkdtemp(dir=tmp))
        .trigger(processingTime="0 seconds")
        .start()
    ]


def ours(spark: SparkSession, sql: str, tmp: str, rows: int) -> list[StreamingQuery]:
    program = spark_planner(spark, parallelism=2, state_dir=Path(tmp) / "plan").plan(sql)
    runner = PipelineRunner(
        spark, program, Path(tempfile.mkdtemp(dir=tmp)), max_records_per_batch=rows
    )
    runner.start()
    return runner.queries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=6_000_000)
    parser.add_argument("--batch-rows", type=int, default=500_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--queries", default=",".join(QUERIES), help="comma-separated")
    args = parser.parse_args()
    spark = get_or_create_session(SessionSettings(parallelism=2))
    with tempfile.TemporaryDirectory() as tmp, KafkaBroker.start(Path(tmp) / "kafka") as broker:
        servers = broker.bootstrap_servers
        broker.create_topic("bids", partitions=args.partitions)
        broker.create_topic("out", partitions=args.partitions)
        fill(spark, servers, "bids", args.events, args.partitions)
        print(f"{args.events:,} JSON bids in topic 'bids' ({args.partitions} partitions)")
        print(header(14))
        for name in args.queries.split(","):
            select = QUERIES[name]
            sql = (
                f"CREATE TABLE bids ({SCHEMA}, WATERMARK FOR ts AS ts - INTERVAL '1 second') "
                f"WITH (connector = 'kafka', bootstrap_servers = '{servers}', topic = 'bids', "
                f"type = 'source', format = 'json', 'source.offset' = 'earliest');\n"
                f"CREATE TABLE out WITH (connector = 'kafka', bootstrap_servers = '{servers}', "
                f"topic = 'out', type = 'sink', format = 'json');\n"
                f"INSERT INTO out {select};"
            )
            results = compare(
                partial(ours, spark, sql, tmp, args.batch_rows),
                partial(
                    theirs,
                    by_hand(spark, name, servers, "bids", args.batch_rows),
                    servers,
                    "out",
                    tmp,
                ),
                args.batches,
            )
            print_rows(name, 14, results, 2)


if __name__ == "__main__":
    main()
