"""The filesystem sink: Spark's own file sink (Parquet, or the table's format as text lines),
which commits each micro-batch's files to its ``_spark_metadata`` log."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamWriter

from arroyo.connectors.filesystem.options import FilesystemOptions
from arroyo.connectors.runtime.file_tables import file_mode
from arroyo.formats.codec import encode
from arroyo.program.spec import TableSpec


def write_directory(
    df: DataFrame, table: TableSpec, options: FilesystemOptions
) -> DataStreamWriter:
    if file_mode(table) == "parquet":
        return df.writeStream.format("parquet").option("path", options.path)
    return encode(df, table).writeStream.format("text").option("path", options.path)
