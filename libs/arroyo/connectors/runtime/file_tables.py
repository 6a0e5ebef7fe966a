"""File tables: the bounded streaming source (read in the JVM, with end-of-input markers) and a
lookup table's static read, for the connectors of local files."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arroyo.connectors.base import ConnectorError, ReadContext
from arroyo.connectors.runtime.files import open_lines
from arroyo.formats.codec import physical_columns
from arroyo.program.spec import TableSpec

# How a table's files are read: Parquet, or one record per line for the table's format.
FileMode = Literal["lines", "parquet"]
# The bounded file source (our Java).
FILES_SOURCE = "arroyo.files.BoundedFilesSource"


@dataclass(frozen=True, slots=True)
class FileSelection:
    """Which files under a path a table reads (``pattern``: a regular expression their path
    relative to it matches) and how their lines are compressed (none | gzip | zstd)."""

    pattern: str | None = None
    compression: str = "none"


def file_mode(table: TableSpec) -> FileMode:
    return "parquet" if table.format is not None and table.format.name == "parquet" else "lines"


def read_stream(
    ctx: ReadContext,
    table: TableSpec,
    path: str,
    mode: FileMode,
    selection: FileSelection = FileSelection(),
) -> DataFrame:
    """The files at ``path`` (a file or a directory; those ``pattern`` matches) as a bounded
    stream, read in the executors' JVMs (libs/arroyo/java/arroyo/files/BoundedFilesSource.java)."""
    reader = (
        ctx.spark.readStream.format(FILES_SOURCE)
        .option("path", path)
        .option("mode", mode)
        .option("max_records", ctx.max_records_per_batch or 0)
        .option("pattern", selection.pattern or "")
        .option("compression", selection.compression)
    )
    if mode == "parquet":
        # use_id: how the engine tells this source which columns each query uses
        # (arroyo.engine.plans.declare_column_use); one per read, so per table view.
        reader = (
            reader.option("columns", _columns_ddl(table))
            .option("use_id", uuid.uuid4().hex)
            .option("bad_data", table.format.bad_data if table.format else "fail")
        )
    return reader.load()


def list_files(spark: SparkSession, path: str, pattern: str | None = None) -> list[str]:
    """The files a file table at ``path`` reads, in the order the streaming source reads them
    (one listing, in the JVM: ``BoundedFilesSource.list``, so lookups and streams agree on
    hidden names and on what ``pattern`` matches)."""
    jvm = spark._jvm
    assert jvm is not None
    return [str(f) for f in jvm.arroyo.files.BoundedFilesSource.list(path, pattern or "")]


def read_static(
    ctx: ReadContext,
    table: TableSpec,
    path: str,
    mode: FileMode,
    selection: FileSelection = FileSelection(),
) -> DataFrame:
    """A lookup table: the files there when the query is built (the streaming source's
    listing), read whole by Spark's own readers. Spark keeps the listing, lengths included, for
    the query's life, so the table is meant to stay as it is while a pipeline reads it; a
    restarted pipeline lists and reads it afresh."""
    files = list_files(ctx.spark, path, selection.pattern)
    if not files:
        raise ConnectorError(f"lookup table '{table.name}': no files at '{path}'")
    if mode == "parquet":
        df = ctx.spark.read.schema(_columns_ddl(table)).parquet(*files)
    elif selection.compression != "none":
        if "://" in path and not path.startswith("file:"):
            raise ConnectorError(
                f"lookup table '{table.name}': compressed lines ({selection.compression}) are "
                f"read whole on the driver, from local files only, not from '{path}'"
            )
        # Decompressed here: Spark's text reader knows codecs by file suffix, not by option.
        lines = []
        for name in files:
            with open_lines(name, selection.compression) as f:
                lines += [(ln.decode("utf-8", "replace"),) for ln in f.read().splitlines()]
        df = ctx.spark.createDataFrame(lines, "`value` STRING")
        df = df.filter(F.trim(F.col("value")) != "")
    else:
        # Blank lines are no records, as for the streaming source.
        df = ctx.spark.read.text(files).filter(F.trim(F.col("value")) != "")
    return df.withColumn("_eoi", F.lit(False))


def _columns_ddl(table: TableSpec) -> str:
    return ", ".join(f"`{c.name}` {c.spark_type}" for c in physical_columns(table))
