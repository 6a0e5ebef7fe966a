"""Events/s of an updating aggregate by key and of a scalar Python UDF, each run through Arroyo
(planner + runner) and written by hand in PySpark, side by side in one JVM (the method:
bench/side_by_side.py).

    .venv/bin/python bench/sql_features.py [--batches 8] [--batch-rows 1000000]
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from side_by_side import hand_bids, run

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


def by_hand(spark: SparkSession, name: str, args: argparse.Namespace) -> DataFrame:
    bids = hand_bids(spark, args)
    if name == "updating_count":
        # As Arroyo runs it: with the time of each key's last update, which updating_ttl
        # (default 24 hours) expires the key's state by.
        timed = bids.withColumn("touched", F.current_timestamp())
        return timed.groupBy(F.col("bid.auction").alias("auction")).agg(
            F.count("*").alias("bids"), F.max("bid.price").alias("top"), F.max("touched")
        )
    cents = F.udf(lambda price: price * 100, "BIGINT", useArrow=True)
    return bids.select(cents(F.col("bid.price")).alias("c"))


if __name__ == "__main__":
    run(
        QUERIES,
        by_hand,
        batches=8,
        batch_rows=1_000_000,
        rate=1_000_000,
        update_mode=frozenset({"updating_count"}),
        udfs=load(UDFS, "bench_udfs.py"),
    )
