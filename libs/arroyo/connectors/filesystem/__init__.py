"""``filesystem``: a directory of local files (JSON lines or Parquet)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import Capabilities, Connector, ReadContext, WriteContext
from arroyo.connectors.filesystem.options import FilesystemOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class FilesystemConnector(Connector[FilesystemOptions]):
    """A directory of files (local paths). Source: bounded, reads the files present when the
    pipeline starts, in name order. Sink: exactly once through Spark's file sink, which commits
    the files of each micro-batch to its ``_spark_metadata`` log, so a replayed batch never
    duplicates a file; readers should read the directory through that log (Spark does, as does
    this source when files starting with ``_`` or ``.`` are skipped and uncommitted files are
    absent)."""

    name = "filesystem"
    description = "Files in a local directory (JSON lines or Parquet)"
    capabilities = Capabilities(
        source=True,
        sink=True,
        lookup=True,
        bounded="always",
        replayable=True,
        delivery="exactly_once",
        needs_format=True,
    )
    options_model = FilesystemOptions
    formats = frozenset({"json", "parquet", "raw_string"})
    default_format = "json"

    def read(self, ctx: ReadContext, table: TableSpec, options: FilesystemOptions) -> DataFrame:
        from arroyo.connectors.filesystem.source import read_directory

        return read_directory(ctx, table, options)

    def read_static(
        self, ctx: ReadContext, table: TableSpec, options: FilesystemOptions
    ) -> DataFrame:
        from arroyo.connectors.filesystem.source import read_directory_whole

        return read_directory_whole(ctx, table, options)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: FilesystemOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.filesystem.sink import write_directory

        return write_directory(df, table, options)


__all__ = ["FilesystemConnector", "FilesystemOptions"]
