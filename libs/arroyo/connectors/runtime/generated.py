"""Generated streams (impulse): event numbers made by Spark's rate sources in the JVM."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from arroyo.connectors.base import ReadContext
from arroyo.connectors.runtime.remote_state import write_durably


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
    batches instead (``_generator``).
    """
    kind, rows = _generator(ctx, events_per_second, total)
    option = "rowsPerSecond" if kind == "rate" else "rowsPerBatch"
    df = (
        ctx.spark.readStream.format(kind)
        .option(option, rows)
        .option("numPartitions", ctx.parallelism)
        .load()
    )
    # The caller projects once: every layer of the source's plan is analysed at start and
    # optimized again in every micro-batch.
    eoi = F.lit(False) if total is None else F.col("value") >= total
    return df, eoi


def _generator(ctx: ReadContext, events_per_second: float, total: int | None) -> tuple[str, int]:
    """Which of Spark's generators feeds the stream, and its rows a second (``rate``) or a batch
    (``rate-micro-batch``).

    Spark's rate source counts time in whole seconds and its first batch is empty: a bounded
    stream all due within its first second would come in the second batch, a second and a
    micro-batch late, so it comes whole in the first, with its end marker, from the fixed-size
    generator. The choice is made on a source's first run and kept in its state: the two keep
    their offsets in different forms, so a checkpoint goes on with the generator it started
    with, whatever the parallelism or batch cap of the run that resumes it."""
    marker = ctx.state_dir / "generator.json"
    if marker.exists():
        kind = str(json.loads(marker.read_text())["format"])
    else:
        at_once = total is not None and total <= events_per_second
        kind = "rate-micro-batch" if ctx.max_records_per_batch or at_once else "rate"
        if not ctx.planning:  # a plan's source is only analysed, and knows no batch cap
            write_durably(marker, json.dumps({"format": kind}))
    per_second = max(1, round(events_per_second))
    if kind == "rate":
        return kind, per_second
    return kind, ctx.max_records_per_batch or (total + 1 if total is not None else per_second)


def start_time_ms(state_dir: Path) -> int:
    """The time this source first started, kept in its state so event times survive restarts."""
    marker = state_dir / "start_time.json"
    if marker.exists():
        return int(json.loads(marker.read_text())["start_time_ms"])
    now = int(time.time() * 1000)
    write_durably(marker, json.dumps({"start_time_ms": now}))
    return now
