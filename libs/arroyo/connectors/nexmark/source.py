"""The nexmark source: the events of the Java generator (runtime/nexmark_generator.py), from the
time the table's pipeline first started."""

from __future__ import annotations

from pyspark.sql import DataFrame

from arroyo.connectors.base import ReadContext
from arroyo.connectors.nexmark.options import NexmarkOptions
from arroyo.connectors.runtime.generated import start_time_ms
from arroyo.connectors.runtime.nexmark_generator import nexmark_stream


def nexmark_events(ctx: ReadContext, options: NexmarkOptions) -> DataFrame:
    return nexmark_stream(
        ctx.spark,
        event_rate=options.event_rate,
        start_ms=start_time_ms(ctx.state_dir),
        partitions=ctx.parallelism,
        rows_per_batch=ctx.max_records_per_batch,
        total=round(options.event_rate * options.runtime) if options.runtime else None,
    )
