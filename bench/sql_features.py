"""Events/s of an updating aggregate by key and of a scalar Python UDF, each run through Arroyo
(planner + runner) and written by hand in PySpark, side by side in one JVM.

    .venv/bin/python bench/sql_features.py [--batches 8] [--batch-rows 1000000]

Both sides read the same fixed-size batches of Nexmark events into a no-op sink (see
bench/throughput.py for the method).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from throughput import compare

from arroyo.connectors.nexmark_generator import nexmark_columns
from arroyo.engine.runner import PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.sql.planner import Planner
from arroyo.udfs import load

UDFS = """
from arroyo_udf import udf

@udf
def cents(price: int) -> int:
    return price * 100
"""

QUERIES = {
    "updating_count": "SELECT bid.auction AS auction, count(*) AS bids, max(bid.price) AS top "
    "FROM nexmark WHERE bid IS NOT NULL GROUP BY bid.auction",
    "python_udf": "SELECT cents(bid.price) AS c FROM nexmark WHERE bid IS NOT NULL",
}


def by_hand(
    spark: SparkSession, name: str, rate: int, batch_rows: int, parallelism: int
) -> DataFrame:
    events = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", batch_rows)
        .option("numPartitions", parallelism)
        .load()
    )
    nexmark = events.select(*nexmark_columns(F.col("value"), int(time.time() * 1000), rate))
    bids = nexmark.withWatermark("_timestamp", "1 second").filter("bid IS NOT NULL")
    if name == "updating_count":
        return bids.groupBy(F.col("bid.auction").alias("auction")).agg(
            F.count("*").alias("bids"), F.max("bid.price").alias("top")
        )
    cents = F.udf(lambda price: price * 100, "BIGINT", useArrow=True)
    return bids.select(cents(F.col("bid.price")).alias("c"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=1_000_000, help="event time rate")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    library = load(UDFS, "bench_udfs.py")
    print(f"{'query':<16} {'engine':<8} {'events/s':>12} {'per core':>12}")
    for name, select in QUERIES.items():
        mode = "update" if name == "updating_count" else "append"
        with tempfile.TemporaryDirectory() as tmp:
            sql = (
                f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{args.rate}');\n"
                f"CREATE TABLE sink WITH (connector = 'blackhole');\n"
                f"INSERT INTO sink {select};"
            )
            planner = Planner(
                spark, parallelism=args.parallelism, state_dir=Path(tmp), udfs=library
            )
            program = planner.plan(sql)

            def ours(program: object = program, tmp: str = tmp) -> list[StreamingQuery]:
                runner = PipelineRunner(
                    spark,
                    program,  # type: ignore[arg-type]
                    Path(tempfile.mkdtemp(dir=tmp)),
                    max_records_per_batch=args.batch_rows,
                )
                runner.start()
                return runner.queries

            def theirs(name: str = name, tmp: str = tmp, mode: str = mode) -> list[StreamingQuery]:
                df = by_hand(spark, name, args.rate, args.batch_rows, args.parallelism)
                return [
                    df.writeStream.format("noop")
                    .outputMode(mode)
                    .option("checkpointLocation", tempfile.mkdtemp(dir=tmp))
                    .trigger(processingTime="0 seconds")
                    .start()
                ]

            results = compare(ours, theirs, args.batches)
        for engine, eps in results.items():
            print(f"{name:<16} {engine:<8} {eps:>12,.0f} {eps / args.parallelism:>12,.0f}")
        overhead = 1 - results["arroyo"] / results["pyspark"] if results["pyspark"] else 0
        print(f"{name:<16} arroyo overhead vs hand-written PySpark: {overhead:+.1%}")


if __name__ == "__main__":
    main()
