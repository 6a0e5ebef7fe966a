"""``single_file``: one newline-delimited file, as a source, a sink or a lookup table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    LineWriter,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.single_file.options import SingleFileOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class SingleFileConnector(Connector[SingleFileOptions]):
    """One newline-delimited file. Source: bounded, reads the file once, exactly once. Sink: one
    JSON object per line, appended per micro-batch; a replayed batch is cut back and rewritten,
    so each row appears exactly once. A new pipeline (empty state) starts the file afresh."""

    name = "single_file"
    description = "A newline-delimited file"
    capabilities = Capabilities(
        source=True,
        sink=True,
        lookup=True,
        bounded="always",
        replayable=True,
        delivery="exactly_once",
        needs_format=True,
        writes_lines=True,
    )
    options_model = SingleFileOptions
    formats = frozenset({"json", "debezium_json", "raw_string", "raw_bytes"})
    default_format = "json"

    def read(self, ctx: ReadContext, table: TableSpec, options: SingleFileOptions) -> DataFrame:
        from arroyo.connectors.single_file.source import read_file

        return read_file(ctx, table, options)

    def read_static(
        self, ctx: ReadContext, table: TableSpec, options: SingleFileOptions
    ) -> DataFrame:
        from arroyo.connectors.single_file.source import read_file_whole

        return read_file_whole(ctx, table, options)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: SingleFileOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.runtime.sinks import write_lines

        return write_lines(self.line_writer(ctx, table, options), df, table)

    def line_writer(
        self, ctx: WriteContext, table: TableSpec, options: SingleFileOptions
    ) -> LineWriter:
        from arroyo.connectors.single_file.sink import file_appender

        return file_appender(ctx, options)


__all__ = ["SingleFileConnector", "SingleFileOptions"]
