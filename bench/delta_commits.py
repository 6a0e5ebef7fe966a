"""Seconds per 100-row append to a Delta table from one session, by the number of tasks Delta
builds a table's snapshot with (``spark.databricks.delta.snapshotPartitions``): what each
micro-batch of the delta sink pays. Prints one line per setting, five appends each.

  .venv/bin/python bench/delta_commits.py [--settings 50,2,1] [--appends 5]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from arroyo.engine.session import DELTA_SNAPSHOT_PARTITIONS, SessionSettings, get_or_create_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", default="50,2,1")
    parser.add_argument("--appends", type=int, default=5)
    args = parser.parse_args()
    spark = get_or_create_session(SessionSettings(parallelism=2, shuffle_partitions=2))
    root = Path(tempfile.mkdtemp(prefix="delta-bench-"))
    # A first table, so that every setting below runs in a warm JVM.
    for setting in ["warm-up", *args.settings.split(",")]:
        if setting != "warm-up":
            spark.conf.set(DELTA_SNAPSHOT_PARTITIONS, setting)
        table = str(root / setting)
        seconds = []
        for i in range(args.appends):
            # As the sink writes a micro-batch: by partition, under its transaction id.
            df = (
                spark.range(i * 100, (i + 1) * 100)
                .selectExpr("id AS n", "CAST(id % 3 AS STRING) AS k")
                .repartition("k")
            )
            started = time.monotonic()
            (
                df.write.format("delta")
                .mode("append")
                .option("txnAppId", "bench")
                .option("txnVersion", str(i))
                .partitionBy("k")
                .save(table)
            )
            seconds.append(time.monotonic() - started)
        print(f"snapshotPartitions={setting}: " + ", ".join(f"{s:.2f}" for s in seconds) + " s")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
