"""The single_file source: the file's records, one per line, as a bounded stream, or whole as
a lookup table (runtime/file_tables.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from arroyo.connectors.base import ReadContext
from arroyo.connectors.runtime.file_tables import read_static, read_stream
from arroyo.connectors.single_file.options import SingleFileOptions
from arroyo.program.spec import TableSpec


def read_file(ctx: ReadContext, table: TableSpec, options: SingleFileOptions) -> DataFrame:
    return read_stream(ctx, table, options.path, "lines")


def read_file_whole(ctx: ReadContext, table: TableSpec, options: SingleFileOptions) -> DataFrame:
    return read_static(ctx, table, options.path, "lines")
