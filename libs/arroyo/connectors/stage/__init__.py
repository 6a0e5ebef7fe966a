"""Stages: one query's rows handed to another query of the same pipeline, exactly once.

Spark runs its stream-stream join in append mode only and an aggregate without windows in
update mode only, so no single streaming query can aggregate the rows of Spark's join (keys of
two types, more than two inputs; Arroyo's interval join, which Nexmark q4 and q9 use, can be
followed by the aggregate in its own query). The planner splits such a query in two: the join
writes its rows into a stage, and the aggregate reads the stage as a stream
(arroyo.sql.planner.plan.stages: stage_join). Likewise an aggregate over an updating result
(Nexmark q4): the result's change records go into a stage, which the aggregate reads as a
changelog (stage_changes). The stage lives in the pipeline's state directory and
is internal: users never name it.

Exactly once, across crashes of either query:

- The writer (a foreachBatch function) writes each micro-batch's rows as Parquet (change
  records of an updating result: JSON lines) under a temporary name and renames the directory
  into place, whole or not at all. A batch replayed
  after a crash is not written again when it is there, or when the reader has already consumed
  it (the reader records the last batch it consumed before removing any file).
- The reader's offsets are batch ids, kept in its own checkpoint like any source's. Once its
  query commits a batch, Spark tells the source, which removes the files read: a stage holds
  only what is written and not yet read, however long the pipeline runs.
- When the writer's input has ended (a bounded pipeline), the runner marks the stage ended
  (``sink_finished``) and the reader emits the end-of-input marker after the last batch, so
  the reading query ends too.

One query reads each stage (the planner refuses a second), as only one can remove the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    LineWriter,
    NoOptions,
    ReadContext,
    WriteContext,
    table_state_dir,
)
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

STAGE_CONNECTOR = "__stage"


def stage_data_dir(table_dir: Path) -> Path:
    return table_dir / "data"


class StageConnector(Connector[NoOptions]):
    """Exactly once, in both directions (see the module docstring). Whether a stage ends is
    the planner's to say, from the query that writes it."""

    name = STAGE_CONNECTOR
    description = "Rows one query of the pipeline hands to another (internal)"
    capabilities = Capabilities(
        source=True,
        sink=True,
        bounded="per_table",
        replayable=True,
        delivery="exactly_once",
        # A stage of change records (an updating result read by an aggregate) has a format; a
        # stage of rows has none.
        needs_format=True,
        writes_lines=True,
        source_time=True,
    )
    options_model = NoOptions
    internal = True
    formats = frozenset({"debezium_json"})

    def read(self, ctx: ReadContext, table: TableSpec, options: NoOptions) -> DataFrame:
        from arroyo.connectors.stage.source import read_stage

        return read_stage(ctx, table, stage_data_dir(ctx.state_dir))

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: NoOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.stage.sink import StageWriter

        return df.writeStream.foreachBatch(StageWriter(_written_stage(ctx, table)))

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: NoOptions) -> LineWriter:
        from arroyo.connectors.stage.sink import StageLines

        return StageLines(_written_stage(ctx, table))

    def sink_finished(self, ctx: WriteContext, table: TableSpec, options: NoOptions) -> None:
        from arroyo.connectors.stage.sink import mark_ended

        mark_ended(_written_stage(ctx, table))


def _written_stage(ctx: WriteContext, table: TableSpec) -> Path:
    """The directory of the stage a query writes (made if new)."""
    root = stage_data_dir(table_state_dir(ctx.pipeline_dir, table.name))
    root.mkdir(parents=True, exist_ok=True)
    return root


__all__ = ["STAGE_CONNECTOR", "StageConnector", "stage_data_dir"]
