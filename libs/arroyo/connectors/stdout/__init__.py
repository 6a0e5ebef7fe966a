"""``stdout``: rows printed as they are written, for trying queries out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    LineWriter,
    NoOptions,
    WriteContext,
)
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class StdoutConnector(Connector[NoOptions]):
    """Prints each row as a JSON line on the process's standard output; in a cluster worker,
    which has no terminal, the rows go to the job's live output instead (see
    ``sink.route_stdout``). At least once: a batch replayed after a crash is printed again."""

    name = "stdout"
    description = "Rows printed to standard output"
    capabilities = Capabilities(
        sink=True, delivery="at_least_once", needs_format=True, writes_lines=True
    )
    options_model = NoOptions
    formats = frozenset({"json", "debezium_json", "raw_string"})
    default_format = "json"

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: NoOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.runtime.sinks import write_lines

        return write_lines(self.line_writer(ctx, table, options), df, table)

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: NoOptions) -> LineWriter:
        from arroyo.connectors.stdout.sink import stdout_writer

        return stdout_writer(table)


__all__ = ["StdoutConnector"]
