"""Events/s of nexmark -> projection and nexmark -> keyed tumble count -> blackhole, run through
Arroyo (planner + runner) and written by hand in PySpark, side by side in one JVM (the method:
bench/side_by_side.py).

    .venv/bin/python bench/throughput.py [--batches 12] [--batch-rows 4000000] [--parallelism 2]
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from side_by_side import hand_bids, run

QUERIES = {
    "projection": "SELECT bid.auction AS auction, bid.price * 100 AS cents FROM nexmark "
    "WHERE bid IS NOT NULL",
    "tumble_count": "SELECT tumble(interval '1 second') AS window, bid.auction AS auction, "
    "count(*) AS bids FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2",
}


def by_hand(spark: SparkSession, name: str, args: argparse.Namespace) -> DataFrame:
    bids = hand_bids(spark, args)
    if name == "projection":
        return bids.select(
            F.col("bid.auction").alias("auction"), (F.col("bid.price") * 100).alias("cents")
        )
    return bids.groupBy(
        F.window("_timestamp", "1 second").alias("window"),
        F.col("bid.auction").alias("auction"),
    ).agg(F.count("*").alias("bids"))


if __name__ == "__main__":
    run(QUERIES, by_hand, batches=12, batch_rows=4_000_000, rate=10_000_000)
