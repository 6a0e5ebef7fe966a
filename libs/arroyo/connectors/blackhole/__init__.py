"""``blackhole``: a sink that discards its rows, for benchmarks."""

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


class BlackholeConnector(Connector[NoOptions]):
    """Discards every row (for benchmarks); the work upstream still happens. It takes Spark's
    rows as they are, updating results too, so it needs no format. Delivery: none, as no
    reader sees any row."""

    name = "blackhole"
    description = "Discards rows"
    capabilities = Capabilities(sink=True, delivery="none", writes_lines=True)
    options_model = NoOptions

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: NoOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.blackhole.sink import discard

        return discard(df)

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: NoOptions) -> LineWriter:
        from arroyo.connectors.blackhole.sink import Discard

        return Discard()


__all__ = ["BlackholeConnector"]
