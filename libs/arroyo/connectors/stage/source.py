"""The stage source: a stage's batches read back as a stream (runtime/stage_files.py)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame

from arroyo.connectors.base import ReadContext
from arroyo.connectors.runtime.stage_files import StageSource
from arroyo.program.spec import TableSpec


def read_stage(ctx: ReadContext, table: TableSpec, root: Path) -> DataFrame:
    """The stage at ``root``: its rows (the table's columns), or its change records as
    ``value`` for the table's format (debezium_json)."""
    reader = ctx.spark.readStream.format(StageSource.name()).option("path", str(root))
    if table.format is None:
        columns = ", ".join(f"`{c.name}` {c.spark_type}" for c in table.columns)
        reader = reader.option("columns", columns)
    ctx.spark.dataSource.register(StageSource)
    return reader.load()
