"""Nexmark events as the harness's engines read them: our generator in the JVM (for Arroyo and
hand-written PySpark) and the same events in Parquet (for engines that cannot run it: Flink).

    .venv/bin/python bench/nexmark_events.py --events 10000000 --out DIR [--rate 1000000]
        [--bids-only]

The Parquet layout is the ``nexmark`` table's, flattened one level for portability: one row per
event with ``event_type`` (0 person, 1 auction, 2 bid), the three nullable structs, and
``date_time``, the event time. Timestamps are INT64 microseconds (``TIMESTAMP_MICROS``), which
every Parquet reader understands (Spark's default INT96 is deprecated). Event ``n`` happens at
``BASE_TIME_MS + n / rate`` seconds, the same times the ``nexmark`` connector gives when it
starts at ``BASE_TIME_MS``.

Row groups hold ``ROW_GROUP_ROWS`` events. There are exactly ``--parallelism`` files,
range-partitioned by ``date_time`` and sorted by it within each: an engine reading them with
that parallelism gives each reader one file, read in event-time order. More files than readers
would break event time: Flink hands files to its readers in no particular order, so a reader
taking a later file before an earlier one moves its watermark past the earlier file's events,
which windows then drop as late.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arroyo.connectors.runtime.nexmark_generator import nexmark_batch
from arroyo.engine.session import SessionSettings, get_or_create_session

# 2026-01-01T00:00:00Z: a fixed start, so a Parquet file is the same whenever it is written.
BASE_TIME_MS = 1_767_225_600_000
MANIFEST = "nexmark.json"
# Rows per Parquet row group: the unit a reader can hand to a core. Spark's default (128 MB)
# makes one group of a 5 M-event file, which one task must decode whole; 50,000 rows (about
# 2 MB) give a 500 K-event micro-batch ten groups to share among its cores.
ROW_GROUP_ROWS = 50_000


def generated(spark: SparkSession, events: int, rate: float, partitions: int) -> DataFrame:
    """The first ``events`` Nexmark events as a batch DataFrame."""
    return nexmark_batch(
        spark, event_rate=rate, start_ms=BASE_TIME_MS, total=events, partitions=partitions
    ).withColumnRenamed("_source_time", "_timestamp")


def write_parquet(
    spark: SparkSession,
    out: Path,
    events: int,
    rate: float,
    partitions: int,
    *,
    bids_only: bool = False,
) -> Path:
    """Writes (or reuses, when the manifest says it holds the same events) ``out``. With
    ``bids_only``, the first ``events`` bids of the stream (its other events left out, the bids'
    times as they were), for queries of bids alone."""
    manifest = out / MANIFEST
    wanted = {
        "events": events,
        "rate": rate,
        "base_time_ms": BASE_TIME_MS,
        "files": partitions,
        "row_group_rows": ROW_GROUP_ROWS,
        "bids_only": bids_only,
    }
    if manifest.exists() and json.loads(manifest.read_text()) == wanted:
        return out
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    if bids_only:
        # Event n is a bid when n % 50 is 4..49 (NexmarkGenerator.java): just enough events
        # for ``events`` bids, the others left out.
        cycles, rest = divmod(events, 46)
        df = generated(spark, cycles * 50 + (4 + rest if rest else 0), rate, partitions)
        df = df.filter(F.col("bid").isNotNull())
    else:
        df = generated(spark, events, rate, partitions)
    kind = F.when(F.col("person").isNotNull(), 0).when(F.col("auction").isNotNull(), 1)
    df = df.select(
        kind.otherwise(2).cast("int").alias("event_type"),
        "person",
        "auction",
        "bid",
        F.col("_timestamp").alias("date_time"),
    )
    # One file per reader, each in event-time order (see the module's docstring).
    df.repartitionByRange(partitions, "date_time").sortWithinPartitions("date_time").write.mode(
        "overwrite"
    ).option("parquet.block.row.count.limit", ROW_GROUP_ROWS).parquet(str(out / "events"))
    manifest.write_text(json.dumps(wanted))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rate", type=float, default=1_000_000, help="events per second")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--bids-only", action="store_true", help="bids alone, --events of them")
    args = parser.parse_args()
    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    started = time.monotonic()
    write_parquet(
        spark, args.out, args.events, args.rate, args.parallelism, bids_only=args.bids_only
    )
    print(f"{args.events:,} events in {args.out} ({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
