"""Generated streams (impulse): event numbers made by Spark's rate sources in the JVM."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from arroyo.connectors.base import ReadContext


def event_numbers(
    ctx: ReadContext,
    events_per_second: float,
    total: int | None,
) -> tuple[DataFrame, Column]:
    """``value`` (0, 1, 2, ...) at the given rate, and whether a row is an end-of-input marker
    (``_eoi``, for the caller's projection): after ``total`` events every row is one, so a run
    resumed after the end sees the end again.

    Normally Spark's ``rate`` source paces the events (a second at a time). When the run caps
    its batches (tests that stop part-way, throughput benchmarks), or all ``total`` events are
    due within the first second, ``rate-micro-batch`` gives fixed-size, time-independent
    batches instead.
    """
    reader = ctx.spark.readStream
    # Spark's rate source counts time in whole seconds, and its first batch is empty: a bounded
    # stream that is all due within the first second came in the second batch, a second and a
    # micro-batch late. It comes in the first, with its end marker, from a fixed-size source.
    rows_per_batch = ctx.max_records_per_batch
    if rows_per_batch is None and total is not None and total <= events_per_second:
        rows_per_batch = total + 1
    if rows_per_batch:
        df = (
            reader.format("rate-micro-batch")
            .option("rowsPerBatch", rows_per_batch)
            .option("numPartitions", ctx.parallelism)
            .load()
        )
    else:
        df = (
            reader.format("rate")
            .option("rowsPerSecond", max(1, round(events_per_second)))
            .option("numPartitions", ctx.parallelism)
            .load()
        )
    # The caller projects once: every layer of the source's plan is analysed at start and
    # optimized again in every micro-batch.
    eoi = F.lit(False) if total is None else F.col("value") >= total
    return df, eoi


def start_time_ms(state_dir: Path) -> int:
    """The time this source first started, kept in its state so event times survive restarts."""
    marker = state_dir / "start_time.json"
    if marker.exists():
        return int(json.loads(marker.read_text())["start_time_ms"])
    state_dir.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"start_time_ms": now}))
    tmp.replace(marker)
    return now
