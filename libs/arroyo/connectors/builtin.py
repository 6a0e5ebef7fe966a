"""The file, stdout and blackhole connectors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    ConnectorError,
    ConnectorOptions,
    LineWriter,
    NoOptions,
    ReadContext,
    WriteContext,
)
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class FileOptions(ConnectorOptions):
    path: str = Field(description="local path of the file (single_file) or directory (filesystem)")


def _read_files(ctx: ReadContext, table: TableSpec, path: str, mode: str) -> DataFrame:
    from arroyo.connectors.runtime.files import BoundedFilesSource
    from arroyo.formats.codec import physical_columns

    ctx.spark.dataSource.register(BoundedFilesSource)
    reader = (
        ctx.spark.readStream.format(BoundedFilesSource.name())
        .option("path", path)
        .option("mode", mode)
        .option("max_records", ctx.max_records_per_batch or 0)
    )
    if mode == "parquet":
        reader = reader.option(
            "columns", ", ".join(f"`{c.name}` {c.spark_type}" for c in physical_columns(table))
        )
    return reader.load()


def _read_static_files(ctx: ReadContext, table: TableSpec, path: str, mode: str) -> DataFrame:
    """A lookup table: the files there when the query is built (the streaming source's
    listing), read whole by Spark's own readers. Spark keeps the listing, lengths included, for
    the query's life, so the table is meant to stay as it is while a pipeline reads it; a
    restarted pipeline lists and reads it afresh."""
    from pyspark.sql import functions as F

    from arroyo.connectors.runtime.files import list_files
    from arroyo.formats.codec import physical_columns

    files = list_files(path)
    if not files:
        raise ConnectorError(f"lookup table '{table.name}': no files at '{path}'")
    if mode == "parquet":
        schema = ", ".join(f"`{c.name}` {c.spark_type}" for c in physical_columns(table))
        df = ctx.spark.read.schema(schema).parquet(*files)
    else:
        # Blank lines are no records, as for the streaming source (connectors/runtime/files.py).
        df = ctx.spark.read.text(files).filter(F.trim(F.col("value")) != "")
    return df.withColumn("_eoi", F.lit(False))


def _mode(table: TableSpec) -> str:
    """How the file source reads a table's files: Parquet, or records one per line."""
    return "parquet" if table.format is not None and table.format.name == "parquet" else "lines"


def _write_lines(writer: LineWriter, df: DataFrame, table: TableSpec) -> DataStreamWriter:
    from arroyo.connectors.runtime.sinks import WriteBatches
    from arroyo.formats.codec import encode

    return encode(df, table).writeStream.foreachBatch(WriteBatches(writer))


class SingleFileConnector(Connector[FileOptions]):
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
    options_model = FileOptions
    formats = frozenset({"json", "debezium_json", "raw_string", "raw_bytes"})
    default_format = "json"

    def read(self, ctx: ReadContext, table: TableSpec, options: FileOptions) -> DataFrame:
        return _read_files(ctx, table, options.path, "lines")

    def read_static(self, ctx: ReadContext, table: TableSpec, options: FileOptions) -> DataFrame:
        return _read_static_files(ctx, table, options.path, "lines")

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: FileOptions
    ) -> DataStreamWriter:
        return _write_lines(self.line_writer(ctx, table, options), df, table)

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: FileOptions) -> LineWriter:
        from arroyo.connectors.runtime.sinks import BatchCommitLog, FileAppender

        return FileAppender(options.path, BatchCommitLog(ctx.state_dir / "committed.json"))


class FilesystemConnector(Connector[FileOptions]):
    """A directory of files (local paths). Source: bounded, reads the files present when the
    pipeline starts, in name order. Sink: Spark's file sink, which commits the files of each
    micro-batch to its ``_spark_metadata`` log, so a replayed batch never duplicates a file;
    readers should read the directory through that log (Spark does, as does this source when
    files starting with ``_`` or ``.`` are skipped and uncommitted files are absent)."""

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
    options_model = FileOptions
    formats = frozenset({"json", "parquet", "raw_string"})
    default_format = "json"

    def read(self, ctx: ReadContext, table: TableSpec, options: FileOptions) -> DataFrame:
        return _read_files(ctx, table, options.path, _mode(table))

    def read_static(self, ctx: ReadContext, table: TableSpec, options: FileOptions) -> DataFrame:
        return _read_static_files(ctx, table, options.path, _mode(table))

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: FileOptions
    ) -> DataStreamWriter:
        from arroyo.formats.codec import encode

        if _mode(table) == "parquet":
            return df.writeStream.format("parquet").option("path", options.path)
        return encode(df, table).writeStream.format("text").option("path", options.path)


class StdoutConnector(Connector[NoOptions]):
    """Prints each row as a JSON line on the process's standard output; in a cluster worker,
    which has no terminal, the rows go to the job's live output instead (see
    ``sinks.route_stdout``). At least once: a batch replayed after a crash is printed again."""

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
        return _write_lines(self.line_writer(ctx, table, options), df, table)

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: NoOptions) -> LineWriter:
        from arroyo.connectors.runtime.sinks import LiveOutput, StdoutPrinter, stdout_route

        route = stdout_route()
        return LiveOutput(route, table.name) if route else StdoutPrinter()


class BlackholeConnector(Connector[NoOptions]):
    """Discards every row (for benchmarks); the work upstream still happens. Delivery: none,
    as no reader sees any row."""

    name = "blackhole"
    description = "Discards rows"
    capabilities = Capabilities(sink=True, delivery="none", writes_lines=True)
    options_model = NoOptions

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: NoOptions
    ) -> DataStreamWriter:
        return df.writeStream.format("noop")

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: NoOptions) -> LineWriter:
        from arroyo.connectors.runtime.sinks import Discard

        return Discard()
