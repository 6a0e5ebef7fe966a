"""Events/s of nexmark -> projection and nexmark -> keyed tumble count -> blackhole, run through
Arroyo (planner + runner) and written by hand in PySpark, side by side in one JVM.

    .venv/bin/python bench/throughput.py [--batches 12] [--batch-rows 4000000] [--parallelism 2]

Each side runs twice, interleaved (ours, theirs, theirs, ours), each run on fresh state. Both
sides read fixed-size batches of event numbers (Spark's ``rate-micro-batch`` source, which
is what Arroyo's generated sources use when batches are capped), so they do the same work per
batch whatever the speed. Throughput is rows in / time spent in micro-batches, over the batches
after the warm-up ones.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from arroyo.connectors.nexmark_generator import nexmark_columns
from arroyo.engine.runner import PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.sql.planner import Planner

QUERIES = {
    "projection": "SELECT bid.auction AS auction, bid.price * 100 AS cents FROM nexmark "
    "WHERE bid IS NOT NULL",
    "tumble_count": "SELECT tumble(interval '1 second') AS window, bid.auction AS auction, "
    "count(*) AS bids FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2",
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
    # Every Arroyo table has event time and a watermark, so the hand-written query does too.
    nexmark = nexmark.withWatermark("_timestamp", "1 second")
    bids = nexmark.filter("bid IS NOT NULL")
    if name == "projection":
        return bids.select(
            F.col("bid.auction").alias("auction"), (F.col("bid.price") * 100).alias("cents")
        )
    return bids.groupBy(
        F.window("_timestamp", "1 second").alias("window"),
        F.col("bid.auction").alias("auction"),
    ).agg(F.count("*").alias("bids"))


def measure(
    queries: Callable[[], list[StreamingQuery]], batches: int, warmup_batches: int = 3
) -> float:
    started = queries()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and any(
        len(q.recentProgress) < warmup_batches + batches for q in started
    ):
        if any(q.exception() for q in started if not q.isActive):
            raise RuntimeError(f"query failed: {next(q.exception() for q in started)}")
        time.sleep(0.5)
    rows = 0
    busy_ms = 0
    for q in started:
        for p in q.recentProgress[warmup_batches : warmup_batches + batches]:
            rows += p.numInputRows
            busy_ms += p.durationMs.get("triggerExecution", 0)
        q.stop()
    return rows / (busy_ms / 1000) if busy_ms else 0.0


def compare(
    ours: Callable[[], list[StreamingQuery]],
    theirs: Callable[[], list[StreamingQuery]],
    batches: int,
) -> dict[str, float]:
    """Each side twice, in the order ours, theirs, theirs, ours, so that a JVM still warming up
    (or the machine drifting) weighs on both sides alike; the mean of each side's two runs."""
    a1, b1, b2, a2 = (measure(q, batches) for q in (ours, theirs, theirs, ours))
    return {"arroyo": (a1 + a2) / 2, "pyspark": (b1 + b2) / 2}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--batch-rows", type=int, default=4_000_000)
    parser.add_argument("--rate", type=int, default=10_000_000, help="event time rate")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    print(f"{'query':<14} {'engine':<8} {'events/s':>12} {'per core':>12}")
    for name, select in QUERIES.items():
        with tempfile.TemporaryDirectory() as tmp:
            sql = (
                f"CREATE TABLE nexmark WITH (connector = 'nexmark', "
                f"event_rate = '{args.rate}');\n"
                f"CREATE TABLE sink WITH (connector = 'blackhole');\n"
                f"INSERT INTO sink {select};"
            )
            program = Planner(spark, parallelism=args.parallelism, state_dir=Path(tmp)).plan(sql)

            def ours(program: object = program, tmp: str = tmp) -> list[StreamingQuery]:
                runner = PipelineRunner(
                    spark,
                    program,  # type: ignore[arg-type]
                    Path(tempfile.mkdtemp(dir=tmp)),
                    max_records_per_batch=args.batch_rows,
                )
                runner.start()
                return runner.queries

            def theirs(name: str = name, tmp: str = tmp) -> list[StreamingQuery]:
                df = by_hand(spark, name, args.rate, args.batch_rows, args.parallelism)
                return [
                    df.writeStream.format("noop")
                    .outputMode("append")
                    .option("checkpointLocation", tempfile.mkdtemp(dir=tmp))
                    .trigger(processingTime="0 seconds")
                    .start()
                ]

            results = compare(ours, theirs, args.batches)
        for engine, eps in results.items():
            print(f"{name:<14} {engine:<8} {eps:>12,.0f} {eps / args.parallelism:>12,.0f}")
        overhead = 1 - results["arroyo"] / results["pyspark"] if results["pyspark"] else 0
        print(f"{name:<14} arroyo overhead vs hand-written PySpark: {overhead:+.1%}")


if __name__ == "__main__":
    main()
