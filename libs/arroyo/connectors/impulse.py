"""``impulse``: a counter at a steady rate, for demos, tests and benchmarks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from arroyo.connectors.base import Capabilities, Connector, ConnectorOptions, ReadContext
from arroyo.program.spec import ColumnSpec, TableSpec
from arroyo.sql.time import parse_duration_us

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class ImpulseOptions(ConnectorOptions):
    event_rate: PositiveFloat = Field(description="events per second, over all subtasks")
    message_count: PositiveInt | None = Field(
        None, description="events per subtask; the table is bounded when set"
    )
    event_time_interval: int | None = Field(
        None,
        description="event time between consecutive events (microseconds, or an interval "
        "such as '1 second'); unset: the time each event is due",
    )

    @field_validator("event_time_interval", mode="before")
    @classmethod
    def _interval(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
            return parse_duration_us(value)
        return value


class ImpulseConnector(Connector[ImpulseOptions]):
    """Source. Columns ``counter`` (per subtask, from 0), ``subtask_index`` and ``timestamp`` (the
    event time). Delivery: exactly once; counters and event times are a pure function of the event
    number and the first start time (kept in the pipeline's state), so replays are identical.
    ``counter`` is BIGINT rather than Arroyo's u64: 2^63 events is out of reach."""

    name = "impulse"
    description = "Periodic counter events"
    capabilities = Capabilities(source=True, bounded="per_table", replayable=True, source_time=True)
    options_model = ImpulseOptions

    def columns(self, options: ImpulseOptions) -> list[ColumnSpec]:
        return [
            ColumnSpec("counter", "BIGINT", nullable=False),
            ColumnSpec("subtask_index", "BIGINT", nullable=False),
            ColumnSpec("timestamp", "TIMESTAMP", nullable=False),
        ]

    def bounded(self, options: ImpulseOptions) -> bool:
        return options.message_count is not None

    def read(self, ctx: ReadContext, table: TableSpec, options: ImpulseOptions) -> DataFrame:
        from pyspark.sql import functions as F

        from arroyo.connectors.runtime.generated import event_numbers, start_time_ms

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
