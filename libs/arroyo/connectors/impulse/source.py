"""The impulse source: Spark's rate sources number the events in the JVM; one projection makes
them counters and event times."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from arroyo.connectors.base import ReadContext
from arroyo.connectors.impulse.options import ImpulseOptions
from arroyo.connectors.runtime.generated import event_numbers, start_time_ms


def impulse_stream(ctx: ReadContext, options: ImpulseOptions) -> DataFrame:
    subtasks = ctx.parallelism
    total = options.message_count * subtasks if options.message_count else None
    events, eoi = event_numbers(ctx, options.event_rate, total)
    start_us = start_time_ms(ctx.state_dir) * 1000
    step_us = options.event_time_interval or round(1e6 * subtasks / options.event_rate)
    counter = F.floor(F.col("value") / subtasks).cast("BIGINT")
    timestamp = F.timestamp_micros(F.lit(start_us) + counter * F.lit(step_us))
    return events.select(
        counter.alias("counter"),
        F.pmod(F.col("value"), F.lit(subtasks)).cast("BIGINT").alias("subtask_index"),
        timestamp.alias("timestamp"),
        eoi.alias("_eoi"),
        timestamp.alias("_source_time"),
    )
