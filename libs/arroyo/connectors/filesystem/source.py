"""The filesystem source: the directory's visible files, in name order, as a bounded stream,
or whole as a lookup table (runtime/file_tables.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from arroyo.connectors.base import ReadContext
from arroyo.connectors.filesystem.options import FilesystemOptions
from arroyo.connectors.runtime.file_tables import file_mode, read_static, read_stream
from arroyo.program.spec import TableSpec


def read_directory(ctx: ReadContext, table: TableSpec, options: FilesystemOptions) -> DataFrame:
    return read_stream(ctx, table, options.location.uri, file_mode(table), options.selection)


def read_directory_whole(
    ctx: ReadContext, table: TableSpec, options: FilesystemOptions
) -> DataFrame:
    return read_static(ctx, table, options.location.uri, file_mode(table), options.selection)
